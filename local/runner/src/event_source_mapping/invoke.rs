//! The function a mapping invokes, built from the registry by its `Handler`, and one
//! invocation as Lambda makes it: the event's JSON in, read by the function's own types, its
//! answer's JSON read back.

use std::collections::HashMap;
use std::sync::Arc;

use aws_config::SdkConfig;
use likes_functions::{Clients, Invoke};
use serde_json::Value;

use super::mapping::MappingConfig;
use super::record::{BufferedRecord, SequenceNumber};
use super::{epoch_now, window, Shared};
use crate::faults::CounterCells;
#[cfg(any(test, feature = "faults"))]
use crate::faults::{FaultContext, InvocationSlot};
use crate::lambda::InvokeError;

/// The function a mapping invokes, from the registry by its `Handler`: built once to check
/// its configuration, then once per shard with that shard's fault interceptors.
#[derive(Debug, Clone)]
pub struct StreamFunction {
    handler: String,
    environment: std::collections::BTreeMap<String, String>,
}

impl StreamFunction {
    pub fn for_handler(
        config: &MappingConfig,
        sdk: &SdkConfig,
    ) -> Result<Self, likes_functions::Error> {
        let function = Self {
            handler: config.handler.clone(),
            environment: config.environment.clone(),
        };
        function.build(crate::aws::local_clients(sdk, 1))?;
        Ok(function)
    }

    fn build(&self, clients: Clients) -> Result<Box<dyn Invoke>, likes_functions::Error> {
        likes_functions::build(
            &self.handler,
            &|name| self.environment.get(name).cloned(),
            &clients,
        )
    }

    /// One function instance (one per shard, as Lambda runs one per shard): its own SDK
    /// clients, carrying the mapping's fault interceptors in a test build.
    pub fn instance(&self, shared: &Arc<Shared>, sdk: &SdkConfig) -> FunctionInstance {
        let clients = crate::aws::local_clients(sdk, shared.virtual_shards);
        #[cfg(any(test, feature = "faults"))]
        let invocation = Arc::new(InvocationSlot::default());
        #[cfg(any(test, feature = "faults"))]
        let clients = crate::faults::intercept(
            &self.handler,
            clients,
            sdk,
            FaultContext {
                faults: shared.faults.clone(),
                counters: shared.counters.clone(),
                invocation: invocation.clone(),
            },
        );
        let function = self
            .build(clients)
            .expect("the mapping's function was built once when it started");
        FunctionInstance {
            function: Arc::from(function),
            #[cfg(any(test, feature = "faults"))]
            invocation,
        }
    }
}

pub struct FunctionInstance {
    function: Arc<dyn Invoke>,
    /// The invocation running, which a fault may kill after a committed chunk.
    #[cfg(any(test, feature = "faults"))]
    invocation: Arc<InvocationSlot>,
}

impl FunctionInstance {
    #[cfg(test)]
    pub fn scripted(script: Arc<Script>) -> Self {
        Self {
            function: script,
            invocation: Arc::default(),
        }
    }

    /// One invocation within the function's timeout; `Err` is a function error: the
    /// handler's, a timeout, or a crash a fault played after a committed chunk.
    #[cfg(any(test, feature = "faults"))]
    pub async fn call(
        &self,
        payload: &[u8],
        config: &MappingConfig,
        counters: &CounterCells,
    ) -> Result<Vec<u8>, InvokeError> {
        let live = self.invocation.begin();
        let answer = tokio::select! {
            biased;
            () = live.died() => None,
            answer = self.within_timeout(payload, config) => Some(answer),
        };
        let died = live.is_dead();
        self.invocation.end();
        if died {
            CounterCells::add(&counters.crashes, 1);
            return Err(InvokeError::Crashed);
        }
        answer.unwrap_or(Err(InvokeError::Crashed))
    }

    /// One invocation within the function's timeout; `Err` is a function error: the
    /// handler's, or a timeout.
    #[cfg(not(any(test, feature = "faults")))]
    pub async fn call(
        &self,
        payload: &[u8],
        config: &MappingConfig,
        _counters: &CounterCells,
    ) -> Result<Vec<u8>, InvokeError> {
        self.within_timeout(payload, config).await
    }

    async fn within_timeout(
        &self,
        payload: &[u8],
        config: &MappingConfig,
    ) -> Result<Vec<u8>, InvokeError> {
        tokio::time::timeout(config.function_timeout, self.invoke(payload, config))
            .await
            .unwrap_or(Err(InvokeError::TimedOut(config.function_timeout)))
    }

    /// The event bytes in, the response bytes out; `Err` is a function error.
    async fn invoke(&self, payload: &[u8], config: &MappingConfig) -> Result<Vec<u8>, InvokeError> {
        let mut context = lambda_runtime::Context::default();
        context.request_id = uuid::Uuid::new_v4().to_string();
        context.invoked_function_arn = config.function_arn.clone();
        context.deadline =
            (epoch_now() * 1000.0) as u64 + config.function_timeout.as_millis() as u64;
        self.function
            .invoke(payload, context)
            .await
            .map_err(InvokeError::Function)
    }
}

/// A test's function: records each event it receives and answers from a script (`{}` once
/// the script runs out).
#[cfg(test)]
#[derive(Debug, Default)]
pub struct Script {
    pub received: std::sync::Mutex<Vec<Value>>,
    pub answers: std::sync::Mutex<std::collections::VecDeque<Value>>,
}

#[cfg(test)]
impl Invoke for Script {
    fn invoke<'a>(
        &'a self,
        event: &'a [u8],
        _context: lambda_runtime::Context,
    ) -> likes_functions::Invocation<'a> {
        Box::pin(async move {
            let event: Value = serde_json::from_slice(event)?;
            self.received.lock().unwrap().push(event);
            let answer = self.answers.lock().unwrap().pop_front();
            Ok(answer
                .unwrap_or_else(|| serde_json::json!({}))
                .to_string()
                .into_bytes())
        })
    }
}

/// What an invocation's answer means for its batch.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// Checkpoint before this index of the batch and retry from it.
    PartialFailure(usize),
    FunctionError(String),
}

/// An answer read: the outcome, and for a time window the state it returned.
#[derive(Debug, PartialEq, Eq)]
pub struct Answer {
    pub outcome: Outcome,
    pub state: Option<HashMap<String, String>>,
}

impl Answer {
    pub fn failed(reason: impl Into<String>) -> Self {
        Self {
            outcome: Outcome::FunctionError(reason.into()),
            state: None,
        }
    }

    /// Reads a response as Lambda does: a time window answer without `state` failed; under
    /// `ReportBatchItemFailures` the checkpoint goes before the lowest failed record, and an
    /// identifier that is empty or not in the batch fails the whole batch.
    pub fn read(response: &[u8], batch: &[BufferedRecord], config: &MappingConfig) -> Self {
        let parsed = serde_json::from_slice::<Value>(response);
        let state = match (&parsed, config.tumbling_window) {
            (_, None) => None,
            (Ok(response), Some(_)) => match window::returned_state(response) {
                Ok(state) => Some(state),
                Err(reason) => return Self::failed(reason),
            },
            (Err(_), Some(_)) => return Self::failed("the response is not JSON"),
        };
        let outcome = if config.report_batch_item_failures {
            match &parsed {
                Ok(response) => failures(response, batch),
                Err(_) => Outcome::FunctionError("the response is not JSON".into()),
            }
        } else {
            Outcome::Success
        };
        Self { outcome, state }
    }
}

fn failures(response: &Value, batch: &[BufferedRecord]) -> Outcome {
    let failures = match &response["batchItemFailures"] {
        Value::Null => return Outcome::Success,
        Value::Array(failures) if failures.is_empty() => return Outcome::Success,
        Value::Array(failures) => failures,
        other => return Outcome::FunctionError(format!("batchItemFailures is {other}")),
    };
    let mut lowest: Option<usize> = None;
    for failure in failures {
        let Some(id) = failure["itemIdentifier"]
            .as_str()
            .filter(|id| !id.is_empty())
        else {
            return Outcome::FunctionError(format!("invalid batch item failure {failure}"));
        };
        let id = SequenceNumber::new(id);
        let Some(at) = batch.iter().position(|r| r.sequence_number == id) else {
            return Outcome::FunctionError(format!(
                "batch item failure {} is not in the batch",
                id.as_str()
            ));
        };
        lowest = Some(lowest.map_or(at, |l| l.min(at)));
    }
    Outcome::PartialFailure(lowest.unwrap_or(0))
}
