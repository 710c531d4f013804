//! What a deployment can rely on: every table and bucket that holds user data, moderation
//! or reconciliation state outlives a stack delete and a replacement, and every table among
//! them is recoverable and protected from deletion unless the operator turns that off; a
//! scheduled run is made once; two stacks in one account name nothing alike; every
//! parameter is bounded (CORS origins never `*`, the issuer https); and no secret is in any
//! function's configuration.

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

/// The functions the scheduler invokes: their `ScheduleV2` events, by function.
fn schedules(template: &Template) -> Vec<(String, &Value)> {
    let mut found = Vec::new();
    for (id, function) in template.resources_of("AWS::Serverless::Function") {
        for (_, event) in function["Properties"]["Events"]
            .as_mapping()
            .into_iter()
            .flatten()
        {
            if event["Type"].as_str() == Some("ScheduleV2") {
                found.push((id.clone(), event));
            }
        }
    }
    found
}

/// A scheduled run is made once: the scheduler does not retry it, nor does Lambda (the
/// scheduler invokes asynchronously, which Lambda retries twice by default). The next
/// tick is the retry.
#[test]
fn a_scheduled_run_is_made_once() {
    let template = Template::load(&default_path()).unwrap();
    let scheduled = schedules(&template);
    assert!(scheduled.len() >= 3, "{scheduled:?}");
    for (function, event) in scheduled {
        assert_eq!(
            event["Properties"]["RetryPolicy"]["MaximumRetryAttempts"].as_i64(),
            Some(0),
            "{function}'s schedule"
        );
        assert_eq!(
            template
                .function_property(&function, "EventInvokeConfig")
                .and_then(|config| config["MaximumRetryAttempts"].as_i64()),
            Some(0),
            "{function}'s asynchronous invocations"
        );
    }
}

/// A name as CloudFormation makes it in stack `stack`: the pseudo parameters substituted,
/// and a resource referenced by its physical id, which CloudFormation derives from the
/// stack's name.
fn render(value: &Value, stack: &str) -> String {
    if let Some(target) = ref_target(value) {
        return physical(target, stack);
    }
    match intrinsic(value) {
        Some((function, text)) if function == "Sub" => {
            let mut rendered = String::new();
            let mut rest = text.as_str().expect("a !Sub of a string");
            while let Some(start) = rest.find("${") {
                let end = rest[start..].find('}').expect("a closed ${...}") + start;
                let reference = &rest[start + 2..end];
                rendered.push_str(&rest[..start]);
                rendered.push_str(&physical(reference.split('.').next().unwrap(), stack));
                rest = &rest[end + 1..];
            }
            rendered + rest
        }
        Some((function, arguments)) if function == "Join" => {
            let separator = arguments[0].as_str().expect("a separator");
            pieces(&arguments[1], stack).join(separator)
        }
        Some((function, _)) if function == "GetAtt" => {
            let (resource, _) = get_att(value).expect("a resource and an attribute");
            physical(&resource, stack)
        }
        None if value.is_string() => value.as_str().unwrap().to_owned(),
        _ => panic!("a name this test cannot render: {value:?}"),
    }
}

/// The members of a list a `!Join` joins: listed, or a `!Split`'s.
fn pieces(value: &Value, stack: &str) -> Vec<String> {
    match intrinsic(value) {
        Some((function, arguments)) if function == "Split" => {
            let separator = arguments[0].as_str().expect("a separator");
            render(&arguments[1], stack)
                .split(separator)
                .map(str::to_owned)
                .collect()
        }
        _ => value
            .as_sequence()
            .expect("a list")
            .iter()
            .map(|member| render(member, stack))
            .collect(),
    }
}

fn physical(reference: &str, stack: &str) -> String {
    match reference {
        "AWS::StackName" => stack.to_owned(),
        "AWS::Region" => "us-east-1".to_owned(),
        "AWS::AccountId" => "123456789012".to_owned(),
        "AWS::Partition" => "aws".to_owned(),
        resource => format!("{stack}-{resource}-1A2B3C"),
    }
}

/// The names a stack gives that must be unique in an account and region (each with where
/// it is set): explicit resource names, the Glue database's, and every schedule's, which
/// SAM would otherwise derive from the logical ids alone.
fn account_names(template: &Template, stack: &str) -> BTreeMap<String, String> {
    const NAMED: [(&str, &str); 12] = [
        ("AWS::Athena::WorkGroup", "Name"),
        ("AWS::ApiGatewayV2::Api", "Name"),
        ("AWS::DynamoDB::Table", "TableName"),
        ("AWS::SQS::Queue", "QueueName"),
        ("AWS::S3::Bucket", "BucketName"),
        ("AWS::Kinesis::Stream", "Name"),
        ("AWS::Logs::LogGroup", "LogGroupName"),
        ("AWS::SecretsManager::Secret", "Name"),
        ("AWS::CloudWatch::Alarm", "AlarmName"),
        ("AWS::CloudWatch::Dashboard", "DashboardName"),
        ("AWS::Serverless::Function", "FunctionName"),
        ("AWS::IAM::Role", "RoleName"),
    ];
    let mut names = BTreeMap::new();
    for (kind, property) in NAMED {
        for (id, resource) in template.resources_of(kind) {
            let value = &resource["Properties"][property];
            if !value.is_null() {
                names.insert(render(value, stack), format!("{id}.{property}"));
            }
        }
    }
    for (id, database) in template.resources_of("AWS::Glue::Database") {
        let value = &database["Properties"]["DatabaseInput"]["Name"];
        names.insert(render(value, stack), format!("{id}.DatabaseInput.Name"));
    }
    for (function, event) in schedules(template) {
        let value = &event["Properties"]["Name"];
        assert!(!value.is_null(), "{function}'s schedule names itself");
        names.insert(render(value, stack), format!("{function}'s schedule"));
    }
    names
}

/// Two stacks of the template deploy side by side in one account: no name one gives is
/// the other's.
#[test]
fn two_stacks_share_no_name() {
    let template = Template::load(&default_path()).unwrap();
    let first = account_names(&template, "likes-blue");
    let second = account_names(&template, "likes-green");
    assert!(first.len() >= 5, "{first:?}");
    let shared: Vec<_> = first
        .iter()
        .filter(|(name, _)| second.contains_key(*name))
        .collect();
    assert!(shared.is_empty(), "both stacks name {shared:?}");
}

/// Whether `value` matches parameter `name`'s `AllowedPattern` (each member of a list).
fn allowed(template: &Template, name: &str, value: &str) -> bool {
    let parameter = &template.root["Parameters"][name];
    let pattern = parameter["AllowedPattern"]
        .as_str()
        .unwrap_or_else(|| panic!("{name} has a pattern"));
    let pattern = regex_lite::Regex::new(pattern).unwrap();
    match parameter["Type"].as_str() {
        Some("CommaDelimitedList") => value.split(',').all(|v| pattern.is_match(v.trim())),
        _ => pattern.is_match(value),
    }
}

/// Every parameter says what it is and what it takes: a type, a description, and allowed
/// values, a pattern, or a number's range; CORS origins are never `*` and the issuer is an
/// https URL; and the values the local stack gives them pass.
#[test]
fn every_parameter_is_typed_described_and_bounded() {
    let template = Template::load(&default_path()).unwrap();
    let parameters = template.root["Parameters"].as_mapping().unwrap();
    assert!(parameters.len() >= 10);
    for (name, parameter) in parameters {
        let name = name.as_str().unwrap();
        assert!(parameter["Type"].is_string(), "{name} has a type");
        assert!(
            parameter["Description"]
                .as_str()
                .is_some_and(|d| d.len() > 20),
            "{name} has a description"
        );
        let bounded = parameter["AllowedValues"].is_sequence()
            || parameter["AllowedPattern"].is_string()
            || (parameter["Type"].as_str() == Some("Number")
                && parameter["MinValue"].is_number()
                && parameter["MaxValue"].is_number());
        assert!(bounded, "{name} is bounded");
    }
    // (parameter, values refused, a value taken)
    let cases: [(&str, &[&str], &str); 3] = [
        (
            "AllowedOrigins",
            &[
                "*",
                "https://*.example.com",
                "http://127.0.0.1:8080/app",
                "null",
            ],
            "https://app.example.com,http://127.0.0.1:8080",
        ),
        (
            "JwtIssuer",
            &[
                "http://issuer.example.com",
                "issuer.example.com",
                "https://",
            ],
            "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_AbC123",
        ),
        (
            "JwtJwksUri",
            &[
                "http://issuer.example.com/keys",
                "https://issuer.example.com",
            ],
            "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_AbC123/.well-known/jwks.json",
        ),
    ];
    for (name, refused, taken) in cases {
        for value in refused {
            assert!(!allowed(&template, name, value), "{name} = {value}");
        }
        assert!(allowed(&template, name, taken), "{name} = {taken}");
    }
    let local = crate::stack::local_parameters(BTreeMap::new(), "http://127.0.0.1:8080", true);
    for (name, value) in &local {
        if template.root["Parameters"][name.as_str()]["AllowedPattern"].is_string() {
            assert!(allowed(&template, name, value), "{name} = {value}");
        }
    }
    assert!(local.contains_key("JwtJwksUri"), "{local:?}");
}

/// Every function's lines go to a log group of the template that keeps them
/// `LogRetentionDays`: its own (`LoggingConfig.LogGroup`), or the group named where Lambda
/// writes by default (`/aws/lambda/<function>`); and both APIs write access logs to such a
/// group. Nothing logs to a group that never expires.
#[test]
fn every_function_and_api_logs_to_a_group_that_expires() {
    let template = Template::load(&default_path()).unwrap();
    let groups = template.resources_of("AWS::Logs::LogGroup");
    for (id, group) in &groups {
        assert_eq!(
            ref_target(&group["Properties"]["RetentionInDays"]),
            Some("LogRetentionDays"),
            "{id} expires"
        );
    }
    let named: BTreeMap<String, &String> = groups
        .iter()
        .filter_map(|(id, group)| {
            let name = &group["Properties"]["LogGroupName"];
            (!name.is_null()).then(|| (render(name, "stack"), id))
        })
        .collect();
    let functions = template.resources_of("AWS::Serverless::Function");
    assert!(functions.len() >= 29);
    for (id, function) in &functions {
        let own = ref_target(&function["Properties"]["LoggingConfig"]["LogGroup"]);
        let default = named.get(&format!("/aws/lambda/{}", physical(id, "stack")));
        match (own, default) {
            (Some(group), None) => assert!(groups.contains_key(group), "{id} logs to {group}"),
            (None, Some(_)) => {}
            other => panic!("{id} logs to one group of the template: {other:?}"),
        }
    }
    let http = template.resources_of("AWS::Serverless::HttpApi");
    let stages = template.resources_of("AWS::ApiGatewayV2::Stage");
    assert_eq!((http.len(), stages.len()), (1, 1));
    for (id, api) in http.iter().chain(stages.iter()) {
        let destination = &api["Properties"]["AccessLogSettings"]["DestinationArn"];
        let (group, attribute) = get_att(destination).unwrap_or_else(|| panic!("{id} logs"));
        assert!(groups.contains_key(&group), "{id} logs to {group}");
        assert_eq!(attribute, "Arn");
    }
}

/// No function's configuration holds a secret: no environment value resolves a secret at
/// deploy (a `{{resolve:secretsmanager:…}}` or `{{resolve:ssm-secure:…}}` dynamic reference
/// lands in plain text in the function's configuration), and a function given a secret of
/// the template is given its ARN, which it reads at run time with a permission on that
/// secret alone.
#[test]
fn no_function_configuration_holds_a_secret() {
    let template = Template::load(&default_path()).unwrap();
    let secrets = template.resources_of("AWS::SecretsManager::Secret");
    assert!(!secrets.is_empty());
    let mut readers = 0;
    for (id, function) in template.resources_of("AWS::Serverless::Function") {
        for (name, value) in template.environment(&id) {
            let text = serde_yaml::to_string(&value).unwrap();
            assert!(
                !text.contains("{{resolve:"),
                "{id}'s {name} resolves at deploy: {text}"
            );
            let Some(secret) = ref_target(&value).filter(|r| secrets.contains_key(*r)) else {
                continue;
            };
            readers += 1;
            let statements = function["Properties"]["Policies"][0]["Statement"]
                .as_sequence()
                .unwrap_or_else(|| panic!("{id} has its own statements"));
            assert!(
                statements.iter().any(|statement| {
                    statement["Action"].as_str() == Some("secretsmanager:GetSecretValue")
                        && ref_target(&statement["Resource"]) == Some(secret)
                }),
                "{id} may read {secret} and nothing else"
            );
        }
    }
    assert_eq!(readers, 3, "the three cursor lists read the cursor key");
}

/// Every (namespace, metric) the code can emit: in each source file of the shipped crates,
/// every `"Likes/..."` namespace it names with every metric name it passes to a report's
/// `value` or `values` (the metrics carry no dimensions).
fn emitted() -> std::collections::BTreeSet<(String, String)> {
    fn literals_after<'t>(text: &'t str, marker: &str) -> Vec<&'t str> {
        text.match_indices(marker)
            .filter_map(|(at, _)| {
                let rest = text[at + marker.len()..].trim_start().strip_prefix('"')?;
                Some(&rest[..rest.find('"')?])
            })
            .collect()
    }
    fn sources(dir: &std::path::Path, into: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, into);
            } else if path.extension().is_some_and(|e| e == "rs") {
                into.push(path);
            }
        }
    }
    let mut files = Vec::new();
    for crate_dir in ["shared", "functions"] {
        sources(&crate::repo_root().join(crate_dir), &mut files);
    }
    let mut found = std::collections::BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let namespaces: Vec<&str> = text
            .match_indices("\"Likes/")
            .filter_map(|(at, _)| {
                let rest = &text[at + 1..];
                Some(&rest[..rest.find('"')?])
            })
            .collect();
        let names: Vec<&str> = [".value(", ".values("]
            .iter()
            .flat_map(|marker| literals_after(&text, marker))
            .collect();
        for namespace in &namespaces {
            for name in &names {
                found.insert(((*namespace).to_owned(), (*name).to_owned()));
            }
        }
    }
    found
}

/// Whether a rendered dimension value is the physical id of one of the template's resources.
fn names_a_resource(template: &Template, value: &str, stack: &str) -> bool {
    value
        .strip_prefix(&format!("{stack}-"))
        .and_then(|rest| rest.strip_suffix("-1A2B3C"))
        .is_some_and(|id| template.resource(id).is_some())
}

/// The dashboard's metrics and the alarms' are ones that exist: the service's own (a
/// namespace `Likes/...`, no dimensions) are emitted by its code, and AWS's (API Gateway,
/// Lambda, SQS) name the template's own resources.
#[test]
fn the_dashboard_and_the_alarms_watch_metrics_that_exist() {
    let template = Template::load(&default_path()).unwrap();
    let emitted = emitted();
    assert!(emitted.contains(&("Likes/Pipeline".to_owned(), "WatermarkLagMs".to_owned())));
    let check = |namespace: &str, name: &str, dimensions: &[String], what: &str| {
        if namespace.starts_with("Likes/") {
            assert!(
                emitted.contains(&(namespace.to_owned(), name.to_owned())),
                "{what}: {namespace} {name} is emitted by no code"
            );
            assert!(dimensions.is_empty(), "{what}: {name} has no dimensions");
        } else {
            assert!(
                ["AWS/ApiGateway", "AWS/Lambda", "AWS/SQS"].contains(&namespace),
                "{what}: {namespace}"
            );
            for value in dimensions {
                assert!(
                    names_a_resource(&template, value, "stack"),
                    "{what}: {name}'s dimension {value}"
                );
            }
        }
    };

    let dashboards = template.resources_of("AWS::CloudWatch::Dashboard");
    assert_eq!(dashboards.len(), 1);
    let mut watched = 0;
    for (id, dashboard) in dashboards {
        let body = render(&dashboard["Properties"]["DashboardBody"], "stack");
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        for widget in body["widgets"].as_array().unwrap() {
            let mut previous: Vec<String> = Vec::new();
            for row in widget["properties"]["metrics"].as_array().unwrap() {
                let fields: Vec<String> = row
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|f| f.as_str().map(str::to_owned))
                    .collect();
                // "..." repeats the row above but its last fields; "." one field above.
                let row: Vec<String> = if fields.first().map(String::as_str) == Some("...") {
                    let tail = &fields[1..];
                    let mut row = previous[..previous.len() - tail.len()].to_vec();
                    row.extend_from_slice(tail);
                    row
                } else {
                    fields
                        .iter()
                        .enumerate()
                        .map(|(i, f)| {
                            if f == "." {
                                previous[i].clone()
                            } else {
                                f.clone()
                            }
                        })
                        .collect()
                };
                let dimensions: Vec<String> = row[2..].iter().skip(1).step_by(2).cloned().collect();
                check(&row[0], &row[1], &dimensions, &id);
                watched += 1;
                previous = row;
            }
        }
    }
    assert!(watched >= 30, "{watched} metrics on the dashboard");

    for (id, alarm) in template.resources_of("AWS::CloudWatch::Alarm") {
        let properties = &alarm["Properties"];
        let namespace = properties["Namespace"]
            .as_str()
            .unwrap_or_else(|| panic!("{id}"));
        let name = properties["MetricName"].as_str().unwrap();
        let dimensions: Vec<String> = properties["Dimensions"]
            .as_sequence()
            .into_iter()
            .flatten()
            .map(|d| render(&d["Value"], "stack"))
            .collect();
        check(namespace, name, &dimensions, &id);
    }
}
