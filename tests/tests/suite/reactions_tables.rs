//! The tables the emulator creates, against the template: every table's keys, local
//! secondary indexes and stream, and the Reactions table's shape as designed.

use likes_tests::TestStack;

/// `(name, type)` pairs of a template key schema.
fn template_keys(schema: &serde_yaml::Value) -> Vec<(String, String)> {
    schema
        .as_sequence()
        .unwrap()
        .iter()
        .map(|k| {
            let field = |f: &str| k[f].as_str().unwrap().to_owned();
            (field("AttributeName"), field("KeyType"))
        })
        .collect()
}

fn described_keys(schema: &[aws_sdk_dynamodb::types::KeySchemaElement]) -> Vec<(String, String)> {
    schema
        .iter()
        .map(|k| {
            (
                k.attribute_name().to_owned(),
                k.key_type().as_str().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn every_created_table_matches_the_template() {
    let stack = TestStack::start().await;
    let tables = stack.stack.template.resources_of("AWS::DynamoDB::Table");
    assert!(tables.contains_key("ReactionsTable"));
    for (logical_id, resource) in tables {
        let props = &resource["Properties"];
        let table = stack
            .dynamodb()
            .describe_table()
            .table_name(stack.name(&logical_id))
            .send()
            .await
            .unwrap()
            .table
            .unwrap();
        assert_eq!(
            described_keys(table.key_schema()),
            template_keys(&props["KeySchema"]),
            "{logical_id} keys"
        );
        let lsis = props["LocalSecondaryIndexes"]
            .as_sequence()
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            table.local_secondary_indexes().len(),
            lsis.len(),
            "{logical_id} LSIs"
        );
        for (created, declared) in table.local_secondary_indexes().iter().zip(&lsis) {
            assert_eq!(created.index_name(), declared["IndexName"].as_str());
            assert_eq!(
                described_keys(created.key_schema()),
                template_keys(&declared["KeySchema"])
            );
            assert_eq!(
                created
                    .projection()
                    .and_then(|p| p.projection_type())
                    .map(|p| p.as_str()),
                declared["Projection"]["ProjectionType"].as_str()
            );
        }
        assert_eq!(
            table
                .stream_specification()
                .and_then(|s| s.stream_view_type())
                .map(|v| v.as_str()),
            props["StreamSpecification"]["StreamViewType"].as_str(),
            "{logical_id} stream"
        );
    }
}

#[tokio::test]
async fn the_reactions_table_is_shaped_as_designed() {
    let stack = TestStack::start().await;
    let table = stack
        .dynamodb()
        .describe_table()
        .table_name(stack.name("ReactionsTable"))
        .send()
        .await
        .unwrap()
        .table
        .unwrap();
    assert_eq!(
        described_keys(table.key_schema()),
        [
            ("user_id".into(), "HASH".into()),
            ("item_id".into(), "RANGE".into())
        ]
    );
    let lsi = &table.local_secondary_indexes()[0];
    assert_eq!(lsi.index_name(), Some(likes_store::LIKED_AT_INDEX));
    assert_eq!(
        described_keys(lsi.key_schema()),
        [
            ("user_id".into(), "HASH".into()),
            ("liked_at".into(), "RANGE".into())
        ]
    );
    assert_eq!(
        table
            .stream_specification()
            .and_then(|s| s.stream_view_type())
            .map(|v| v.as_str()),
        Some("NEW_AND_OLD_IMAGES")
    );
}
