//! The WebSocket API, locally: what API Gateway's WebSocket API does in AWS. It routes exactly
//! the template's WebSocket routes (`$connect`, `$disconnect`, the route selection expression's
//! keys, `$default`), invokes their functions in process with API Gateway's WebSocket proxy
//! events, refuses the upgrade when `$connect` answers non-2xx, sends a route's answer back
//! when the template declares a route response for it, and serves the stage's management API
//! (`POST`/`GET`/`DELETE /{stage}/@connections/{id}`) that the functions' SDK clients call,
//! answering 410 `GoneException` for a connection that is not open. Like AWS, it closes a
//! connection after 10 minutes without a client frame or 2 hours in all.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_lambda_events::http::HeaderMap;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{CONNECTION, CONTENT_TYPE, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY, UPGRADE};
use hyper_util::rt::TokioIo;
use likes_core::clock::now_ms;
use likes_functions::Invoke;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use crate::http_api::{form_decode, serve_http, HttpResponse};
use crate::template::{DeclaredWebSocketApi, Throttle};
use crate::throttle::RouteThrottles;

mod event;
mod management;

use event::{invoke, text_body};

/// API Gateway closes a connection with no client frame for this long...
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// ...and any connection this old.
pub const MAX_CONNECTION_AGE: Duration = Duration::from_secs(2 * 3600);
/// A WebSocket frame (and so a posted message) is at most 128 KB on API Gateway.
const MAX_MESSAGE: usize = 128 * 1024;

/// A route of the WebSocket API and the function behind it.
pub struct SocketTarget {
    pub route_key: String,
    pub function: Box<dyn Invoke>,
    /// The template declares a route response: the answer's body is sent back.
    pub responds: bool,
    /// The stage's throttle for the route: `$connect`'s refuses an upgrade past it (429).
    pub throttle: Option<Throttle>,
}

enum Outbound {
    Text(String),
    Close,
}

/// An open connection, as the management API sees it.
struct Link {
    outbound: mpsc::UnboundedSender<Outbound>,
    connected_at_ms: i64,
    last_active_ms: i64,
    source_ip: String,
    user_agent: String,
}

pub struct WebSocketApi {
    api_id: String,
    stage: String,
    /// The body member the route selection expression names (`action`).
    selection_member: Option<String>,
    routes: HashMap<String, SocketTarget>,
    links: Mutex<HashMap<String, Link>>,
    /// The routes' throttles (`$connect`'s, as the stage sets it).
    throttles: RouteThrottles,
    /// Fault switch: the next posts answered 429, as API Gateway throttles them.
    throttle_posts: AtomicU32,
    throttled_posts: AtomicU32,
}

/// What a request carried that the events need.
struct Caller {
    headers: HeaderMap,
    query: Vec<(String, String)>,
    source_ip: String,
    domain: String,
    user_agent: String,
}

impl WebSocketApi {
    pub fn new(api: &DeclaredWebSocketApi, api_id: String, targets: Vec<SocketTarget>) -> Self {
        Self {
            api_id,
            stage: api.stage_name.clone(),
            selection_member: api
                .route_selection
                .strip_prefix("$request.body.")
                .map(str::to_owned),
            routes: targets
                .into_iter()
                .map(|target| (target.route_key.clone(), target))
                .collect(),
            links: Mutex::default(),
            throttles: RouteThrottles::default(),
            throttle_posts: AtomicU32::new(0),
            throttled_posts: AtomicU32::new(0),
        }
    }

    /// Answers the next `n` posts to any connection 429 `LimitExceededException`.
    pub fn throttle_next_posts(&self, n: u32) {
        self.throttle_posts.store(n, Ordering::SeqCst);
    }

    /// Posts answered 429 so far.
    pub fn throttled_posts(&self) -> u32 {
        self.throttled_posts.load(Ordering::SeqCst)
    }

    /// Serves until the task is dropped or aborted.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        serve_http(listener, move |request, peer| {
            self.clone().handle(request, peer)
        })
        .await;
    }

    async fn handle(
        self: Arc<Self>,
        request: hyper::Request<Incoming>,
        peer: std::net::SocketAddr,
    ) -> HttpResponse {
        let management = format!("/{}/@connections/", self.stage);
        if let Some(id) = request.uri().path().strip_prefix(&management) {
            let id = percent_encoding::percent_decode_str(id)
                .decode_utf8_lossy()
                .into_owned();
            return self.manage(request, &id).await;
        }
        let upgrade = request
            .headers()
            .get(UPGRADE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
        if !upgrade || request.method() != hyper::Method::GET {
            return plain(426, json!({"message": "Upgrade Required"}));
        }
        self.upgrade(request, peer).await
    }

    async fn upgrade(
        self: Arc<Self>,
        mut request: hyper::Request<Incoming>,
        peer: std::net::SocketAddr,
    ) -> HttpResponse {
        let Some(key) = request.headers().get(SEC_WEBSOCKET_KEY).cloned() else {
            return plain(400, json!({"message": "Bad Request"}));
        };
        let mut headers = HeaderMap::new();
        for (name, value) in request.headers() {
            headers.append(name.clone(), value.clone());
        }
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let caller = Caller {
            query: request
                .uri()
                .query()
                .unwrap_or_default()
                .split('&')
                .filter(|pair| !pair.is_empty())
                .map(|pair| {
                    let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
                    (form_decode(name), form_decode(value))
                })
                .collect(),
            source_ip: peer.ip().to_string(),
            domain: header("host"),
            user_agent: header("user-agent"),
            headers,
        };
        let connection_id = URL_SAFE_NO_PAD.encode(&uuid::Uuid::new_v4().as_bytes()[..9]);
        let connected_at_ms = now_ms();
        if let Some(target) = self.routes.get("$connect") {
            if !self.throttles.admit("$connect", target.throttle) {
                return plain(429, json!({"message": "Too Many Requests"}));
            }
            let event = self.event(
                "CONNECT",
                "$connect",
                &connection_id,
                connected_at_ms,
                Some(&caller),
                None,
            );
            match invoke(target, event).await {
                Ok(answer) if (200..300).contains(&answer.status_code) => {}
                Ok(answer) => {
                    let status = u16::try_from(answer.status_code).unwrap_or(500);
                    return plain(status, json!({"message": "Forbidden"}));
                }
                Err(err) => {
                    tracing::error!(error = %err, "$connect invocation failed");
                    return plain(500, json!({"message": "Internal server error"}));
                }
            }
        }
        let (outbound, inbound) = mpsc::unbounded_channel();
        self.links.lock().expect("links lock").insert(
            connection_id.clone(),
            Link {
                outbound,
                connected_at_ms,
                last_active_ms: connected_at_ms,
                source_ip: caller.source_ip.clone(),
                user_agent: caller.user_agent.clone(),
            },
        );
        let front = self.clone();
        tokio::spawn(async move {
            match hyper::upgrade::on(&mut request).await {
                Ok(upgraded) => {
                    let socket = WebSocketStream::from_raw_socket(
                        TokioIo::new(upgraded),
                        Role::Server,
                        None,
                    )
                    .await;
                    front
                        .run(socket, &connection_id, connected_at_ms, inbound)
                        .await;
                }
                Err(err) => {
                    tracing::debug!(error = %err, "upgrade failed");
                    front.closed(&connection_id, connected_at_ms, 1006).await;
                }
            }
        });
        hyper::Response::builder()
            .status(101)
            .header(UPGRADE, "websocket")
            .header(CONNECTION, "Upgrade")
            .header(SEC_WEBSOCKET_ACCEPT, derive_accept_key(key.as_bytes()))
            .body(Full::new(Bytes::new()))
            .expect("static response is valid")
    }

    /// One open connection: client frames to their routes, posted messages to the client,
    /// until either side closes or a timeout does.
    async fn run<S>(
        self: Arc<Self>,
        socket: WebSocketStream<S>,
        connection_id: &str,
        connected_at_ms: i64,
        mut outbound: mpsc::UnboundedReceiver<Outbound>,
    ) where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        let (mut sink, mut frames) = socket.split();
        let too_old = tokio::time::sleep(MAX_CONNECTION_AGE);
        tokio::pin!(too_old);
        let status = loop {
            let idle = tokio::time::sleep(IDLE_TIMEOUT);
            tokio::select! {
                frame = frames.next() => {
                    let text = match frame {
                        Some(Ok(Message::Text(text))) => text.as_str().to_owned(),
                        Some(Ok(Message::Binary(bytes))) => String::from_utf8_lossy(&bytes).into_owned(),
                        Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {
                            self.touch(connection_id);
                            continue;
                        }
                        Some(Ok(Message::Close(_))) => break 1000,
                        Some(Err(_)) | None => break 1006,
                    };
                    self.touch(connection_id);
                    let front = self.clone();
                    let id = connection_id.to_owned();
                    tokio::spawn(async move { front.message(&id, connected_at_ms, text).await });
                }
                out = outbound.recv() => match out {
                    Some(Outbound::Text(text)) => {
                        if sink.send(Message::text(text)).await.is_err() {
                            break 1006;
                        }
                    }
                    Some(Outbound::Close) | None => {
                        let _ = sink.send(Message::Close(None)).await;
                        break 1000;
                    }
                },
                () = idle => break 1001,
                () = &mut too_old => break 1001,
            }
        };
        self.closed(connection_id, connected_at_ms, status).await;
    }

    /// The connection is gone: it leaves the management API, then `$disconnect` runs.
    async fn closed(&self, connection_id: &str, connected_at_ms: i64, status: i64) {
        self.links.lock().expect("links lock").remove(connection_id);
        let Some(target) = self.routes.get("$disconnect") else {
            return;
        };
        let mut event = self.event(
            "DISCONNECT",
            "$disconnect",
            connection_id,
            connected_at_ms,
            None,
            None,
        );
        event.request_context.disconnect_status_code = Some(status);
        if let Err(err) = invoke(target, event).await {
            tracing::error!(error = %err, "$disconnect invocation failed");
        }
    }

    /// One client message: the route its body selects, else `$default`.
    async fn message(&self, connection_id: &str, connected_at_ms: i64, body: String) {
        let selected = self.selection_member.as_ref().and_then(|member| {
            serde_json::from_str::<Value>(&body)
                .ok()?
                .get(member)?
                .as_str()
                .map(str::to_owned)
        });
        let route_key = selected
            .filter(|key| !key.starts_with('$') && self.routes.contains_key(key))
            .unwrap_or_else(|| "$default".to_owned());
        let Some(target) = self.routes.get(&route_key) else {
            self.send(
                connection_id,
                json!({"message": "Forbidden", "connectionId": connection_id}).to_string(),
            );
            return;
        };
        let event = self.event(
            "MESSAGE",
            &route_key,
            connection_id,
            connected_at_ms,
            None,
            Some(body),
        );
        match invoke(target, event).await {
            Ok(answer) if target.responds => {
                if let Some(body) = answer.body.and_then(text_body).filter(|b| !b.is_empty()) {
                    self.send(connection_id, body);
                }
            }
            Ok(_) => {}
            Err(err) => {
                tracing::error!(%route_key, error = %err, "invocation failed");
                self.send(
                    connection_id,
                    json!({"message": "Internal server error", "connectionId": connection_id})
                        .to_string(),
                );
            }
        }
    }

    fn send(&self, connection_id: &str, text: String) {
        if let Some(link) = self.links.lock().expect("links lock").get(connection_id) {
            let _ = link.outbound.send(Outbound::Text(text));
        }
    }

    fn touch(&self, connection_id: &str) {
        if let Some(link) = self
            .links
            .lock()
            .expect("links lock")
            .get_mut(connection_id)
        {
            link.last_active_ms = now_ms();
        }
    }
}

fn plain(status: u16, body: Value) -> HttpResponse {
    hyper::Response::builder()
        .status(status)
        .header(CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("static response is valid")
}
