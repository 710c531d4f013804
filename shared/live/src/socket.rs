//! The WebSocket API's routes: `$connect` checks the token and records the connection,
//! `$disconnect` removes it with its subscriptions, and `subscribe`, `unsubscribe` and
//! `$default` read a watcher's message. A bad message is answered (the route response) with
//! `{"type": "error", "detail"}` and changes nothing; a subscribe is answered with the
//! items' current counts, posted to the connection at once.

use aws_config::SdkConfig;
use aws_lambda_events::apigw::{ApiGatewayProxyResponse, ApiGatewayWebsocketProxyRequest};
use aws_lambda_events::encodings::Body;
use lambda_runtime::LambdaEvent;
use likes_core::live::{parse_action, Action, ServerMessage, MAX_WATCHED};
use likes_store::{
    CachedCounts, CatalogCache, CatalogStore, CountsStore, LiveStore, PushClaims, Watch, Watching,
};
use tracing::Instrument;

use crate::config::{ConnectConfig, DisconnectConfig, LiveTables, MessageConfig};
use crate::connections::{Connections, Posted};
use crate::token::TokenError;

fn store(tables: &LiveTables, dynamodb: aws_sdk_dynamodb::Client) -> LiveStore {
    LiveStore::new(
        dynamodb,
        &tables.connections_table,
        &tables.subscriptions_table,
        tables.buckets,
    )
}

fn connection_id(event: &ApiGatewayWebsocketProxyRequest) -> Result<&str, lambda_runtime::Error> {
    event
        .request_context
        .connection_id
        .as_deref()
        .ok_or_else(|| "the event names no connection".into())
}

fn answer(status: i64, body: Option<String>) -> ApiGatewayProxyResponse {
    let mut response = ApiGatewayProxyResponse::default();
    response.status_code = status;
    response.body = body.map(Body::Text);
    response
}

/// `$connect`.
#[derive(Debug, Clone)]
pub struct Connect {
    config: ConnectConfig,
    store: LiveStore,
}

impl Connect {
    pub fn new(config: ConnectConfig, dynamodb: aws_sdk_dynamodb::Client) -> Self {
        Self {
            store: store(&config.tables, dynamodb),
            config,
        }
    }

    /// 200 lets the connection in; 401 makes API Gateway refuse the upgrade.
    pub async fn handle(
        &self,
        event: LambdaEvent<ApiGatewayWebsocketProxyRequest>,
    ) -> Result<ApiGatewayProxyResponse, lambda_runtime::Error> {
        let request = event.payload;
        let connection = connection_id(&request)?;
        let token = request.query_string_parameters.first("token").or_else(|| {
            request
                .headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
        });
        let user = match self.config.tokens.verify(token).await {
            Ok(user) => user,
            Err(reason @ TokenError::KeysUnavailable(_)) => {
                tracing::warn!(connection, %reason, "connection refused for now");
                return Ok(answer(503, None));
            }
            Err(reason) => {
                tracing::info!(connection, %reason, "connection refused");
                return Ok(answer(401, None));
            }
        };
        self.store
            .connect(connection, user.as_str(), likes_core::clock::now_ms())
            .await?;
        Ok(answer(200, None))
    }
}

/// `$disconnect`.
#[derive(Debug, Clone)]
pub struct Disconnect {
    store: LiveStore,
}

impl Disconnect {
    pub fn new(config: DisconnectConfig, dynamodb: aws_sdk_dynamodb::Client) -> Self {
        Self {
            store: store(&config.tables, dynamodb),
        }
    }

    pub async fn handle(
        &self,
        event: LambdaEvent<ApiGatewayWebsocketProxyRequest>,
    ) -> Result<ApiGatewayProxyResponse, lambda_runtime::Error> {
        let connection = connection_id(&event.payload)?;
        self.store.disconnect(connection).await?;
        Ok(answer(200, None))
    }
}

/// `subscribe`, `unsubscribe` and `$default`: one handler reads every message, so a message
/// no route matches is answered exactly like a bad one.
#[derive(Debug, Clone)]
pub struct Message {
    store: LiveStore,
    watching: Watching,
    counts: CachedCounts,
    catalog: CatalogCache,
    connections: Connections,
}

impl Message {
    pub fn new(config: MessageConfig, sdk: &SdkConfig, dynamodb: aws_sdk_dynamodb::Client) -> Self {
        Self {
            store: store(&config.tables, dynamodb.clone()),
            watching: Watching::new(PushClaims::new(dynamodb.clone(), config.pushes_table)),
            counts: CachedCounts::new(CountsStore::new(dynamodb.clone(), config.counts_table)),
            catalog: CatalogCache::new(CatalogStore::new(dynamodb, config.catalog_table)),
            connections: Connections::new(sdk, &config.connections_endpoint),
        }
    }

    /// The route response: an error message for a bad message, nothing otherwise.
    pub async fn handle(
        &self,
        event: LambdaEvent<ApiGatewayWebsocketProxyRequest>,
    ) -> Result<ApiGatewayProxyResponse, lambda_runtime::Error> {
        let request = event.payload;
        let connection = connection_id(&request)?.to_owned();
        let route = request
            .request_context
            .route_key
            .clone()
            .unwrap_or_default();
        let span = tracing::info_span!("live_message", %connection, %route);
        let refused =
            |detail: String| Ok(answer(200, Some(ServerMessage::Error { detail }.to_json())));
        let action = match parse_action(request.body.as_deref().unwrap_or_default()) {
            Ok(action) => action,
            Err(detail) => return refused(detail),
        };
        match action {
            Action::Subscribe(items) => {
                match self
                    .store
                    .subscribe(&connection, &items, &self.watching)
                    .instrument(span.clone())
                    .await?
                {
                    Watch::Subscribed => {}
                    Watch::TooMany => {
                        return refused(format!("a connection watches at most {MAX_WATCHED} items"))
                    }
                    Watch::NoConnection => return refused("the connection is not open".into()),
                    Watch::Busy => {
                        return refused(
                            "the connection's subscriptions kept changing meanwhile: send it again"
                                .into(),
                        )
                    }
                }
                let (read, rules) = tokio::join!(
                    self.counts.read(&items).instrument(span.clone()),
                    self.catalog.item_rules(&items, likes_core::clock::now_ms())
                );
                let (read, mut rules) = (read?, rules?);
                for (item, counts) in &read.counts {
                    let shown = rules.remove(item).unwrap_or_default().shown(*counts);
                    let message = ServerMessage::counts(item, shown, read.as_of);
                    if self
                        .connections
                        .post(&connection, &message.to_json())
                        .await?
                        == Posted::Gone
                    {
                        // Gone while subscribing: its $disconnect removes what was written.
                        break;
                    }
                }
            }
            Action::Unsubscribe(items) => {
                self.store
                    .unsubscribe(&connection, &items)
                    .instrument(span)
                    .await?;
            }
        }
        Ok(answer(200, None))
    }
}
