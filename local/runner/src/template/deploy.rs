//! What a deployment keeps: every table and bucket that holds user data, moderation or
//! reconciliation state outlives a stack delete and a replacement, and every table among
//! them is recoverable and protected from deletion unless the operator turns that off.

use std::collections::BTreeMap;

use super::*;

/// Tables whose rows are only live connections and their subscriptions: a client
/// reconnects, and with the WebSocket API gone they mean nothing.
const CONNECTION_TABLES: [&str; 3] = [
    "LiveConnectionsTable",
    "LiveSubscriptionsTable",
    "LivePushesTable",
];

/// Every other table, the export bucket and its policy, and the cursor signing key are
/// retained on delete and on replacement; every such table has point-in-time recovery,
/// whatever the engine, and deletion protection as `TableDeletionProtection` says (on by
/// default).
#[test]
fn every_stateful_resource_is_retained_recoverable_and_protected() {
    let template = Template::load(&default_path()).unwrap();
    let unprotected = Template::load(&default_path())
        .unwrap()
        .with_parameters(BTreeMap::from([(
            "TableDeletionProtection".into(),
            "false".into(),
        )]));
    let tables = template.resources_of("AWS::DynamoDB::Table");
    let mut kept: Vec<(String, &Value)> = tables
        .iter()
        .filter(|(id, _)| !CONNECTION_TABLES.contains(&id.as_str()))
        .map(|(id, table)| (id.clone(), *table))
        .collect();
    assert!(kept.len() >= 8, "{:?}", tables.keys());
    for (id, table) in &kept {
        let chosen = template.chosen(&table["Properties"]);
        assert_eq!(
            chosen["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"].as_bool(),
            Some(true),
            "{id} is recoverable"
        );
        assert_eq!(
            chosen["DeletionProtectionEnabled"].as_bool(),
            Some(true),
            "{id} is protected by default"
        );
        let off = unprotected.chosen(&table["Properties"]);
        assert_eq!(
            off["DeletionProtectionEnabled"].as_bool(),
            Some(false),
            "{id} follows TableDeletionProtection"
        );
    }
    for kind in [
        "AWS::S3::Bucket",
        "AWS::S3::BucketPolicy",
        "AWS::SecretsManager::Secret",
    ] {
        let found = template.resources_of(kind);
        assert!(!found.is_empty(), "the template has a {kind}");
        kept.extend(found);
    }
    for (id, resource) in &kept {
        for policy in ["DeletionPolicy", "UpdateReplacePolicy"] {
            assert_eq!(resource[policy].as_str(), Some("Retain"), "{id}'s {policy}");
        }
    }
}
