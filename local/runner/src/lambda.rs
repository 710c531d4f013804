//! One invocation as the Lambda runtime makes it, for every front of the local stack: the
//! event's JSON in, read by the function's own types, its answer's JSON read back; and why
//! an invocation failed.

use std::time::Duration;

use lambda_runtime::Context;
use likes_functions::Invoke;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Why an invocation gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    #[error("the event does not serialize: {0}")]
    Event(#[source] serde_json::Error),
    /// The function's own error, as Lambda reports a function error.
    #[error("{0}")]
    Function(#[source] likes_functions::Error),
    #[error("the function's answer does not read: {0}")]
    Answer(#[source] serde_json::Error),
    #[error("Task timed out after {0:?}")]
    TimedOut(Duration),
    /// A fault killed the invocation after a chunk it committed.
    #[error("the invocation crashed after a committed chunk (injected fault)")]
    Crashed,
}

/// Invokes `function` with `event` and reads its answer as `A`.
pub async fn invoke<A: DeserializeOwned>(
    function: &dyn Invoke,
    event: &impl Serialize,
    context: Context,
) -> Result<A, InvokeError> {
    let payload = serde_json::to_vec(event).map_err(InvokeError::Event)?;
    let answer = function
        .invoke(&payload, context)
        .await
        .map_err(InvokeError::Function)?;
    serde_json::from_slice(&answer).map_err(InvokeError::Answer)
}
