//! The HTTP API, locally (the local front): what API Gateway's HTTP API does in AWS. It routes
//! exactly the template's `HttpApi` events, runs the JWT authorizer on the routes that have one
//! (a route with `Authorizer: NONE` is public), builds the v2 payload with the claims in the
//! authorizer context, and invokes the function built from the registry with that event's
//! JSON, the code path a deployed bootstrap runs. With the API's `CorsConfiguration`, it answers
//! preflights and sets CORS headers as API Gateway does ([`crate::cors`]); and it throttles
//! each route as its `RouteSettings` (else `DefaultRouteSettings`) say, answering 429.

use likes_core::clock::now_ms;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use likes_functions::Invoke;
use serde_json::{json, Map, Value};
use tokio::net::TcpListener;

use crate::cors::Cors;
use crate::jwt::JwtAuthorizer;
use crate::template::HttpRoute;
use crate::throttle::RouteThrottles;

mod event;

use event::invoke;
pub use event::GatewayRequest;

/// API Gateway HTTP APIs refuse payloads over 10 MB before any function runs.
const MAX_PAYLOAD: usize = 10 * 1024 * 1024;

/// One route of the HTTP API and the function behind it.
pub struct RouteTarget {
    pub route: HttpRoute,
    pub function: Box<dyn Invoke>,
}

pub struct HttpApi {
    routes: Vec<RouteTarget>,
    authorizer: JwtAuthorizer,
    cors: Option<Cors>,
    /// The routes' throttles (by route key, `METHOD /path`).
    throttles: RouteThrottles,
}

pub(crate) type HttpResponse = hyper::Response<Full<Bytes>>;

impl HttpApi {
    pub fn new(routes: Vec<RouteTarget>, authorizer: JwtAuthorizer, cors: Option<Cors>) -> Self {
        Self {
            routes,
            authorizer,
            cors,
            throttles: RouteThrottles::default(),
        }
    }

    /// Serves until the task is dropped or aborted.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        serve_http(listener, move |request, peer| {
            let front = self.clone();
            async move { front.handle(request, peer).await }
        })
        .await;
    }

    async fn handle(&self, request: hyper::Request<Incoming>, peer: SocketAddr) -> HttpResponse {
        let Some(cors) = &self.cors else {
            return self.route_and_invoke(request, peer).await;
        };
        if Cors::is_preflight(request.method(), request.headers()) {
            let mut answer = hyper::Response::builder()
                .status(204)
                .body(Full::new(Bytes::new()))
                .expect("static response is valid");
            *answer.headers_mut() = cors.preflight(request.headers());
            return answer;
        }
        let origin = request.headers().get(hyper::header::ORIGIN).cloned();
        let mut answer = self.route_and_invoke(request, peer).await;
        cors.apply(origin.as_ref(), answer.headers_mut());
        answer
    }

    async fn route_and_invoke(
        &self,
        request: hyper::Request<Incoming>,
        peer: SocketAddr,
    ) -> HttpResponse {
        let (parts, body) = request.into_parts();
        let body = match Limited::new(body, MAX_PAYLOAD).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(_) => return gateway_message(413, "Request Entity Too Large"),
        };
        let Some((target, path_parameters)) = self.route(parts.method.as_str(), parts.uri.path())
        else {
            return gateway_message(404, "Not Found");
        };
        let route_key = format!("{} {}", target.route.method, target.route.path);
        if !self.throttles.admit(&route_key, target.route.throttle) {
            return gateway_message(429, "Too Many Requests");
        }
        // As API Gateway: a route without an authorizer passes whatever `Authorization` the
        // request has, unchecked, and its event carries no authorizer context.
        let claims = match &target.route.authorizer {
            None => None,
            Some(_) => {
                let authorization = parts
                    .headers
                    .get(hyper::header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok());
                match self.authorizer.authorize(authorization, now_ms() / 1000) {
                    Ok(claims) if !holds_a_scope(&claims, &target.route.scopes) => {
                        tracing::debug!(scopes = ?target.route.scopes, "the token holds none of the route's scopes");
                        return gateway_message(403, "Forbidden");
                    }
                    Ok(claims) => Some(claims),
                    Err(reason) => {
                        tracing::debug!(%reason, "authorizer refused the request");
                        let mut response = gateway_message(401, "Unauthorized");
                        response
                            .headers_mut()
                            .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                        return response;
                    }
                }
            }
        };
        let now_ms = now_ms();
        let event = GatewayRequest {
            method: parts.method.as_str(),
            route_path: &target.route.path,
            path: parts.uri.path(),
            raw_query: parts.uri.query().unwrap_or_default(),
            headers: parts
                .headers
                .iter()
                .map(|(name, value)| {
                    let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
                    (name.as_str().to_owned(), value)
                })
                .collect(),
            body: &body,
            path_parameters,
            claims,
            source_ip: peer.ip().to_string(),
            request_id: format!("local-{now_ms}-{}", peer.port()),
            now_ms,
        }
        .request();
        match invoke(target, &event).await {
            Ok(response) => response,
            Err(err) => {
                tracing::error!(function = %target.route.function, error = %err, "invocation failed");
                gateway_message(500, "Internal Server Error")
            }
        }
    }

    /// The route API Gateway would pick: among the matches, the one with most literal segments.
    fn route(&self, method: &str, path: &str) -> Option<(&RouteTarget, Map<String, Value>)> {
        self.routes
            .iter()
            .filter(|t| t.route.method == method)
            .filter_map(|t| match_path(&t.route.path, path).map(|params| (t, params)))
            .max_by_key(|(t, _)| {
                t.route
                    .path
                    .split('/')
                    .filter(|s| !s.starts_with('{'))
                    .count()
            })
    }
}

/// Accepts HTTP/1.1 connections on `listener` and answers each request with `handle`, until
/// the task is dropped or aborted. A connection may be upgraded (the WebSocket front's).
pub(crate) async fn serve_http<F, Fut>(listener: TcpListener, handle: F)
where
    F: Fn(hyper::Request<Incoming>, SocketAddr) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = HttpResponse> + Send + 'static,
{
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            continue;
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let answer = handle(request, peer);
                async move { Ok::<_, Infallible>(answer.await) }
            });
            let connection = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            if let Err(err) = connection.await {
                tracing::debug!(error = %err, "connection closed with an error");
            }
        });
    }
}

/// API Gateway's rule for a route with `AuthorizationScopes`: the token's `scope` claim
/// (space-separated) must hold at least one of them. A route without scopes takes any
/// valid token.
fn holds_a_scope(claims: &std::collections::HashMap<String, String>, scopes: &[String]) -> bool {
    if scopes.is_empty() {
        return true;
    }
    let held = claims.get("scope").map(String::as_str).unwrap_or_default();
    held.split_whitespace()
        .any(|scope| scopes.iter().any(|wanted| wanted == scope))
}

/// Matches `/v1/items/{item_id}/like` against a request path; returns the path parameters.
fn match_path(pattern: &str, path: &str) -> Option<Map<String, Value>> {
    let pattern: Vec<&str> = pattern.split('/').collect();
    let segments: Vec<&str> = path.split('/').collect();
    if pattern.len() != segments.len() {
        return None;
    }
    let mut params = Map::new();
    for (want, got) in pattern.iter().zip(&segments) {
        match want.strip_prefix('{').and_then(|w| w.strip_suffix('}')) {
            Some(name) if !got.is_empty() => {
                params.insert(name.to_owned(), Value::String((*got).to_owned()));
            }
            Some(_) => return None,
            None if want == got => {}
            None => return None,
        }
    }
    Some(params)
}

/// API Gateway's own answers (no route, authorizer refusal) carry `{"message": …}`.
pub(crate) fn gateway_message(status: u16, message: &str) -> HttpResponse {
    hyper::Response::builder()
        .status(status)
        .header(CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(
            json!({ "message": message }).to_string(),
        )))
        .expect("static response is valid")
}

pub(crate) fn form_decode(raw: &str) -> String {
    percent_encoding::percent_decode_str(&raw.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_match_segment_by_segment() {
        let params = match_path("/v1/items/{item_id}/like", "/v1/items/game:1/like").unwrap();
        assert_eq!(params["item_id"], "game:1");
        assert!(match_path("/v1/items/{item_id}/like", "/v1/items//like").is_none());
        assert!(match_path("/v1/items/{item_id}/like", "/v1/items/a/b/like").is_none());
        assert!(match_path("/v1/items:batchGet", "/v1/items:batchGet").is_some());
        assert!(match_path("/v1/items:batchGet", "/v1/items").is_none());
    }

    #[test]
    fn a_scoped_route_takes_a_token_holding_one_of_its_scopes() {
        let claims = |scope: Option<&str>| {
            let mut claims = std::collections::HashMap::from([("sub".to_owned(), "m".to_owned())]);
            if let Some(scope) = scope {
                claims.insert("scope".to_owned(), scope.to_owned());
            }
            claims
        };
        let moderate = ["likes/moderate".to_owned()];
        assert!(holds_a_scope(&claims(None), &[]));
        assert!(holds_a_scope(
            &claims(Some("openid likes/moderate")),
            &moderate
        ));
        assert!(!holds_a_scope(
            &claims(Some("openid likes/moderated")),
            &moderate
        ));
        assert!(!holds_a_scope(&claims(Some("")), &moderate));
        assert!(!holds_a_scope(&claims(None), &moderate));
    }

    #[test]
    fn query_values_are_form_decoded() {
        assert_eq!(form_decode("a%3Ab+c"), "a:b c");
    }
}
