//! The HTTP API, locally (the local front): what API Gateway's HTTP API does in AWS. It routes
//! exactly the template's `HttpApi` events, runs the JWT authorizer on the routes that have one
//! (a route with `Authorizer: NONE` is public), builds the v2 payload with the claims in the
//! authorizer context, and invokes the function built from the registry with that event's
//! JSON, the code path a deployed bootstrap runs. With the API's `CorsConfiguration`, it answers
//! preflights and sets CORS headers as API Gateway does ([`crate::cors`]).

use likes_core::clock::now_ms;
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use aws_lambda_events::apigw::{
    ApiGatewayRequestAuthorizer, ApiGatewayRequestAuthorizerJwtDescription,
    ApiGatewayV2httpRequest, ApiGatewayV2httpRequestContext,
    ApiGatewayV2httpRequestContextHttpDescription, ApiGatewayV2httpResponse,
};
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::header::HeaderName;
use aws_lambda_events::http::{HeaderMap, Method};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use lambda_runtime::Context;
use likes_functions::Invoke;
use serde_json::{json, Map, Value};
use tokio::net::TcpListener;

use crate::cors::Cors;
use crate::jwt::JwtAuthorizer;
use crate::lambda::InvokeError;
use crate::template::HttpRoute;

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
}

pub(crate) type HttpResponse = hyper::Response<Full<Bytes>>;

impl HttpApi {
    pub fn new(routes: Vec<RouteTarget>, authorizer: JwtAuthorizer, cors: Option<Cors>) -> Self {
        Self {
            routes,
            authorizer,
            cors,
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

/// A request as API Gateway's HTTP API hands it to a function once the JWT authorizer let it
/// through. [`GatewayRequest::event`] builds the v2 (payload format 2.0) event; the front
/// fills it from the HTTP request, benchmarks from their own inputs.
#[derive(Debug, Clone)]
pub struct GatewayRequest<'a> {
    pub method: &'a str,
    /// The route's path as the template declares it, e.g. `/v1/items/{item_id}/like`.
    pub route_path: &'a str,
    pub path: &'a str,
    pub raw_query: &'a str,
    /// Lower-case names in arrival order; API Gateway joins repeats with commas.
    pub headers: Vec<(String, String)>,
    pub body: &'a [u8],
    pub path_parameters: Map<String, Value>,
    /// The validated token's claims, every value a string as API Gateway passes them;
    /// `None` on a route without an authorizer.
    pub claims: Option<HashMap<String, String>>,
    pub source_ip: String,
    pub request_id: String,
    pub now_ms: i64,
}

impl GatewayRequest<'_> {
    /// The v2 event as JSON, the bytes Lambda hands the function.
    pub fn event(&self) -> Value {
        serde_json::to_value(self.request()).expect("an API Gateway v2 event serializes")
    }

    /// The v2 event, typed.
    #[allow(deprecated)] // `http_method` is no v2 field; set right, since the type sends it
    pub fn request(&self) -> ApiGatewayV2httpRequest {
        let mut joined: Vec<(String, String)> = Vec::new();
        let mut cookies = Vec::new();
        for (name, value) in &self.headers {
            if name == "cookie" {
                cookies.extend(value.split(';').map(|c| c.trim().to_owned()));
                continue;
            }
            join_repeats(&mut joined, name.clone(), value.clone());
        }
        let header = |name: &str| {
            joined
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        let mut headers = HeaderMap::new();
        for (name, value) in &joined {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                headers.insert(name, value);
            }
        }
        let mut query = Vec::new();
        for pair in self.raw_query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            join_repeats(&mut query, form_decode(name), form_decode(value));
        }
        let method = Method::from_bytes(self.method.as_bytes()).unwrap_or_default();
        let route_key = format!("{} {}", self.method, self.route_path);

        let mut http = ApiGatewayV2httpRequestContextHttpDescription::default();
        http.method = method.clone();
        http.path = Some(self.path.to_owned());
        http.protocol = Some("HTTP/1.1".to_owned());
        http.source_ip = Some(self.source_ip.clone());
        http.user_agent = Some(header("user-agent").unwrap_or_default());
        let authorizer = self.claims.as_ref().map(|claims| {
            let mut jwt = ApiGatewayRequestAuthorizerJwtDescription::default();
            jwt.claims = claims.clone();
            let mut authorizer = ApiGatewayRequestAuthorizer::default();
            authorizer.jwt = Some(jwt);
            authorizer
        });
        let mut context = ApiGatewayV2httpRequestContext::default();
        context.account_id = Some("000000000000".to_owned());
        context.apiid = Some("local".to_owned());
        context.domain_name = Some(header("host").unwrap_or_else(|| "127.0.0.1".to_owned()));
        context.domain_prefix = Some("local".to_owned());
        context.http = http;
        context.request_id = Some(self.request_id.clone());
        context.route_key = Some(route_key.clone());
        context.stage = Some("$default".to_owned());
        context.time = Some(String::new());
        context.time_epoch = self.now_ms;
        context.authorizer = authorizer;

        let mut request = ApiGatewayV2httpRequest::default();
        request.version = Some("2.0".to_owned());
        request.http_method = method;
        request.route_key = Some(route_key);
        request.raw_path = Some(self.path.to_owned());
        request.raw_query_string = Some(self.raw_query.to_owned());
        request.headers = headers;
        request.cookies = (!cookies.is_empty()).then_some(cookies);
        request.query_string_parameters = query
            .into_iter()
            .map(|(name, value)| (name, vec![value]))
            .collect::<HashMap<_, _>>()
            .into();
        request.path_parameters = self
            .path_parameters
            .iter()
            .map(|(name, value)| {
                let text = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (name.clone(), text)
            })
            .collect();
        request.request_context = context;
        if !self.body.is_empty() {
            match std::str::from_utf8(self.body) {
                Ok(text) => request.body = Some(text.to_owned()),
                Err(_) => {
                    request.body = Some(STANDARD.encode(self.body));
                    request.is_base64_encoded = true;
                }
            }
        }
        request
    }
}

/// API Gateway passes repeated headers and query parameters as one value, comma joined.
fn join_repeats(pairs: &mut Vec<(String, String)>, name: String, value: String) {
    match pairs.iter_mut().find(|(n, _)| *n == name) {
        Some((_, joined)) => {
            joined.push(',');
            joined.push_str(&value);
        }
        None => pairs.push((name, value)),
    }
}

/// Why a route's invocation gave no HTTP response: API Gateway answers 500 for each.
#[derive(Debug, thiserror::Error)]
enum RouteError {
    #[error(transparent)]
    Invoke(#[from] InvokeError),
    #[error("status {0} is not an HTTP status")]
    Status(i64),
    #[error("the base64 body does not decode: {0}")]
    Base64(#[from] base64::DecodeError),
    /// A body kind newer than this crate: refused rather than sent wrong.
    #[error("the response body is of an unknown kind")]
    BodyKind,
    #[error("the response does not build: {0}")]
    Http(#[from] hyper::http::Error),
}

/// Invokes the function exactly as the Lambda runtime does (lambda_http reads the event),
/// then turns its v2 response back into HTTP.
async fn invoke(
    target: &RouteTarget,
    event: &ApiGatewayV2httpRequest,
) -> Result<HttpResponse, RouteError> {
    let response = crate::lambda::invoke(&*target.function, event, Context::default()).await?;
    v2_response(response)
}

fn v2_response(response: ApiGatewayV2httpResponse) -> Result<HttpResponse, RouteError> {
    let status = u16::try_from(response.status_code)
        .map_err(|_| RouteError::Status(response.status_code))?;
    let mut builder = hyper::Response::builder().status(status);
    for (name, value) in &response.headers {
        builder = builder.header(name, value);
    }
    for cookie in &response.cookies {
        builder = builder.header(hyper::header::SET_COOKIE, cookie);
    }
    let body = match response.body {
        None | Some(Body::Empty) => Bytes::new(),
        Some(Body::Text(text)) if response.is_base64_encoded => Bytes::from(STANDARD.decode(text)?),
        Some(Body::Text(text)) => Bytes::from(text),
        Some(Body::Binary(bytes)) => Bytes::from(bytes),
        Some(_) => return Err(RouteError::BodyKind),
    };
    Ok(builder.body(Full::new(body))?)
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
    fn query_values_are_form_decoded() {
        assert_eq!(form_decode("a%3Ab+c"), "a:b c");
    }
}
