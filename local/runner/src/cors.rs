//! CORS as API Gateway's HTTP API does it, from the API's `CorsConfiguration` in the
//! template. With CORS configured, API Gateway answers every preflight itself (an `OPTIONS`
//! request with `Origin` and `Access-Control-Request-Method`, whether or not a route
//! matches, before any authorizer), and adds the configured headers to every other answer to
//! a request from an allowed origin, its own `401` and `404` included. It ignores any CORS
//! header a function returns. A request without `Origin`, or from an origin not allowed,
//! gets no CORS header at all: the browser then refuses to hand the answer to the page.

use hyper::header::{
    HeaderMap, HeaderName, HeaderValue, ACCESS_CONTROL_ALLOW_CREDENTIALS,
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, ACCESS_CONTROL_REQUEST_HEADERS,
    ACCESS_CONTROL_REQUEST_METHOD, ORIGIN,
};
use hyper::Method;

/// An HTTP API's `CorsConfiguration` (`x-amazon-apigateway-cors`), values resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cors {
    pub allow_origins: Vec<String>,
    pub allow_methods: Vec<String>,
    pub allow_headers: Vec<String>,
    pub expose_headers: Vec<String>,
    pub max_age: Option<u32>,
    pub allow_credentials: bool,
}

impl Cors {
    /// Whether `headers` make the request a preflight API Gateway answers itself.
    pub fn is_preflight(method: &Method, headers: &HeaderMap) -> bool {
        method == Method::OPTIONS
            && headers.contains_key(ORIGIN)
            && headers.contains_key(ACCESS_CONTROL_REQUEST_METHOD)
    }

    /// The headers of the answer to a preflight (status 204, no body): none for an origin
    /// not allowed. `*` in a list allows anything (the requested method or headers are
    /// echoed back, since a browser reads `*` literally when credentials are allowed).
    pub fn preflight(&self, request: &HeaderMap) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let Some(origin) = self.allowed_origin(request.get(ORIGIN)) else {
            return headers;
        };
        headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        let echoed = |list: &[String], asked: HeaderName| match list.iter().any(|v| v == "*") {
            true => request.get(asked).cloned(),
            false => joined(list),
        };
        if let Some(methods) = echoed(&self.allow_methods, ACCESS_CONTROL_REQUEST_METHOD) {
            headers.insert(ACCESS_CONTROL_ALLOW_METHODS, methods);
        }
        if let Some(allowed) = echoed(&self.allow_headers, ACCESS_CONTROL_REQUEST_HEADERS) {
            headers.insert(ACCESS_CONTROL_ALLOW_HEADERS, allowed);
        }
        if let Some(max_age) = self.max_age {
            headers.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from(max_age));
        }
        if self.allow_credentials {
            headers.insert(
                ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
        }
        headers
    }

    /// Replaces whatever CORS headers an answer has with the configured ones for a request
    /// from `origin`, its `Origin` header (none when it is not allowed).
    pub fn apply(&self, origin: Option<&HeaderValue>, answer: &mut HeaderMap) {
        let names: Vec<HeaderName> = answer
            .keys()
            .filter(|name| name.as_str().starts_with("access-control-"))
            .cloned()
            .collect();
        for name in names {
            answer.remove(name);
        }
        let Some(origin) = self.allowed_origin(origin) else {
            return;
        };
        answer.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        if let Some(exposed) = joined(&self.expose_headers) {
            answer.insert(ACCESS_CONTROL_EXPOSE_HEADERS, exposed);
        }
        if self.allow_credentials {
            answer.insert(
                ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
        }
    }

    /// The `Access-Control-Allow-Origin` for a request from `origin`: that origin when
    /// listed, `*` when any origin is (and no credentials are allowed).
    fn allowed_origin(&self, origin: Option<&HeaderValue>) -> Option<HeaderValue> {
        let origin = origin?;
        let text = origin.to_str().ok()?;
        if self.allow_origins.iter().any(|allowed| allowed == text) {
            return Some(origin.clone());
        }
        let any = self.allow_origins.iter().any(|allowed| allowed == "*");
        match (any, self.allow_credentials) {
            (false, _) => None,
            (true, false) => Some(HeaderValue::from_static("*")),
            (true, true) => Some(origin.clone()),
        }
    }
}

fn joined(list: &[String]) -> Option<HeaderValue> {
    if list.is_empty() {
        return None;
    }
    HeaderValue::from_str(&list.join(",")).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Cors {
        Cors {
            allow_origins: vec!["http://127.0.0.1:8080".into()],
            allow_methods: vec!["GET".into(), "PUT".into()],
            allow_headers: vec!["authorization".into(), "if-match".into()],
            expose_headers: vec!["etag".into(), "retry-after".into()],
            max_age: Some(600),
            allow_credentials: false,
        }
    }

    fn request(origin: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(ORIGIN, HeaderValue::from_str(origin).unwrap());
        headers.insert(
            ACCESS_CONTROL_REQUEST_METHOD,
            HeaderValue::from_static("PUT"),
        );
        headers
    }

    #[test]
    fn a_preflight_needs_options_origin_and_the_requested_method() {
        let asked = request("http://127.0.0.1:8080");
        assert!(Cors::is_preflight(&Method::OPTIONS, &asked));
        assert!(!Cors::is_preflight(&Method::PUT, &asked));
        let mut no_method = asked.clone();
        no_method.remove(ACCESS_CONTROL_REQUEST_METHOD);
        assert!(!Cors::is_preflight(&Method::OPTIONS, &no_method));
    }

    #[test]
    fn an_allowed_origin_is_echoed_with_the_configured_lists() {
        let answer = config().preflight(&request("http://127.0.0.1:8080"));
        assert_eq!(answer[ACCESS_CONTROL_ALLOW_ORIGIN], "http://127.0.0.1:8080");
        assert_eq!(answer[ACCESS_CONTROL_ALLOW_METHODS], "GET,PUT");
        assert_eq!(
            answer[ACCESS_CONTROL_ALLOW_HEADERS],
            "authorization,if-match"
        );
        assert_eq!(answer[ACCESS_CONTROL_MAX_AGE], "600");
        assert!(!answer.contains_key(ACCESS_CONTROL_ALLOW_CREDENTIALS));
    }

    #[test]
    fn another_origin_gets_no_cors_header() {
        assert!(config()
            .preflight(&request("http://evil.example"))
            .is_empty());
        let mut answer = HeaderMap::new();
        answer.insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
        config().apply(request("http://evil.example").get(ORIGIN), &mut answer);
        assert!(
            answer.is_empty(),
            "the function's own CORS header is dropped"
        );
    }

    #[test]
    fn an_answer_exposes_the_configured_headers() {
        let mut answer = HeaderMap::new();
        config().apply(request("http://127.0.0.1:8080").get(ORIGIN), &mut answer);
        assert_eq!(answer[ACCESS_CONTROL_ALLOW_ORIGIN], "http://127.0.0.1:8080");
        assert_eq!(answer[ACCESS_CONTROL_EXPOSE_HEADERS], "etag,retry-after");
    }

    #[test]
    fn a_wildcard_echoes_what_was_asked() {
        let cors = Cors {
            allow_origins: vec!["*".into()],
            allow_headers: vec!["*".into()],
            ..config()
        };
        let mut asked = request("http://a.example");
        asked.insert(
            ACCESS_CONTROL_REQUEST_HEADERS,
            HeaderValue::from_static("x-one"),
        );
        let answer = cors.preflight(&asked);
        assert_eq!(answer[ACCESS_CONTROL_ALLOW_ORIGIN], "*");
        assert_eq!(answer[ACCESS_CONTROL_ALLOW_HEADERS], "x-one");
    }
}
