//! The test harness: one local stack per test, with its own uniquely named resources, so
//! tests run in parallel against one emulator (`make test` starts it and sets
//! `AWS_ENDPOINT_URL`); run alone, a test starts an emulator of its own.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use likes_local::jwt::JwtAuthorizer;
use likes_local::stack::{AwsTarget, Stack, StackOptions};
use serde_json::Value;
use tokio::net::TcpStream;

pub use likes_local::stack;

/// A running stack for one test.
pub struct TestStack {
    pub stack: Stack,
    authorizer: JwtAuthorizer,
}

/// A resource prefix no other test, and no earlier run against the same emulator, uses.
pub fn unique_prefix() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos();
    format!(
        "t{}-{}-{}",
        std::process::id(),
        nanos % 1_000_000_000_000,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

impl TestStack {
    pub async fn start() -> Self {
        let aws = AwsTarget::connect()
            .await
            .expect("an AWS endpoint: run through `make test`, or have .venv ready");
        let options = StackOptions {
            prefix: unique_prefix(),
            http_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        let stack = Stack::start(aws, options)
            .await
            .expect("local stack starts");
        Self {
            stack,
            authorizer: JwtAuthorizer::from_env(),
        }
    }

    pub fn dynamodb(&self) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::new(&self.stack.aws.sdk)
    }

    /// The physical name of a template resource.
    pub fn name(&self, logical_id: &str) -> String {
        self.stack
            .resources
            .name(logical_id)
            .unwrap_or_else(|| panic!("{logical_id} is created from the template"))
            .to_owned()
    }

    /// A valid bearer token for `sub`.
    pub fn token(&self, sub: &str) -> String {
        self.authorizer.mint(sub, now_seconds(), 3600)
    }

    /// A request as `sub` (or anonymous with `None`).
    pub fn request(&self, method: &str, path: &str, sub: Option<&str>) -> TestRequest {
        let mut request = TestRequest {
            addr: self.stack.http_addr,
            method: method.to_owned(),
            path: path.to_owned(),
            headers: Vec::new(),
            body: Vec::new(),
        };
        if let Some(sub) = sub {
            request = request.header("authorization", &format!("Bearer {}", self.token(sub)));
        }
        request
    }
}

pub fn now_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64
}

/// A request to the local HTTP front, over a real TCP connection.
pub struct TestRequest {
    addr: SocketAddr,
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl TestRequest {
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn json(mut self, body: &Value) -> Self {
        self.body = body.to_string().into_bytes();
        self.header("content-type", "application/json")
    }

    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    pub async fn send(self) -> TestResponse {
        let stream = TcpStream::connect(self.addr).await.expect("front accepts");
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .expect("HTTP/1 handshake");
        tokio::spawn(connection);
        let mut request = http::Request::builder()
            .method(self.method.as_str())
            .uri(&self.path)
            .header("host", self.addr.to_string());
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let request = request
            .body(Full::new(Bytes::from(self.body)))
            .expect("valid test request");
        let response = sender.send_request(request).await.expect("front answers");
        let (parts, body) = response.into_parts();
        let body = body
            .collect()
            .await
            .expect("whole body")
            .to_bytes()
            .to_vec();
        TestResponse {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        }
    }
}

#[derive(Debug)]
pub struct TestResponse {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

impl TestResponse {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Asserts an RFC 9457 problem with `status`; returns it.
    pub fn problem(&self, status: u16) -> Value {
        assert_eq!(
            self.status,
            status,
            "body: {}",
            String::from_utf8_lossy(&self.body)
        );
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json")
        );
        let problem = self.json();
        assert_eq!(problem["status"], status);
        for member in ["type", "title", "detail"] {
            assert!(
                problem[member].is_string(),
                "problem has {member}: {problem}"
            );
        }
        problem
    }
}
