//! A real WebSocket client of the live counts API (the local WebSocket front), and the test
//! stack's live tables.

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::TestStack;

/// The function whose mapping reads the event log for live counts.
pub const BROADCAST_FUNCTION: &str = "LiveBroadcastFunction";

/// A message as the watcher received it, and when.
#[derive(Debug, Clone)]
pub struct Received {
    pub at: Instant,
    /// The same moment on the wall clock (epoch millis), to compare with event times.
    pub at_ms: i64,
    pub message: Value,
}

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// One open connection to the live API. A task reads it as frames arrive, so each message
/// keeps its arrival time however late the test looks at it.
pub struct Watcher {
    sink: futures_util::stream::SplitSink<Socket, Message>,
    received: tokio::sync::mpsc::UnboundedReceiver<Received>,
    reader: tokio::task::JoinHandle<()>,
}

impl Watcher {
    /// Connects with `token` as the `token` query parameter; `Err` is the HTTP status that
    /// refused the upgrade.
    pub async fn connect(url: &str, token: Option<&str>) -> Result<Self, u16> {
        let url = match token {
            Some(token) => format!("{url}/?token={token}"),
            None => url.to_owned(),
        };
        Self::open(url.into_client_request().expect("a ws URL")).await
    }

    /// Connects with `Authorization: Bearer <token>`.
    pub async fn connect_with_header(url: &str, token: &str) -> Result<Self, u16> {
        let mut request = url.into_client_request().expect("a ws URL");
        request.headers_mut().insert(
            "authorization",
            format!("Bearer {token}").parse().expect("a header value"),
        );
        Self::open(request).await
    }

    async fn open(
        request: tokio_tungstenite::tungstenite::handshake::client::Request,
    ) -> Result<Self, u16> {
        match tokio_tungstenite::connect_async(request).await {
            Ok((socket, _)) => {
                let (sink, mut frames) = socket.split();
                let (sender, received) = tokio::sync::mpsc::unbounded_channel();
                let reader = tokio::spawn(async move {
                    while let Some(Ok(frame)) = frames.next().await {
                        match frame {
                            Message::Text(text) => {
                                let message = serde_json::from_str(text.as_str())
                                    .unwrap_or_else(|_| panic!("not JSON: {text}"));
                                let (at, at_ms) = (Instant::now(), likes_core::clock::now_ms());
                                if sender.send(Received { at, at_ms, message }).is_err() {
                                    return;
                                }
                            }
                            Message::Close(_) => return,
                            _ => {}
                        }
                    }
                });
                Ok(Self {
                    sink,
                    received,
                    reader,
                })
            }
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                Err(response.status().as_u16())
            }
            Err(err) => panic!("the WebSocket front did not answer: {err}"),
        }
    }

    pub async fn send(&mut self, message: &Value) {
        self.sink
            .send(Message::text(message.to_string()))
            .await
            .expect("the message is sent");
    }

    pub async fn subscribe(&mut self, items: &[&str]) {
        self.send(&serde_json::json!({"action": "subscribe", "item_ids": items}))
            .await;
    }

    pub async fn unsubscribe(&mut self, items: &[&str]) {
        self.send(&serde_json::json!({"action": "unsubscribe", "item_ids": items}))
            .await;
    }

    /// The next JSON message within `timeout`, if any.
    pub async fn next(&mut self, timeout: Duration) -> Option<Received> {
        tokio::time::timeout(timeout, self.received.recv())
            .await
            .ok()
            .flatten()
    }

    /// The next `n` messages, each within `timeout` of the one before: fewer when the socket
    /// falls quiet first.
    pub async fn take(&mut self, n: usize, timeout: Duration) -> Vec<Received> {
        let mut all = Vec::new();
        while all.len() < n {
            match self.next(timeout).await {
                Some(received) => all.push(received),
                None => break,
            }
        }
        all
    }

    /// Every message received within `window`.
    pub async fn collect(&mut self, window: Duration) -> Vec<Received> {
        let deadline = Instant::now() + window;
        let mut all = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.next(left).await {
                Some(received) => all.push(received),
                None => break,
            }
        }
        all
    }

    /// Messages until one satisfies `done` (included); panics after `timeout`.
    pub async fn until(
        &mut self,
        timeout: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Vec<Received> {
        let deadline = Instant::now() + timeout;
        let mut all = Vec::new();
        loop {
            let left = deadline
                .checked_duration_since(Instant::now())
                .unwrap_or_else(|| panic!("no awaited message within {timeout:?}: {all:?}"));
            let received = self
                .next(left)
                .await
                .unwrap_or_else(|| panic!("no awaited message within {timeout:?}: {all:?}"));
            let finished = done(&received.message);
            all.push(received);
            if finished {
                return all;
            }
        }
    }

    /// Closes the TCP connection without a close frame, as a client that vanished does.
    pub fn drop_connection(self) {
        drop(self);
    }
}

impl Drop for Watcher {
    /// The reader's half of the socket goes with its task; the connection closes once both
    /// halves are gone.
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl TestStack {
    /// The live API's URL (`ws://127.0.0.1:<port>`).
    pub fn ws_url(&self) -> String {
        self.stack.ws_url()
    }

    /// A watcher connected as `sub`.
    pub async fn watcher(&self, sub: &str) -> Watcher {
        Watcher::connect(&self.ws_url(), Some(&self.token(sub)))
            .await
            .expect("a valid token connects")
    }

    /// The live tables' store, configured as the stack's functions are.
    pub fn live_store(&self) -> likes_store::LiveStore {
        let environment = self
            .stack
            .function_environment(BROADCAST_FUNCTION)
            .unwrap_or_else(|err| panic!("{err}"));
        likes_store::LiveStore::new(
            self.dynamodb(),
            self.name("LiveConnectionsTable"),
            self.name("LiveSubscriptionsTable"),
            environment["SUBSCRIPTION_BUCKETS"]
                .parse()
                .expect("SUBSCRIPTION_BUCKETS is a number"),
        )
    }

    /// The broadcaster's event source mapping (on the Kinesis log).
    pub fn broadcaster(&self) -> &likes_local::event_source_mapping::Pipeline {
        self.stack
            .pipeline(BROADCAST_FUNCTION)
            .expect("template.yaml maps the event log to LiveBroadcastFunction")
    }

    /// Waits until every flip in the Reactions stream now is on the event log and through
    /// the broadcaster (panics after 60 s each).
    pub async fn settle_broadcaster(&self) -> likes_local::faults::Counters {
        self.settle_log_reader(self.broadcaster()).await
    }

    /// The items' watch rows, written as the message function writes them.
    pub fn watching(&self) -> likes_store::Watching {
        likes_store::Watching::new(likes_store::PushClaims::new(
            self.dynamodb(),
            self.name("LivePushesTable"),
        ))
    }
}
