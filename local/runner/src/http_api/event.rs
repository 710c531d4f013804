//! What a route's function receives and answers: API Gateway's payload format 2.0 event,
//! built from the request the authorizer let through, and the invocation as the Lambda
//! runtime makes it, its v2 response turned back into HTTP.

use std::collections::HashMap;

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
use http_body_util::Full;
use hyper::header::HeaderValue;
use lambda_runtime::Context;
use serde_json::{Map, Value};

use super::{form_decode, HttpResponse, RouteTarget};
use crate::lambda::InvokeError;

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
pub(super) enum RouteError {
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
pub(super) async fn invoke(
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
