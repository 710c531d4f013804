//! The reference web client's origin: the files in `web/` as a CDN would serve them, on an
//! origin of their own (`make run`: `http://127.0.0.1:8080`), so the page calls the HTTP and
//! WebSocket APIs across origins as a deployed page does. A few answers exist only here,
//! never in a deployed stack: `GET /config.json` (where the APIs are), and the local token
//! issuer in place of the platform's sign-in: `POST /local/token` (`{"user": "alice"}` →
//! `{"token": …}`, a development token the local fronts accept), `GET
//! /.well-known/jwks.json` (the issuer's keys, which the live API's `$connect` fetches) and
//! `POST /local/keys/rotate` (the issuer signs with a new key from now on; answers its id).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE};
use hyper::Method;
use serde_json::{json, Value};
use tokio::net::TcpListener;

use crate::http_api::{gateway_message, serve_http, HttpResponse};
use crate::jwt::{JwtAuthorizer, LOCAL_JWKS_PATH};

/// How long a development token lasts: a working day.
const TOKEN_TTL_SECONDS: i64 = 12 * 3600;

pub struct WebOrigin {
    root: PathBuf,
    config: Value,
    authorizer: JwtAuthorizer,
}

impl WebOrigin {
    /// Serves `root`'s files, telling the page the APIs are at `http_url` and `ws_url`.
    pub fn new(root: PathBuf, http_url: &str, ws_url: &str, issuer: JwtAuthorizer) -> Self {
        Self {
            root,
            config: json!({ "api": http_url, "live": ws_url, "sign_in": "/local/token" }),
            authorizer: issuer,
        }
    }

    /// Serves until the task is dropped or aborted.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        serve_http(listener, move |request, _peer: SocketAddr| {
            let origin = self.clone();
            async move { origin.handle(request).await }
        })
        .await;
    }

    async fn handle(&self, request: hyper::Request<Incoming>) -> HttpResponse {
        let (parts, body) = request.into_parts();
        match (&parts.method, parts.uri.path()) {
            (&Method::GET, "/config.json") => {
                answer(200, "application/json", self.config.to_string())
            }
            (&Method::POST, "/local/token") => {
                let Ok(body) = Limited::new(body, 4096).collect().await else {
                    return gateway_message(413, "Request Entity Too Large");
                };
                self.token(&body.to_bytes())
            }
            (&Method::GET, LOCAL_JWKS_PATH) => {
                answer(200, "application/json", self.authorizer.jwks().to_string())
            }
            (&Method::POST, "/local/keys/rotate") => {
                let kid = self.authorizer.rotate();
                tracing::info!(kid, "the local issuer signs with a new key");
                answer(200, "application/json", json!({ "kid": kid }).to_string())
            }
            (&Method::GET, path) => self.file(path).await,
            _ => gateway_message(405, "Method Not Allowed"),
        }
    }

    /// A development token for `{"user": …}`: 1–128 characters of `[A-Za-z0-9_.:@-]`.
    fn token(&self, body: &[u8]) -> HttpResponse {
        let user = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| v["user"].as_str().map(str::to_owned))
            .filter(|user| valid_user(user));
        let Some(user) = user else {
            return gateway_message(400, "user: 1-128 characters of A-Z a-z 0-9 _ . : @ -");
        };
        let now = likes_core::clock::now_ms() / 1000;
        let token = self.authorizer.mint(&user, now, TOKEN_TTL_SECONDS);
        answer(
            200,
            "application/json",
            json!({ "user": user, "token": token }).to_string(),
        )
    }

    async fn file(&self, path: &str) -> HttpResponse {
        let relative = match path.trim_start_matches('/') {
            "" => "index.html",
            other => other,
        };
        let Some(file) = inside(&self.root, relative) else {
            return gateway_message(404, "Not Found");
        };
        match tokio::fs::read(&file).await {
            Ok(bytes) => answer(200, content_type(&file), bytes),
            Err(_) => gateway_message(404, "Not Found"),
        }
    }
}

fn valid_user(user: &str) -> bool {
    (1..=128).contains(&user.len())
        && user
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.:@-".contains(&b))
}

/// `relative` under `root`, refusing anything that could leave it.
fn inside(root: &Path, relative: &str) -> Option<PathBuf> {
    let plain = relative
        .split('/')
        .all(|part| !part.is_empty() && part != ".." && part != "." && !part.contains('\\'));
    plain.then(|| root.join(relative))
}

fn content_type(file: &Path) -> &'static str {
    match file.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("json") => "application/json",
        Some("png") => "image/png",
        Some("svg") => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

fn answer(status: u16, content_type: &str, body: impl Into<Bytes>) -> HttpResponse {
    hyper::Response::builder()
        .status(status)
        .header(CONTENT_TYPE, content_type)
        // A development origin: every reload takes the files as they are now.
        .header(CACHE_CONTROL, "no-store")
        .body(Full::new(body.into()))
        .expect("static response is valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_stay_inside_the_root() {
        let root = Path::new("/srv/web");
        assert_eq!(inside(root, "app.js"), Some(root.join("app.js")));
        assert_eq!(inside(root, "css/a.css"), Some(root.join("css/a.css")));
        assert_eq!(inside(root, "../secret"), None);
        assert_eq!(inside(root, "a//b"), None);
        assert_eq!(inside(root, "a/./b"), None);
    }

    #[test]
    fn a_user_is_a_short_plain_name() {
        assert!(valid_user("alice"));
        assert!(valid_user("bob@example.com"));
        assert!(!valid_user(""));
        assert!(!valid_user("a b"));
        assert!(!valid_user(&"x".repeat(129)));
    }
}
