//! The environment Lambda starts a function's bootstrap with: its reserved variables and the
//! function's own from template.yaml, resolved against the local stack.

use std::collections::BTreeMap;

use likes_tests::TestStack;

/// The environment Lambda gives the function: its reserved variables, the function's own
/// from template.yaml resolved against the local stack, and the emulator for AWS.
pub fn lambda_environment(stack: &TestStack, logical_id: &str) -> BTreeMap<String, String> {
    let template = &stack.stack.template;
    let mut environment = stack
        .stack
        .resources
        .function_environment(template, logical_id, &Default::default())
        .unwrap_or_else(|e| panic!("{logical_id}: {e}"));
    let memory = template
        .function_property(logical_id, "MemorySize")
        .and_then(serde_yaml::Value::as_u64)
        .unwrap_or(128);
    // Functions are not created in the emulator: a name as a stack called `likes` gives them.
    let name = format!("likes-{logical_id}");
    let region = stack.stack.aws.sdk.region().map_or_else(
        || likes_local::aws::LOCAL_REGION.to_owned(),
        |r| r.to_string(),
    );
    let from_env = |name: &str, default: &str| std::env::var(name).unwrap_or(default.to_owned());
    let log_format = template
        .function_property(logical_id, "LoggingConfig")
        .and_then(|c| c["LogFormat"].as_str())
        .unwrap_or("Text");
    environment.extend(
        [
            ("AWS_LAMBDA_FUNCTION_NAME", name.clone()),
            (
                "_HANDLER",
                template
                    .handler(logical_id)
                    .expect("every function names its Handler"),
            ),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", memory.to_string()),
            ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".to_owned()),
            ("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{name}")),
            (
                "AWS_LAMBDA_LOG_STREAM_NAME",
                "2026/01/01/[$LATEST]00000000000000000000000000000000".to_owned(),
            ),
            ("AWS_LAMBDA_LOG_FORMAT", log_format.to_owned()),
            ("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand".to_owned()),
            ("AWS_REGION", region.clone()),
            ("AWS_DEFAULT_REGION", region),
            ("AWS_ENDPOINT_URL", stack.stack.aws.endpoint_url.clone()),
            ("AWS_ACCESS_KEY_ID", from_env("AWS_ACCESS_KEY_ID", "test")),
            (
                "AWS_SECRET_ACCESS_KEY",
                from_env("AWS_SECRET_ACCESS_KEY", "test"),
            ),
            ("PATH", "/usr/local/bin:/usr/bin:/bin".to_owned()),
            ("TZ", ":UTC".to_owned()),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    environment
}
