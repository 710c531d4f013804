//! The functions a stream event can invoke locally, and one invocation as Lambda makes it:
//! the event serialized, deserialized by the function's own types, its answer serialized and
//! read back.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use aws_config::SdkConfig;
use lambda_runtime::LambdaEvent;
use likes_aggregator::{
    Aggregator, AggregatorConfig, Eraser, EraserConfig, Leaderboard, LeaderboardConfig, Likers,
    LikersConfig, Publisher, PublisherConfig,
};
use likes_live::{BroadcastConfig, Broadcaster};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::mapping::MappingConfig;
use super::record::{BufferedRecord, SequenceNumber};
use super::{epoch_now, window, Shared};
use crate::faults::{CountWriteFaults, CounterCells, EventLogFaults, FaultContext, InvocationSlot};

/// The functions a stream event can invoke locally, by their `Handler`.
#[derive(Debug, Clone)]
pub enum StreamFunction {
    Aggregator(AggregatorConfig),
    Publisher(PublisherConfig),
    Eraser(EraserConfig),
    Leaderboard(LeaderboardConfig),
    Likers(LikersConfig),
    Broadcaster(BroadcastConfig),
}

impl StreamFunction {
    pub fn for_handler(config: &MappingConfig) -> Result<Self, String> {
        match config.handler.as_str() {
            "aggregator" => {
                AggregatorConfig::from_lookup(|name| config.environment.get(name).cloned())
                    .map(Self::Aggregator)
                    .map_err(|e| e.to_string())
            }
            "publisher" => {
                PublisherConfig::from_lookup(|name| config.environment.get(name).cloned())
                    .map(Self::Publisher)
                    .map_err(|e| e.to_string())
            }
            "erase" => EraserConfig::from_lookup(|name| config.environment.get(name).cloned())
                .map(Self::Eraser)
                .map_err(|e| e.to_string()),
            "leaderboard" => {
                LeaderboardConfig::from_lookup(|name| config.environment.get(name).cloned())
                    .map(Self::Leaderboard)
                    .map_err(|e| e.to_string())
            }
            "likers" => LikersConfig::from_lookup(|name| config.environment.get(name).cloned())
                .map(Self::Likers)
                .map_err(|e| e.to_string()),
            "live-broadcast" => {
                BroadcastConfig::from_lookup(|name| config.environment.get(name).cloned())
                    .map(Self::Broadcaster)
                    .map_err(|e| e.to_string())
            }
            other => Err(format!(
                "no local handler for the stream function {other:?}"
            )),
        }
    }

    /// One function instance (one per shard, as Lambda runs one per shard): its own SDK
    /// clients, carrying the mapping's fault interceptors.
    pub fn instance(&self, shared: &Arc<Shared>, sdk: &SdkConfig) -> FunctionInstance {
        let invocation = Arc::new(InvocationSlot::default());
        let context = FaultContext {
            faults: shared.faults.clone(),
            counters: shared.counters.clone(),
            invocation: invocation.clone(),
        };
        let handler = match self {
            Self::Aggregator(config) => {
                let dynamodb = aws_sdk_dynamodb::Client::from_conf(
                    aws_sdk_dynamodb::config::Builder::from(sdk)
                        .interceptor(CountWriteFaults::committing_chunks(context))
                        .build(),
                );
                Handler::Aggregator(Aggregator::new(config.clone(), dynamodb))
            }
            // The eraser's "chunks" are its BatchWriteItem deletes: a crash after the k-th
            // leaves a slice half done.
            Self::Eraser(config) => {
                let dynamodb = aws_sdk_dynamodb::Client::from_conf(
                    aws_sdk_dynamodb::config::Builder::from(sdk)
                        .interceptor(CountWriteFaults::committing_deletes(context))
                        .build(),
                );
                Handler::Eraser(Eraser::new(config.clone(), dynamodb))
            }
            Self::Publisher(config) => {
                let kinesis = aws_sdk_kinesis::Client::from_conf(
                    aws_sdk_kinesis::config::Builder::from(sdk)
                        .interceptor(EventLogFaults(context))
                        .build(),
                );
                Handler::Publisher(Publisher::new(config.clone(), kinesis))
            }
            Self::Leaderboard(config) => {
                // A crash after the k-th UpdateItem (a score row's ADD, the progress, a
                // refresh lease taken) leaves an intent half applied or a lease held.
                let dynamodb = aws_sdk_dynamodb::Client::from_conf(
                    aws_sdk_dynamodb::config::Builder::from(sdk)
                        .interceptor(CountWriteFaults::committing_updates(context))
                        .build(),
                );
                Handler::Leaderboard(Leaderboard::new(config.clone(), dynamodb))
            }
            // A crash after the k-th entry written leaves a batch half applied.
            Self::Likers(config) => {
                let dynamodb = aws_sdk_dynamodb::Client::from_conf(
                    aws_sdk_dynamodb::config::Builder::from(sdk)
                        .interceptor(CountWriteFaults::committing_updates(context))
                        .build(),
                );
                Handler::Likers(Likers::new(config.clone(), dynamodb))
            }
            // Its posts go to the local WebSocket front, which its endpoint names.
            Self::Broadcaster(config) => Handler::Broadcaster(Box::new(Broadcaster::new(
                config.clone(),
                sdk,
                aws_sdk_dynamodb::Client::new(sdk),
            ))),
        };
        FunctionInstance {
            handler,
            invocation,
        }
    }
}

enum Handler {
    Aggregator(Aggregator),
    Publisher(Publisher),
    Eraser(Eraser),
    Leaderboard(Leaderboard),
    Likers(Likers),
    /// Boxed: it holds clients of three services.
    Broadcaster(Box<Broadcaster>),
    /// A test's function: records each event it receives and answers from a script.
    #[cfg(test)]
    Scripted(Arc<Script>),
}

/// What a scripted test function received, and what it answers next (`{}` once the
/// script runs out).
#[cfg(test)]
#[derive(Debug, Default)]
pub struct Script {
    pub received: std::sync::Mutex<Vec<Value>>,
    pub answers: std::sync::Mutex<std::collections::VecDeque<Value>>,
}

pub struct FunctionInstance {
    handler: Handler,
    invocation: Arc<InvocationSlot>,
}

impl FunctionInstance {
    #[cfg(test)]
    pub fn scripted(script: Arc<Script>) -> Self {
        Self {
            handler: Handler::Scripted(script),
            invocation: Arc::default(),
        }
    }

    /// One invocation within the function's timeout; `Err` is a function error: the
    /// handler's, a timeout, or a crash a fault played after a committed chunk.
    pub async fn call(
        &self,
        payload: &[u8],
        config: &MappingConfig,
        counters: &CounterCells,
    ) -> Result<Vec<u8>, String> {
        let live = self.invocation.begin();
        let answer = tokio::select! {
            biased;
            () = live.died() => None,
            answer = tokio::time::timeout(config.function_timeout, self.invoke(payload, config)) => Some(answer),
        };
        let died = live.is_dead();
        self.invocation.end();
        if died {
            CounterCells::add(&counters.crashes, 1);
            return Err("the invocation crashed after a committed chunk (injected fault)".into());
        }
        match answer {
            None => Err("the invocation died".into()),
            Some(Err(_)) => Err(format!(
                "Task timed out after {:?}",
                config.function_timeout
            )),
            Some(Ok(answer)) => answer,
        }
    }

    /// The event bytes in, the response bytes out; `Err` is a function error.
    async fn invoke(&self, payload: &[u8], config: &MappingConfig) -> Result<Vec<u8>, String> {
        let mut context = lambda_runtime::Context::default();
        context.request_id = uuid::Uuid::new_v4().to_string();
        context.invoked_function_arn = config.function_arn.clone();
        context.deadline =
            (epoch_now() * 1000.0) as u64 + config.function_timeout.as_millis() as u64;
        match &self.handler {
            Handler::Aggregator(aggregator) => {
                run(payload, context, |event| aggregator.handle(event)).await
            }
            Handler::Publisher(publisher) => {
                run(payload, context, |event| publisher.handle(event)).await
            }
            Handler::Eraser(eraser) => run(payload, context, |event| eraser.handle(event)).await,
            Handler::Leaderboard(leaderboard) => {
                run(payload, context, |event| leaderboard.handle(event)).await
            }
            Handler::Likers(likers) => run(payload, context, |event| likers.handle(event)).await,
            Handler::Broadcaster(broadcaster) => {
                run(payload, context, |event| broadcaster.handle(event)).await
            }
            #[cfg(test)]
            Handler::Scripted(script) => {
                let event: Value = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
                script.received.lock().unwrap().push(event);
                let answer = script.answers.lock().unwrap().pop_front();
                Ok(answer
                    .unwrap_or_else(|| serde_json::json!({}))
                    .to_string()
                    .into_bytes())
            }
        }
    }
}

/// Runs a handler as the Lambda runtime does, whatever event and response types it takes:
/// a time window event and a plain one are both read by the function's own types.
async fn run<E, R, F, Fut>(
    payload: &[u8],
    context: lambda_runtime::Context,
    handler: F,
) -> Result<Vec<u8>, String>
where
    E: DeserializeOwned,
    R: Serialize,
    F: FnOnce(LambdaEvent<E>) -> Fut,
    Fut: Future<Output = Result<R, lambda_runtime::Error>>,
{
    let event: E = serde_json::from_slice(payload)
        .map_err(|e| format!("the runtime could not deserialize the event: {e}"))?;
    let response = handler(LambdaEvent::new(event, context))
        .await
        .map_err(|e| e.to_string())?;
    serde_json::to_vec(&response).map_err(|e| e.to_string())
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
