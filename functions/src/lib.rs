//! The registry of Likes' Lambda functions: each one's `Handler` in template.yaml, and how
//! it is built from its environment and its AWS clients. One bootstrap (`src/main.rs`)
//! serves them all, building the function its `_HANDLER` names; the local stack builds its
//! functions from the same registry, and invokes them as Lambda does, with the event's JSON.
//! The handlers' logic lives in the shared crates.

use std::future::Future;
use std::pin::Pin;

use aws_config::SdkConfig;
use aws_lambda_events::apigw::{ApiGatewayProxyResponse, ApiGatewayWebsocketProxyRequest};
use aws_lambda_events::dynamodb::Event as DynamoDbEvent;
use aws_lambda_events::kinesis::KinesisEvent;
use aws_lambda_events::streams::{DynamoDbEventResponse, KinesisEventResponse};
use lambda_http::request::LambdaRequest;
use lambda_http::tower::Service;
use lambda_http::{Adapter, Request};
use lambda_runtime::{Context, LambdaEvent};
use likes_api::{App, Config, Endpoint};
use likes_consumers::{
    Aggregator, AggregatorConfig, BoardRefresher, Eraser, EraserConfig, Leaderboard,
    LeaderboardConfig, Publisher, PublisherConfig, Pulse, PulseConfig, RefresherConfig, Retractor,
    RetractorConfig,
};
use likes_live::{
    BroadcastConfig, Broadcaster, Connect, ConnectConfig, Disconnect, DisconnectConfig, Message,
    MessageConfig,
};
use likes_reconcile::{ReconcileConfig, Reconciler};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

pub type Error = lambda_runtime::Error;

/// A function's environment variables, as its configuration reads them.
pub type Environment<'a> = &'a dyn Fn(&str) -> Option<String>;

/// One invocation's answer: the response's JSON, or the function's error.
pub type Invocation<'a> = Pin<Box<dyn Future<Output = Result<Vec<u8>, Error>> + Send + 'a>>;

/// A function as Lambda runs it: the event's JSON in, the response's JSON out, each read and
/// written by the function's own types.
pub trait Invoke: Send + Sync {
    fn invoke<'a>(&'a self, event: &'a [u8], context: Context) -> Invocation<'a>;
}

/// The AWS clients a function is built with. On Lambda they are the SDK's defaults; the
/// local stack hands in its own (path-style S3, the stream as its pollers split it, the
/// clients its faults intercept).
#[derive(Debug, Clone)]
pub struct Clients {
    pub sdk: SdkConfig,
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub kinesis: aws_sdk_kinesis::Client,
    pub streams: aws_sdk_dynamodbstreams::Client,
    pub s3: aws_sdk_s3::Client,
    pub secrets: aws_sdk_secretsmanager::Client,
}

impl Clients {
    pub fn new(sdk: &SdkConfig) -> Self {
        Self {
            sdk: sdk.clone(),
            dynamodb: aws_sdk_dynamodb::Client::new(sdk),
            kinesis: aws_sdk_kinesis::Client::new(sdk),
            streams: aws_sdk_dynamodbstreams::Client::new(sdk),
            s3: aws_sdk_s3::Client::new(sdk),
            secrets: aws_sdk_secretsmanager::Client::new(sdk),
        }
    }
}

/// Builds a function from its environment and clients (a configuration error is `Err`).
pub type Build = fn(Environment, &Clients) -> Result<Box<dyn Invoke>, Error>;

/// One function: its `Handler` in template.yaml and how it is built.
#[derive(Clone, Copy)]
pub struct Function {
    pub handler: &'static str,
    pub build: Build,
}

/// A handler type of the shared crates: the event it reads and the response it answers.
trait Handle: Send + Sync + 'static {
    type Event: DeserializeOwned + Send;
    type Response: Serialize;
    fn handle(
        &self,
        event: LambdaEvent<Self::Event>,
    ) -> impl Future<Output = Result<Self::Response, Error>> + Send;
}

impl<H: Handle> Invoke for H {
    fn invoke<'a>(&'a self, event: &'a [u8], context: Context) -> Invocation<'a> {
        Box::pin(async move {
            let event: H::Event = serde_json::from_slice(event)?;
            let response = self.handle(LambdaEvent::new(event, context)).await?;
            Ok(serde_json::to_vec(&response)?)
        })
    }
}

/// Each handler type with the event and response types of its `handle`.
macro_rules! handles {
    ($($handler:ty: $event:ty => $response:ty;)*) => {$(
        impl Handle for $handler {
            type Event = $event;
            type Response = $response;
            fn handle(
                &self,
                event: LambdaEvent<$event>,
            ) -> impl Future<Output = Result<$response, Error>> + Send {
                <$handler>::handle(self, event)
            }
        }
    )*};
}

handles! {
    Aggregator: aws_lambda_events::dynamodb::TimeWindowEvent
        => aws_lambda_events::dynamodb::TimeWindowEventResponse;
    Publisher: DynamoDbEvent => DynamoDbEventResponse;
    Eraser: DynamoDbEvent => DynamoDbEventResponse;
    Retractor: DynamoDbEvent => DynamoDbEventResponse;
    Leaderboard: KinesisEvent => KinesisEventResponse;
    Broadcaster: KinesisEvent => KinesisEventResponse;
    Pulse: Value => Value;
    BoardRefresher: Value => Value;
    Reconciler: Value => Value;
    Connect: ApiGatewayWebsocketProxyRequest => ApiGatewayProxyResponse;
    Disconnect: ApiGatewayWebsocketProxyRequest => ApiGatewayProxyResponse;
    Message: ApiGatewayWebsocketProxyRequest => ApiGatewayProxyResponse;
}

/// An HTTP API route's function: API Gateway's payload 2.0 event in, its response out,
/// through lambda_http as its runtime reads them.
struct Route {
    app: App,
    endpoint: Endpoint,
}

impl Invoke for Route {
    fn invoke<'a>(&'a self, event: &'a [u8], context: Context) -> Invocation<'a> {
        Box::pin(async move {
            let event: LambdaRequest = serde_json::from_slice(event)?;
            let app = &self.app;
            let endpoint = self.endpoint;
            let mut adapter = Adapter::from(lambda_http::service_fn(
                move |request: Request| async move {
                    Ok::<_, std::convert::Infallible>(app.handle(endpoint, request).await)
                },
            ));
            let response = adapter.call(LambdaEvent::new(event, context)).await?;
            Ok(serde_json::to_vec(&response)?)
        })
    }
}

/// An HTTP endpoint's entry: its `Handler` is the endpoint's own.
macro_rules! endpoint {
    ($endpoint:ident) => {
        Function {
            handler: Endpoint::$endpoint.handler(),
            build: |env, clients| {
                let config = Config::from_lookup(Endpoint::$endpoint, env)?;
                Ok(Box::new(Route {
                    app: App::with_clients(
                        config,
                        clients.dynamodb.clone(),
                        clients.secrets.clone(),
                    ),
                    endpoint: Endpoint::$endpoint,
                }))
            },
        }
    };
}

/// Any other entry: the `Handler` and what it builds.
macro_rules! function {
    ($handler:literal, |$env:ident, $clients:ident| $build:expr) => {
        Function {
            handler: $handler,
            build: |$env, $clients| Ok(Box::new($build)),
        }
    };
}

/// Every function, by its `Handler` in template.yaml. Adding a function is its template
/// entry, its handler in a shared crate, and one line here.
pub const FUNCTIONS: &[Function] = &[
    endpoint!(PutReaction),
    endpoint!(PutLike),
    endpoint!(DeleteLike),
    endpoint!(GetReaction),
    endpoint!(ListLikedItems),
    endpoint!(GetLikeCount),
    endpoint!(BatchGetLikeCounts),
    endpoint!(BatchGetItems),
    endpoint!(EraseReactions),
    endpoint!(GetErasure),
    endpoint!(GetLeaderboard),
    endpoint!(ListLikers),
    endpoint!(RetractUser),
    endpoint!(GetRetraction),
    endpoint!(LiftSuspension),
    endpoint!(RemoveItem),
    endpoint!(GetSettings),
    endpoint!(PutSettings),
    endpoint!(PutBlock),
    endpoint!(DeleteBlock),
    endpoint!(ListBlocks),
    endpoint!(GetNamespace),
    endpoint!(PutNamespace),
    endpoint!(PutItemOwner),
    endpoint!(GetItemOwner),
    endpoint!(GetItemSettings),
    endpoint!(PutItemSettings),
    endpoint!(GetItemStats),
    function!("aggregator", |env, clients| Aggregator::new(
        AggregatorConfig::from_lookup(env)?,
        clients.dynamodb.clone()
    )),
    function!("publisher", |env, clients| Publisher::new(
        PublisherConfig::from_lookup(env)?,
        clients.kinesis.clone()
    )),
    function!("erase", |env, clients| Eraser::new(
        EraserConfig::from_lookup(env)?,
        clients.dynamodb.clone()
    )),
    function!("retract", |env, clients| Retractor::new(
        RetractorConfig::from_lookup(env)?,
        clients.dynamodb.clone(),
        clients.kinesis.clone()
    )),
    function!("leaderboard", |env, clients| Leaderboard::new(
        LeaderboardConfig::from_lookup(env)?,
        clients.dynamodb.clone()
    )),
    function!("pulse", |env, clients| Pulse::new(
        PulseConfig::from_lookup(env)?,
        clients.dynamodb.clone(),
        clients.streams.clone()
    )),
    function!("refresh-leaderboard", |env, clients| BoardRefresher::new(
        RefresherConfig::from_lookup(env)?,
        clients.dynamodb.clone(),
        clients.kinesis.clone()
    )),
    function!("reconcile", |env, clients| Reconciler::new(
        ReconcileConfig::from_lookup(env)?,
        clients.dynamodb.clone(),
        clients.s3.clone(),
        aws_sdk_athena::Client::new(&clients.sdk)
    )),
    function!("live-connect", |env, clients| Connect::new(
        ConnectConfig::from_lookup(env)?,
        clients.dynamodb.clone()
    )),
    function!("live-disconnect", |env, clients| Disconnect::new(
        DisconnectConfig::from_lookup(env)?,
        clients.dynamodb.clone()
    )),
    function!("live-message", |env, clients| Message::new(
        MessageConfig::from_lookup(env)?,
        &clients.sdk,
        clients.dynamodb.clone()
    )),
    function!("live-broadcast", |env, clients| Broadcaster::new(
        BroadcastConfig::from_lookup(env)?,
        &clients.sdk,
        clients.dynamodb.clone()
    )),
];

/// The registry's entry for the function whose `Handler` is `handler`.
pub fn function(handler: &str) -> Option<&'static Function> {
    FUNCTIONS.iter().find(|f| f.handler == handler)
}

/// Builds the function whose `Handler` is `handler`.
pub fn build(handler: &str, env: Environment, clients: &Clients) -> Result<Box<dyn Invoke>, Error> {
    let function =
        function(handler).ok_or_else(|| format!("no function has the Handler {handler:?}"))?;
    (function.build)(env, clients)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_handler_is_listed_once() {
        let mut names: Vec<&str> = FUNCTIONS.iter().map(|f| f.handler).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FUNCTIONS.len());
        assert!(function("put-reaction").is_some());
        assert!(function("bootstrap").is_none());
    }
}
