//! A stand-in for the Lambda Runtime API (the 2018-06-01 interface a `provided.al2023`
//! bootstrap polls), serving one invocation: the first `GET …/invocation/next` gets the
//! event with the headers Lambda sends, a later one waits until the bootstrap is killed.
//! Every call the bootstrap makes is reported with the time it arrived.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

const PREFIX: &str = "/2018-06-01/runtime";

/// The one event to hand out, and the headers that go with it.
pub struct Invocation {
    pub request_id: String,
    pub function_arn: String,
    /// Epoch millis by which the function must answer (now + its Timeout).
    pub deadline_ms: u128,
    pub trace_id: String,
    pub payload: Bytes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// `GET /invocation/next`: init is done, the runtime asks for work.
    Next,
    /// `POST /invocation/{id}/response`: the invocation was served.
    Response,
    /// `POST /invocation/{id}/error`: the handler failed.
    Error,
    /// `POST /init/error`: the bootstrap failed before its first `next`.
    InitError,
}

/// One call from the bootstrap; `at` is when its whole request had arrived.
#[derive(Debug)]
pub struct Call {
    pub kind: CallKind,
    pub at: Instant,
    pub body: Bytes,
}

struct Shared {
    invocation: Mutex<Option<Invocation>>,
    calls: mpsc::UnboundedSender<Call>,
}

/// A Runtime API on a loopback port of its own; dropping it stops serving.
pub struct RuntimeApi {
    addr: SocketAddr,
    calls: mpsc::UnboundedReceiver<Call>,
    task: JoinHandle<()>,
}

impl RuntimeApi {
    pub async fn serve(invocation: Invocation) -> Self {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("a loopback port for the Runtime API");
        let addr = listener.local_addr().expect("the listener's address");
        let (sender, calls) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            invocation: Mutex::new(Some(invocation)),
            calls: sender,
        });
        let task = tokio::spawn(accept(listener, shared));
        Self { addr, calls, task }
    }

    /// `AWS_LAMBDA_RUNTIME_API` as Lambda sets it: host and port, no scheme.
    pub fn address(&self) -> String {
        self.addr.to_string()
    }

    /// The bootstrap's next call.
    pub async fn call(&mut self) -> Call {
        self.calls
            .recv()
            .await
            .expect("the Runtime API serves until dropped")
    }
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = tokio::task::JoinSet::new();
    while let Ok((stream, _)) = listener.accept().await {
        let shared = shared.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(handle(&shared, request).await) }
            });
            // A killed bootstrap resets its connections: nothing to report.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn handle(shared: &Shared, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
        return status(StatusCode::BAD_REQUEST);
    };
    let at = Instant::now();
    let path = parts.uri.path().strip_prefix(PREFIX).unwrap_or_default();
    let kind = match (&parts.method, path) {
        (&Method::GET, "/invocation/next") => CallKind::Next,
        (&Method::POST, "/init/error") => CallKind::InitError,
        (&Method::POST, p) if p.starts_with("/invocation/") && p.ends_with("/response") => {
            CallKind::Response
        }
        (&Method::POST, p) if p.starts_with("/invocation/") && p.ends_with("/error") => {
            CallKind::Error
        }
        _ => return status(StatusCode::NOT_FOUND),
    };
    let _ = shared.calls.send(Call { kind, at, body });
    if kind != CallKind::Next {
        return status(StatusCode::ACCEPTED);
    }
    let invocation = shared.invocation.lock().expect("not poisoned").take();
    let Some(invocation) = invocation else {
        // One invocation per process: the bench kills the bootstrap while it waits here.
        return std::future::pending().await;
    };
    Response::builder()
        .header("content-type", "application/json")
        .header("lambda-runtime-aws-request-id", &invocation.request_id)
        .header(
            "lambda-runtime-deadline-ms",
            invocation.deadline_ms.to_string(),
        )
        .header(
            "lambda-runtime-invoked-function-arn",
            &invocation.function_arn,
        )
        .header("lambda-runtime-trace-id", &invocation.trace_id)
        .body(Full::new(invocation.payload))
        .expect("a valid invocation response")
}

fn status(code: StatusCode) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(b"{\"status\":\"OK\"}")));
    *response.status_mut() = code;
    response
}
