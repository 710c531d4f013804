//! Requests to the local HTTP front over real TCP connections, and their answers.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::Value;
use std::net::SocketAddr;
use tokio::net::TcpStream;

use crate::TestStack;

/// A request to the local HTTP front, over a real TCP connection.
pub struct TestRequest {
    pub(crate) addr: SocketAddr,
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl TestRequest {
    pub(crate) fn new(addr: SocketAddr, method: &str, path: &str) -> Self {
        Self {
            addr,
            method: method.to_owned(),
            path: path.to_owned(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

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

    /// Asserts the status, showing the body when it differs.
    pub fn assert_status(&self, status: u16) {
        assert_eq!(
            self.status,
            status,
            "{}",
            String::from_utf8_lossy(&self.body)
        );
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Asserts an RFC 9457 problem with `status`; returns it.
    pub fn problem(&self, status: u16) -> Value {
        self.assert_status(status);
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

impl TestStack {
    /// `GET /v1/items/{item}/likers?{query}` as a reader: a private 200's page.
    pub async fn likers_page(&self, item: &str, query: &str) -> Value {
        self.likers_page_as("reader", item, query).await
    }

    /// `user`'s liked items, newest first: one page of up to 100.
    pub async fn liked_items(&self, user: &str) -> Vec<Value> {
        let response = self
            .request("GET", "/v1/users/me/liked-items?limit=100", Some(user))
            .send()
            .await;
        response.assert_status(200);
        response.json()["items"]
            .as_array()
            .expect("a page of items")
            .clone()
    }

    /// The same as `reader`, who sees the list as their settings and blocks allow.
    pub async fn likers_page_as(&self, reader: &str, item: &str, query: &str) -> Value {
        let response = self
            .request(
                "GET",
                &format!("/v1/items/{item}/likers?{query}"),
                Some(reader),
            )
            .send()
            .await;
        response.assert_status(200);
        assert_eq!(response.header("cache-control"), Some("private, no-store"));
        response.json()
    }

    /// Every page of `item`'s likers at `limit` per page: (user_id, liked_at) in order.
    pub async fn all_likers(&self, item: &str, limit: usize) -> Vec<(String, String)> {
        self.all_likers_as("reader", item, limit).await
    }

    /// The same as `reader`. Every page but the last is full, and the last is empty only
    /// when the whole list is.
    pub async fn all_likers_as(
        &self,
        reader: &str,
        item: &str,
        limit: usize,
    ) -> Vec<(String, String)> {
        let mut listed = Vec::new();
        let mut query = format!("limit={limit}");
        loop {
            let page = self.likers_page_as(reader, item, &query).await;
            let items = page["items"].as_array().expect("items").clone();
            assert!(items.len() <= limit, "{page}");
            for liker in &items {
                listed.push((
                    liker["user_id"].as_str().expect("user_id").to_owned(),
                    liker["liked_at"].as_str().expect("liked_at").to_owned(),
                ));
            }
            match page["next_cursor"].as_str() {
                None => {
                    assert_eq!(page["next_cursor"], Value::Null);
                    assert!(
                        !items.is_empty() || listed.is_empty(),
                        "an empty last page after {} likers",
                        listed.len()
                    );
                    return listed;
                }
                Some(cursor) => {
                    assert_eq!(items.len(), limit, "only the last page is short");
                    query = format!("limit={limit}&cursor={cursor}");
                }
            }
        }
    }
}
