//! Reading API Gateway requests and writing JSON responses: the caller (from the JWT
//! authorizer's claims only), path parameters, headers and bodies, each validated once.

use lambda_http::http::header::{CONTENT_TYPE, IF_MATCH};
use lambda_http::http::response::Builder;
use lambda_http::http::HeaderMap;
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt, Response};
use likes_core::namespace::Namespace;
use likes_core::{IdempotencyKey, ItemId, UserId, ValidationError};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::ApiError;

pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";
/// The IETF rate limit fields (draft-ietf-httpapi-ratelimit-headers-09), on a refused write.
pub const RATELIMIT_POLICY: &str = "ratelimit-policy";
pub const RATELIMIT: &str = "ratelimit";
/// The cache policy of every answer that is not the same for all callers: the caller's own
/// reactions and lists, every write, every error. No cache, shared or private, keeps it.
pub const PRIVATE: &str = "private, no-store";

/// The caller: the `sub` claim that API Gateway's JWT authorizer validated and put in the
/// request context. Headers, path and body are never consulted.
pub fn user(request: &Request) -> Result<UserId, ApiError> {
    let sub = match request.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(context)) => context
            .authorizer
            .as_ref()
            .and_then(|authorizer| authorizer.jwt.as_ref())
            .and_then(|jwt| jwt.claims.get("sub"))
            .cloned(),
        _ => None,
    };
    let sub = sub.ok_or(ApiError::Unauthorized)?;
    UserId::parse(&sub).map_err(|_| ApiError::Unauthorized)
}

/// The caller with `scope`: a valid token whose `scope` claim (space-separated) holds it
/// (`likes/moderate`, `likes/admin`, `likes/items`). API Gateway refuses the others on the
/// route already (its `AuthorizationScopes`); this holds the handler to the same rule
/// wherever it is invoked.
pub fn scoped(request: &Request, scope: &'static str) -> Result<UserId, ApiError> {
    let user = user(request)?;
    let scopes = match request.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(context)) => context
            .authorizer
            .as_ref()
            .and_then(|authorizer| authorizer.jwt.as_ref())
            .and_then(|jwt| jwt.claims.get("scope"))
            .cloned(),
        _ => None,
    };
    let granted = scopes
        .as_deref()
        .unwrap_or_default()
        .split_whitespace()
        .any(|granted| granted == scope);
    if !granted {
        return Err(ApiError::Forbidden(scope));
    }
    Ok(user)
}

/// The caller as a moderator.
pub fn moderator(request: &Request) -> Result<UserId, ApiError> {
    scoped(request, likes_core::moderation::MODERATE_SCOPE)
}

/// The `{namespace}` path parameter.
pub fn namespace(request: &Request) -> Result<Namespace, ApiError> {
    let bad = |raw: &str| ValidationError::Namespace(raw.chars().take(64).collect());
    let decoded = path_parameter(request, "namespace", bad)?;
    Ok(Namespace::parse(&decoded)?)
}

/// The `{item_id}` path parameter. Clients may percent-encode `:`; the id is validated after
/// decoding, so `game%3A1` and `game:1` name the same item.
pub fn item_id(request: &Request) -> Result<ItemId, ApiError> {
    let bad = |raw: &str| ValidationError::ItemId(raw.chars().take(64).collect());
    let decoded = path_parameter(request, "item_id", bad)?;
    Ok(ItemId::parse(&decoded)?)
}

/// The `{user_id}` path parameter: a user (another than the caller, or a moderator's
/// subject), named by their token's `sub`, percent-decoded (a user id may hold any character but controls) and validated as
/// the caller's own id is.
pub fn user_id(request: &Request) -> Result<UserId, ApiError> {
    let bad = |raw: &str| ValidationError::UserIdParameter(raw.chars().take(64).collect());
    let decoded = path_parameter(request, "user_id", bad)?;
    Ok(UserId::parse(&decoded).map_err(|_| bad(&decoded))?)
}

/// Path parameter `name`, percent-decoded; `bad` is the error of one that is no UTF-8.
fn path_parameter(
    request: &Request,
    name: &str,
    bad: impl Fn(&str) -> ValidationError,
) -> Result<String, ValidationError> {
    let params = request.path_parameters();
    let raw = params.first(name).unwrap_or_default();
    percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .map(|decoded| decoded.into_owned())
        .map_err(|_| bad(raw))
}

/// The `Idempotency-Key` header; `required` on `PUT …/reaction`, optional elsewhere.
pub fn idempotency_key(
    request: &Request,
    required: bool,
) -> Result<Option<IdempotencyKey>, ApiError> {
    match request.headers().get(IDEMPOTENCY_KEY) {
        None if required => Err(ValidationError::MissingIdempotencyKey.into()),
        None => Ok(None),
        Some(value) => {
            let raw = value
                .to_str()
                .map_err(|_| ValidationError::IdempotencyKeyCharacters)?;
            Ok(Some(IdempotencyKey::parse(raw)?))
        }
    }
}

/// `If-Match: "<version>"` (one strong entity tag) or `*` (any version: no precondition).
pub fn if_match(headers: &HeaderMap) -> Result<Option<u64>, ApiError> {
    let Some(value) = headers.get(IF_MATCH) else {
        return Ok(None);
    };
    let raw = value.to_str().map_err(|_| ValidationError::IfMatch)?.trim();
    if raw == "*" {
        return Ok(None);
    }
    raw.strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
        .and_then(|digits| digits.parse().ok())
        .map(Some)
        .ok_or_else(|| ValidationError::IfMatch.into())
}

pub fn etag(version: u64) -> String {
    format!("\"{version}\"")
}

/// The JSON object body, at most `max_bytes`, with a JSON content type when one is given.
pub fn json_body<T: DeserializeOwned>(request: &Request, max_bytes: usize) -> Result<T, ApiError> {
    if let Some(content_type) = request.headers().get(CONTENT_TYPE) {
        let content_type = content_type.to_str().unwrap_or_default();
        let essence = content_type.split(';').next().unwrap_or_default().trim();
        let is_json = essence.eq_ignore_ascii_case("application/json")
            || essence.to_ascii_lowercase().ends_with("+json");
        if !is_json {
            return Err(ApiError::UnsupportedMediaType(content_type.to_owned()));
        }
    }
    let bytes: &[u8] = match request.body() {
        Body::Empty => b"",
        Body::Text(text) => text.as_bytes(),
        Body::Binary(bytes) => bytes,
        _ => b"",
    };
    if bytes.len() > max_bytes {
        return Err(ValidationError::BodyTooLarge(max_bytes).into());
    }
    if bytes.is_empty() {
        return Err(ValidationError::Body("a JSON body is required".into()).into());
    }
    // serde reads a struct from a JSON array too, field by field in order (`["LIKE"]` as
    // `{"state": "LIKE"}`). Every body of this API is an object: refuse anything else here.
    if bytes.trim_ascii_start().first() != Some(&b'{') {
        return Err(ValidationError::Body("the body must be a JSON object".into()).into());
    }
    serde_json::from_slice(bytes).map_err(|err| ValidationError::Body(err.to_string()).into())
}

/// A JSON response; `builder` carries the status and any other headers.
pub fn respond_json<T: Serialize>(builder: Builder, body: &T) -> Response<Body> {
    let text = serde_json::to_string(body).expect("response bodies serialize");
    builder
        .header(CONTENT_TYPE, "application/json")
        .body(Body::Text(text))
        .expect("response headers are valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct StateBody {
        state: String,
    }

    fn request(body: &str) -> Request {
        lambda_http::http::Request::builder()
            .header(CONTENT_TYPE, "application/json")
            .body(Body::Text(body.to_owned()))
            .expect("a valid request")
    }

    #[test]
    fn bodies_are_json_objects_only() {
        let body: StateBody = json_body(&request(" \n{\"state\": \"LIKE\"}"), 1024).unwrap();
        assert_eq!(body.state, "LIKE");
        for not_an_object in [
            r#"["LIKE"]"#,
            r#" ["LIKE"]"#,
            r#""LIKE""#,
            "1",
            "null",
            "  ",
        ] {
            match json_body::<StateBody>(&request(not_an_object), 1024) {
                Err(ApiError::Validation(ValidationError::Body(_))) => {}
                other => panic!("{not_an_object:?} gave {other:?}"),
            }
        }
    }
}
