//! Live counts over API Gateway WebSockets, as Lambda handlers shared by the bootstrap
//! (`functions/`, the `live-*` handlers) and the local WebSocket API:
//!
//! - [`Connect`], [`Disconnect`], [`Message`]: the WebSocket API's routes.
//! - [`Broadcaster`]: the event log's consumer that pushes coalesced counts to watchers.

mod broadcaster;
mod config;
mod connections;
mod socket;
mod token;

use aws_config::{BehaviorVersion, SdkConfig};
use aws_lambda_events::apigw::{ApiGatewayProxyResponse, ApiGatewayWebsocketProxyRequest};
use lambda_runtime::{service_fn, LambdaEvent};

pub use broadcaster::Broadcaster;
pub use config::{
    BroadcastConfig, ConfigError, ConnectConfig, DisconnectConfig, LiveTables, MessageConfig,
};
pub use connections::{Connections, PostError, Posted};
pub use socket::{Connect, Disconnect, Message};
pub use token::{TokenError, TokenVerifier};

/// A WebSocket route's function, by its handler: what the local front invokes.
#[derive(Debug, Clone)]
pub enum SocketFunction {
    Connect(Connect),
    Disconnect(Disconnect),
    Message(Message),
}

impl SocketFunction {
    pub fn for_handler(
        handler: &str,
        lookup: impl Fn(&str) -> Option<String>,
        sdk: &SdkConfig,
    ) -> Result<Self, String> {
        let dynamodb = aws_sdk_dynamodb::Client::new(sdk);
        match handler {
            "live-connect" => ConnectConfig::from_lookup(lookup)
                .map(|config| Self::Connect(Connect::new(config, dynamodb))),
            "live-disconnect" => DisconnectConfig::from_lookup(lookup)
                .map(|config| Self::Disconnect(Disconnect::new(config, dynamodb))),
            "live-message" => MessageConfig::from_lookup(lookup)
                .map(|config| Self::Message(Message::new(config, sdk, dynamodb))),
            other => return Err(format!("no WebSocket handler {other:?}")),
        }
        .map_err(|err| err.to_string())
    }

    pub async fn handle(
        &self,
        event: LambdaEvent<ApiGatewayWebsocketProxyRequest>,
    ) -> Result<ApiGatewayProxyResponse, lambda_runtime::Error> {
        match self {
            Self::Connect(connect) => connect.handle(event).await,
            Self::Disconnect(disconnect) => disconnect.handle(event).await,
            Self::Message(message) => message.handle(event).await,
        }
    }
}

/// A WebSocket route function's runtime loop: `handler` is its `Handler`.
pub async fn run_socket(handler: &str) -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let sdk = aws_config::load_defaults(BehaviorVersion::latest()).await;
    let function = SocketFunction::for_handler(handler, |name| std::env::var(name).ok(), &sdk)?;
    let function = &function;
    lambda_runtime::run(service_fn(move |event| async move {
        function.handle(event).await
    }))
    .await
}

/// The whole of the broadcaster's `main`.
pub async fn run_broadcaster() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config = BroadcastConfig::from_env()?;
    let sdk = aws_config::load_defaults(BehaviorVersion::latest()).await;
    let broadcaster = Broadcaster::new(config, &sdk, aws_sdk_dynamodb::Client::new(&sdk));
    let broadcaster = &broadcaster;
    lambda_runtime::run(service_fn(move |event| async move {
        broadcaster.handle(event).await
    }))
    .await
}
