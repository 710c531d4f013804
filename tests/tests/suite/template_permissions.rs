//! Each function's IAM policy in template.yaml against the calls its code makes: every
//! DynamoDB and Kinesis call the handler reaches is granted on the table (or index, or
//! stream) its environment names, and every item-level DynamoDB action granted is one the
//! code calls. The local stack does not enforce IAM, so nothing else would see a missing
//! grant before AWS refuses it, nor a grant left over.
//!
//! The functions come from the registry (`functions/src/lib.rs`, checked against
//! `likes_functions::FUNCTIONS` and the template's `Handler`s); what each reaches is read
//! from the sources by `likes_tests::aws_calls`.
//!
//! A write that returns an item (`ReturnValues`, `ReturnValuesOnConditionCheckFailure`)
//! needs only its own action: DynamoDB's IAM guide governs returned values with the
//! `dynamodb:ReturnValues` condition key on the write itself, and its example policies let
//! an `UpdateItem`-only grant return `UPDATED_OLD`. So no `dynamodb:GetItem` is granted for
//! them, and this test counts none.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use likes_local::template::{get_att, intrinsic, ref_target, Template};
use likes_tests::aws_calls::{Call, Code, Resource};
use serde_yaml::Value;

/// The item-level DynamoDB actions a grant must be called for.
const ITEM_ACTIONS: &[&str] = &[
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:Scan",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:ConditionCheckItem",
];

/// The Kinesis writes a grant must be called for (the reads serve event source mappings).
const STREAM_WRITES: &[&str] = &["kinesis:PutRecord", "kinesis:PutRecords"];

/// Calls the code can reach from a function that the function never makes, each with why:
/// `(Handler, action, the variable naming its table)`. Each must still be reachable, so a
/// stale entry fails too.
const NEVER_MADE: &[(&str, &str, &str, &str)] = &[
    (
        "remove-item",
        "dynamodb:ConditionCheckItem",
        "MODERATION_TABLE",
        "an item's removal always starts running; only a job that starts done checks its guard",
    ),
    (
        "remove-item",
        "dynamodb:UpdateItem",
        "RATE_LIMITS_TABLE",
        "an item's removal suspends no one",
    ),
];

/// What a statement's `Resource` names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Granted {
    /// `!GetAtt X.Arn`.
    Arn(String),
    /// `!Sub '${X.Arn}/index/...'`.
    Index(String),
    Any,
    Other(String),
}

fn granted(value: &Value) -> Granted {
    if value.as_str() == Some("*") {
        return Granted::Any;
    }
    if let Some((resource, attribute)) = get_att(value) {
        if attribute == "Arn" {
            return Granted::Arn(resource);
        }
        return Granted::Other(format!("{resource}.{attribute}"));
    }
    if let Some(("Sub", text)) = intrinsic(value)
        .as_ref()
        .map(|(f, v)| (f.as_str(), v.as_str().unwrap_or_default()))
    {
        if let Some(rest) = text.strip_prefix("${") {
            if let Some((arn, path)) = rest.split_once(".Arn}") {
                if path.starts_with("/index/") {
                    return Granted::Index(arn.to_owned());
                }
            }
        }
        return Granted::Other(text.to_owned());
    }
    Granted::Other(format!("{value:?}"))
}

fn strings(value: &Value) -> Vec<Value> {
    match value {
        Value::Sequence(items) => items.clone(),
        other => vec![other.clone()],
    }
}

/// Every (action, resource) a list of `Policies` (or a role's) allows; both branches of an
/// `!If`.
fn statements(policies: &Value, role: bool, into: &mut BTreeSet<(String, Granted)>) {
    for policy in strings(policies)
        .into_iter()
        .filter(|p| !p.is_null() && ref_target(p) != Some("AWS::NoValue"))
    {
        if let Some((_, arguments)) = intrinsic(&policy).filter(|(f, _)| f == "If") {
            let branches = arguments.as_sequence().expect("!If [cond, a, b]");
            for branch in &branches[1..] {
                statements(&Value::Sequence(vec![branch.clone()]), role, into);
            }
            continue;
        }
        let document = if role {
            &policy["PolicyDocument"]
        } else {
            &policy
        };
        let Some(list) = document["Statement"].as_sequence() else {
            panic!("a policy this test cannot read (a SAM policy template?): {policy:?}");
        };
        for statement in list {
            assert_eq!(statement["Effect"].as_str(), Some("Allow"), "{statement:?}");
            for action in strings(&statement["Action"]) {
                let action = action.as_str().expect("an action is a string").to_owned();
                for resource in strings(&statement["Resource"]) {
                    into.insert((action.clone(), granted(&resource)));
                }
            }
        }
    }
}

/// A function's grants: its own `Policies`, or its `Role`'s.
fn grants(template: &Template, function: &str) -> BTreeSet<(String, Granted)> {
    let properties = &template.resource(function).expect("listed")["Properties"];
    let mut into = BTreeSet::new();
    statements(&properties["Policies"], false, &mut into);
    if let Some((role, _)) = get_att(&properties["Role"]) {
        let role = &template.resource(&role).expect("the function's role")["Properties"];
        statements(&role["Policies"], true, &mut into);
    }
    into
}

/// The checkout this test was built from: its template and its sources, read together.
fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the checkout")
        .to_owned()
}

/// The registry's functions, read from its source: `Handler` → where the code starts
/// (`(module, function)` of an endpoint's handler, `(Type, "handle")` of any other).
fn registry(code: &Code) -> BTreeMap<String, (String, String)> {
    let root = checkout();
    let read = |path: &str| {
        std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
    };
    let api = read("shared/api/src/lib.rs");
    let lines_with = |needle: &'static str| {
        api.lines()
            .filter(move |line| line.contains(needle))
            .map(str::trim)
    };
    // `Self::PutLike => "put-like",` and `Endpoint::PutLike => reactions::put_like(self, ..`
    let handlers: BTreeMap<&str, &str> = lines_with("=> \"")
        .filter_map(|line| {
            let (variant, rest) = line.strip_prefix("Self::")?.split_once(" => \"")?;
            Some((variant, rest.split('"').next()?))
        })
        .collect();
    let entries: BTreeMap<&str, (String, String)> = lines_with("Endpoint::")
        .filter_map(|line| {
            let (variant, rest) = line.strip_prefix("Endpoint::")?.split_once(" => ")?;
            let (module, function) = rest.split('(').next()?.split_once("::")?;
            Some((variant, (format!("api::{module}"), function.to_owned())))
        })
        .collect();
    let registry = read("functions/src/lib.rs");
    let mut functions = BTreeMap::new();
    for line in registry.lines().map(str::trim) {
        if let Some(variant) = line
            .strip_prefix("endpoint!(")
            .and_then(|l| l.strip_suffix("),"))
        {
            let handler = handlers[variant];
            functions.insert(handler.to_owned(), entries[variant].clone());
        } else if let Some(rest) = line.strip_prefix("function!(\"") {
            let (handler, rest) = rest.split_once('"').expect("function!(\"handler\", ..");
            let ty = rest
                .split_once("| ")
                .and_then(|(_, built)| built.split_once("::new("))
                .map(|(ty, _)| ty.trim().to_owned())
                .unwrap_or_else(|| panic!("{handler}: its entry builds `Type::new(..)`"));
            assert!(
                code.has(&ty, "handle"),
                "{handler}: no {ty}::handle in the sources"
            );
            functions.insert(handler.to_owned(), (ty, "handle".to_owned()));
        }
    }
    functions
}

/// The logical id a function's environment variable names (`!Ref X`, `!GetAtt X.Arn`).
fn named(template: &Template, function: &str, variable: &str) -> Option<String> {
    let value = template.environment(function).remove(variable)?;
    ref_target(&value)
        .map(str::to_owned)
        .or_else(|| get_att(&value).map(|(resource, _)| resource))
}

#[test]
fn each_functions_policy_grants_exactly_the_dynamodb_and_kinesis_calls_its_code_makes() {
    let root = checkout();
    let template = Template::load(&root.join("template.yaml")).expect("template.yaml");
    let code = Code::read(
        &[
            "shared/api",
            "shared/store",
            "shared/consumers",
            "shared/live",
            "shared/reconcile",
        ]
        .map(|crate_dir| root.join(crate_dir).join("src")),
    );
    let registry = registry(&code);

    let mut listed: Vec<&str> = likes_functions::FUNCTIONS
        .iter()
        .map(|f| f.handler)
        .collect();
    listed.sort_unstable();
    assert_eq!(
        registry.keys().map(String::as_str).collect::<Vec<_>>(),
        listed,
        "functions/src/lib.rs as read here against its FUNCTIONS"
    );
    let functions: BTreeMap<String, String> = template
        .resources_of("AWS::Serverless::Function")
        .into_keys()
        .map(|id| (template.handler(&id).expect("a Handler"), id))
        .collect();
    assert_eq!(
        functions.keys().collect::<Vec<_>>(),
        registry.keys().collect::<Vec<_>>(),
        "the template's Handlers against the registry's"
    );

    let mut problems = Vec::new();
    for (handler, (owner, entry)) in &registry {
        let function = &functions[handler];
        let grants = grants(&template, function);
        for (action, resource) in &grants {
            let data_plane = ["dynamodb:", "kinesis:", "s3:", "sqs:"]
                .iter()
                .any(|service| action.starts_with(service));
            if data_plane && *resource == Granted::Any {
                problems.push(format!("{function}: {action} on '*'"));
            }
        }
        let mut calls = code.calls_from(owner, entry);
        for (never, action, variable, _why) in NEVER_MADE.iter().filter(|n| n.0 == handler) {
            let before = calls.len();
            calls.retain(|call| {
                !(call.action == *action && call.resource == Resource::Variable((*variable).into()))
            });
            if calls.len() == before {
                problems.push(format!(
                    "{never}: NEVER_MADE lists {action} on {variable}, which its code no longer reaches"
                ));
            }
        }
        let mut needed = BTreeSet::new();
        for Call {
            action,
            resource,
            index,
            site,
        } in &calls
        {
            let variable = match resource {
                Resource::Variable(variable) => variable,
                Resource::Unknown(expr) => {
                    problems.push(format!(
                        "{function}: {action} at {site} on `{expr}`, which this test cannot \
                         name (add it to aws_calls::TABLE_FIELDS)"
                    ));
                    continue;
                }
            };
            let Some(target) = named(&template, function, variable) else {
                problems.push(format!(
                    "{function}: {action} at {site} on {variable}, which its Environment \
                     does not set"
                ));
                continue;
            };
            let resource = if *index {
                Granted::Index(target)
            } else {
                Granted::Arn(target)
            };
            if !grants.contains(&(action.to_string(), resource.clone())) {
                problems.push(format!(
                    "{function}: {action} on {resource:?} ({site}) is not granted"
                ));
            }
            needed.insert((action.to_string(), resource));
        }
        for (action, resource) in &grants {
            let checked =
                ITEM_ACTIONS.contains(&action.as_str()) || STREAM_WRITES.contains(&action.as_str());
            if checked && !needed.contains(&(action.clone(), resource.clone())) {
                problems.push(format!(
                    "{function}: {action} on {resource:?} is granted but its code never calls it"
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "template.yaml's policies against the code:\n{}",
        problems.join("\n")
    );
}

/// template.yaml as SAM expands it (`local/checks/sam_expand.py`, offline).
fn expanded() -> serde_json::Value {
    let output = std::process::Command::new(likes_tests::venv_tool("python"))
        .arg(likes_local::repo_root().join("local/checks/sam_expand.py"))
        .arg(likes_local::repo_root().join("template.yaml"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Data-plane actions that name no resource, so a grant of them is on `*`.
const RESOURCELESS: &[&str] = &[
    "dynamodb:ListTables",
    "kinesis:ListStreams",
    "s3:ListAllMyBuckets",
    "sqs:ListQueues",
];
/// The one managed policy a role may carry: its function's log lines.
const BASIC_EXECUTION: &str = "service-role/AWSLambdaBasicExecutionRole";

/// Every statement (an object with `Effect` and `Action`) under `value`, both branches of
/// each `Fn::If` included.
fn expanded_statements<'v>(value: &'v serde_json::Value, found: &mut Vec<&'v serde_json::Value>) {
    match value {
        serde_json::Value::Object(map)
            if map.contains_key("Effect") && map.contains_key("Action") =>
        {
            found.push(value)
        }
        serde_json::Value::Object(map) => map.values().for_each(|v| expanded_statements(v, found)),
        serde_json::Value::Array(list) => list.iter().for_each(|v| expanded_statements(v, found)),
        _ => {}
    }
}

/// A string or a list of them, as a statement writes `Action` and `Resource`.
fn listed(value: &serde_json::Value) -> Vec<&serde_json::Value> {
    match value {
        serde_json::Value::Array(list) => list.iter().collect(),
        other => vec![other],
    }
}

/// The template as SAM expands it (`local/checks/sam_expand.py`, offline): every role it
/// deploys, SAM's own included, grants no DynamoDB, Kinesis, S3 or SQS action that can name
/// its resource on `*`, and carries no managed policy but the basic execution role's (an
/// AWS managed policy for a stream event reads every stream in the account).
#[test]
fn no_role_grants_a_data_plane_action_on_every_resource() {
    let expanded = expanded();
    let roles: Vec<(&String, &serde_json::Value)> = expanded["Resources"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, resource)| resource["Type"] == "AWS::IAM::Role")
        .collect();
    assert!(roles.len() > 20, "SAM's roles are in the expansion");
    let mut too_wide = Vec::new();
    for (id, role) in &roles {
        for arn in listed(&role["Properties"]["ManagedPolicyArns"]) {
            if let Some(arn) = arn.as_str() {
                if !arn.ends_with(BASIC_EXECUTION) {
                    too_wide.push(format!("{id}: managed policy {arn}"));
                }
            }
        }
        let mut found = Vec::new();
        expanded_statements(&role["Properties"]["Policies"], &mut found);
        for statement in found.into_iter().filter(|s| s["Effect"] == "Allow") {
            let everywhere = listed(&statement["Resource"]).iter().any(|r| *r == "*");
            for action in listed(&statement["Action"]) {
                let action = action.as_str().unwrap_or_default();
                let data_plane = ["dynamodb:", "kinesis:", "s3:", "sqs:"]
                    .iter()
                    .any(|service| action.starts_with(service));
                if everywhere && data_plane && !RESOURCELESS.contains(&action) {
                    too_wide.push(format!("{id}: {action} on *"));
                }
            }
        }
    }
    assert!(too_wide.is_empty(), "{too_wide:#?}");
}

/// Every function deploys gradually and every caller follows it: each function has its
/// alias and a CodeDeploy deployment group that shifts it with the template's strategy, on
/// the template's own role, rolled back on the rollback alarms; and every stream mapping,
/// schedule, HTTP route and WebSocket integration invokes an alias, never `$LATEST`, so a
/// rollback moves them all.
#[test]
fn every_function_deploys_through_its_alias_and_every_caller_invokes_the_alias() {
    let expanded = expanded();
    let resources = expanded["Resources"].as_object().unwrap();
    let of_type = |kind: &str| -> Vec<(&String, &serde_json::Value)> {
        resources
            .iter()
            .filter(|(_, r)| r["Type"] == kind)
            .collect()
    };
    let aliases: BTreeSet<&str> = of_type("AWS::Lambda::Alias")
        .into_iter()
        .map(|(id, _)| id.as_str())
        .collect();
    let functions = of_type("AWS::Lambda::Function");
    assert!(functions.len() >= 29);
    let groups = of_type("AWS::CodeDeploy::DeploymentGroup");
    for (function, _) in &functions {
        let alias = format!("{function}Aliaslive");
        assert!(aliases.contains(alias.as_str()), "{function} has its alias");
        let group = groups
            .iter()
            .find(|(id, _)| id.starts_with(function.as_str()))
            .unwrap_or_else(|| panic!("{function} has a deployment group"))
            .1;
        let properties = &group["Properties"];
        assert_eq!(
            properties["ServiceRoleArn"],
            serde_json::json!({"Fn::GetAtt": ["DeploymentRole", "Arn"]}),
            "{function}"
        );
        let alarms: BTreeSet<String> = properties["AlarmConfiguration"]["Alarms"]
            .as_array()
            .unwrap_or_else(|| panic!("{function} has rollback alarms"))
            .iter()
            .map(|alarm| alarm["Name"]["Ref"].as_str().unwrap().to_owned())
            .collect();
        for alarm in [
            "HttpApiErrorsAlarm",
            "HttpApiLatencyAlarm",
            "LiveApiErrorsAlarm",
            "FunctionErrorsAlarm",
        ] {
            assert!(alarms.contains(alarm), "{function} rolls back on {alarm}");
            assert!(resources.contains_key(alarm), "{alarm} exists");
        }
        assert!(
            properties["AutoRollbackConfiguration"]["Events"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e == "DEPLOYMENT_STOP_ON_ALARM"),
            "{function}"
        );
    }
    let invokes_alias =
        |value: &serde_json::Value| value["Ref"].as_str().is_some_and(|r| aliases.contains(r));
    for (id, mapping) in of_type("AWS::Lambda::EventSourceMapping") {
        assert!(
            invokes_alias(&mapping["Properties"]["FunctionName"]),
            "{id}"
        );
    }
    for (id, schedule) in of_type("AWS::Scheduler::Schedule") {
        assert!(
            invokes_alias(&schedule["Properties"]["Target"]["Arn"]),
            "{id}"
        );
    }
    let mut integrations = 0;
    for (id, api) in of_type("AWS::ApiGatewayV2::Api")
        .into_iter()
        .chain(of_type("AWS::ApiGatewayV2::Integration"))
    {
        let text = api["Properties"].to_string();
        for (at, _) in text.match_indices("/functions/${") {
            let reference = &text[at + "/functions/${".len()..];
            let reference = &reference[..reference.find('}').unwrap()];
            assert!(aliases.contains(reference), "{id} invokes {reference}");
            integrations += 1;
        }
    }
    let routes = likes_local::template::Template::load(&likes_local::template::default_path())
        .unwrap()
        .http_routes()
        .unwrap()
        .len();
    assert!(integrations >= routes + 3, "{integrations} integrations");
}
