//! The bootstrap of every Likes function: Lambda names the function in `_HANDLER` (its
//! `Handler` in template.yaml), the registry builds it, and the runtime loop hands it each
//! event's JSON as it arrived.

use aws_config::BehaviorVersion;
use lambda_runtime::{service_fn, LambdaEvent};
use serde_json::value::RawValue;

#[tokio::main]
async fn main() -> Result<(), likes_functions::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let handler = std::env::var("_HANDLER")
        .map_err(|_| "_HANDLER is not set: Lambda sets it from the function's Handler")?;
    let sdk = aws_config::load_defaults(BehaviorVersion::latest()).await;
    let function = likes_functions::build(
        &handler,
        &|name| std::env::var(name).ok(),
        &likes_functions::Clients::new(&sdk),
    )?;
    let function = &*function;
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<Box<RawValue>>| async move {
            let response = function
                .invoke(event.payload.get().as_bytes(), event.context)
                .await?;
            Ok::<_, likes_functions::Error>(RawValue::from_string(String::from_utf8(response)?)?)
        },
    ))
    .await
}
