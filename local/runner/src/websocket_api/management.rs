//! The stage's management API (`POST`/`GET`/`DELETE /{stage}/@connections/{id}`), as the
//! functions' SDK clients call it: 410 `GoneException` for a connection that is not open,
//! and throttling when a test asks for it.

use std::sync::atomic::Ordering;

use aws_lambda_events::http::HeaderValue;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use likes_core::clock::rfc3339;
use serde_json::json;

use super::{plain, Outbound, WebSocketApi, MAX_MESSAGE};
use crate::http_api::HttpResponse;

impl WebSocketApi {
    /// The management API, as the SDK's `PostToConnection`, `GetConnection` and
    /// `DeleteConnection` call it.
    pub(super) async fn manage(
        &self,
        request: hyper::Request<Incoming>,
        connection_id: &str,
    ) -> HttpResponse {
        let method = request.method().clone();
        let body = match Limited::new(request.into_body(), MAX_MESSAGE)
            .collect()
            .await
        {
            Ok(collected) => collected.to_bytes(),
            Err(_) => return error(413, "PayloadTooLargeException", "Message too long"),
        };
        let mut links = self.links.lock().expect("links lock");
        let Some(link) = links.get_mut(connection_id) else {
            return error(410, "GoneException", "The connection is not open");
        };
        match method {
            hyper::Method::POST
                if self
                    .throttle_posts
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok() =>
            {
                self.throttled_posts.fetch_add(1, Ordering::SeqCst);
                error(429, "LimitExceededException", "Too Many Requests")
            }
            hyper::Method::POST => {
                let text = String::from_utf8_lossy(&body).into_owned();
                if link.outbound.send(Outbound::Text(text)).is_err() {
                    return error(410, "GoneException", "The connection is not open");
                }
                plain_empty(200)
            }
            hyper::Method::GET => plain(
                200,
                json!({
                    "connectedAt": rfc3339(link.connected_at_ms),
                    "lastActiveAt": rfc3339(link.last_active_ms),
                    "identity": {"sourceIp": link.source_ip, "userAgent": link.user_agent},
                }),
            ),
            hyper::Method::DELETE => {
                let _ = link.outbound.send(Outbound::Close);
                plain_empty(204)
            }
            _ => error(404, "NotFoundException", "No such operation"),
        }
    }
}

fn plain_empty(status: u16) -> HttpResponse {
    hyper::Response::builder()
        .status(status)
        .body(Full::new(Bytes::new()))
        .expect("static response is valid")
}

/// A management API error as the SDK reads it: the code in `x-amzn-ErrorType`.
fn error(status: u16, code: &'static str, message: &str) -> HttpResponse {
    let mut response = plain(status, json!({ "message": message }));
    response
        .headers_mut()
        .insert("x-amzn-errortype", HeaderValue::from_static(code));
    response
}
