//! The local stand-in for API Gateway's JWT authorizer: HS256 tokens signed with
//! `LIKES_LOCAL_JWT_SECRET` (default `local-dev-secret`), `sub` and `exp` required, and, as
//! the authorizer checks them, `iss` the template's `JwtIssuer` and `aud` its `JwtAudience`.
//! In AWS the authorizer checks the issuer's keys instead; the handlers see the same claims.

use std::collections::{HashMap, HashSet};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde_json::{Map, Value};

/// The documented local development default. Never used outside the local stack.
pub const DEFAULT_LOCAL_SECRET: &str = "local-dev-secret";
/// The issuer and audience of local tokens: the local stack deploys the template with them
/// (`JwtIssuer`, `JwtAudience`), so the live API's `$connect` checks them as in AWS.
pub const LOCAL_ISSUER: &str = "https://likes.local";
pub const LOCAL_AUDIENCE: &str = "likes-local";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    #[error("no bearer token")]
    Missing,
    #[error("the token is not a well-formed JWT")]
    Malformed,
    #[error("the token is not signed with HS256")]
    Algorithm,
    #[error("the token's signature does not verify")]
    Signature,
    #[error("the token has expired or has no exp claim")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token has no sub claim")]
    NoSubject,
    #[error("the token's issuer is not the API's")]
    Issuer,
    #[error("the token's audience is not the API's")]
    Audience,
}

#[derive(Clone)]
pub struct JwtAuthorizer {
    secret: Vec<u8>,
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    /// The `iss` a token must name, and the `aud` it must hold.
    issuer: String,
    audience: String,
}

impl JwtAuthorizer {
    pub fn new(secret: impl AsRef<[u8]>) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        // The claims are checked against the caller's clock below, as API Gateway checks
        // them; the library verifies the signature and the algorithm only.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.required_spec_claims = HashSet::new();
        Self {
            secret: secret.as_ref().to_vec(),
            encoding: EncodingKey::from_secret(secret.as_ref()),
            decoding: DecodingKey::from_secret(secret.as_ref()),
            validation,
            issuer: LOCAL_ISSUER.to_owned(),
            audience: LOCAL_AUDIENCE.to_owned(),
        }
    }

    /// The same, accepting tokens of `issuer` for `audience` (the API's, as the template's
    /// authorizer names them) instead of the local ones.
    pub fn expecting(mut self, issuer: impl Into<String>, audience: impl Into<String>) -> Self {
        self.issuer = issuer.into();
        self.audience = audience.into();
        self
    }

    /// `LIKES_LOCAL_JWT_SECRET`, or the documented default.
    pub fn from_env() -> Self {
        Self::new(
            std::env::var("LIKES_LOCAL_JWT_SECRET").unwrap_or_else(|_| DEFAULT_LOCAL_SECRET.into()),
        )
    }

    /// A token for `sub`, valid for `ttl_seconds` from `now` (for tests and `likes-local token`).
    pub fn mint(&self, sub: &str, now: i64, ttl_seconds: i64) -> String {
        self.mint_scoped(sub, None, now, ttl_seconds)
    }

    /// The same with a `scope` claim (space-separated scopes, as an issuer puts them).
    pub fn mint_scoped(
        &self,
        sub: &str,
        scope: Option<&str>,
        now: i64,
        ttl_seconds: i64,
    ) -> String {
        let mut claims = serde_json::json!({
            "sub": sub,
            "iss": LOCAL_ISSUER,
            "aud": LOCAL_AUDIENCE,
            "iat": now,
            "exp": now + ttl_seconds,
        });
        if let Some(scope) = scope {
            claims["scope"] = Value::String(scope.to_owned());
        }
        self.sign(&claims)
    }

    /// A token of exactly `claims`, signed with the local key (a test's token of another
    /// issuer or audience).
    pub fn sign(&self, claims: &Value) -> String {
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &self.encoding)
            .expect("HS256 signs any claims")
    }

    /// The signing key as an issuer publishes its keys (a JWKS document, here one symmetric
    /// HS256 key): what the local stack deploys the template's `JwtJwks` with.
    pub fn jwks(&self) -> String {
        serde_json::json!({"keys": [{
            "kty": "oct",
            "alg": "HS256",
            "kid": "local",
            "k": URL_SAFE_NO_PAD.encode(&self.secret),
        }]})
        .to_string()
    }

    /// Checks an `Authorization` header value and returns the claims as API Gateway passes
    /// them to the function: every value a string.
    pub fn authorize(
        &self,
        authorization: Option<&str>,
        now: i64,
    ) -> Result<HashMap<String, String>, JwtError> {
        let raw = authorization.ok_or(JwtError::Missing)?.trim();
        let token = raw
            .strip_prefix("Bearer ")
            .or_else(|| raw.strip_prefix("bearer "))
            .unwrap_or(raw)
            .trim();
        let claims =
            jsonwebtoken::decode::<Map<String, Value>>(token, &self.decoding, &self.validation)
                .map_err(|err| match err.kind() {
                    ErrorKind::InvalidSignature => JwtError::Signature,
                    ErrorKind::InvalidAlgorithm => JwtError::Algorithm,
                    // An algorithm the library does not know at all (`none`) is still an
                    // algorithm refused, not a malformed token.
                    _ if names_another_algorithm(token) => JwtError::Algorithm,
                    _ => JwtError::Malformed,
                })?
                .claims;
        match claims.get("exp").and_then(Value::as_i64) {
            Some(exp) if exp > now => {}
            _ => return Err(JwtError::Expired),
        }
        if claims
            .get("nbf")
            .and_then(Value::as_i64)
            .is_some_and(|nbf| nbf > now)
        {
            return Err(JwtError::NotYetValid);
        }
        if claims.get("iss").and_then(Value::as_str) != Some(self.issuer.as_str()) {
            return Err(JwtError::Issuer);
        }
        // `aud` is one audience or a list of them; API Gateway also takes `client_id`.
        let audiences = match (claims.get("aud"), claims.get("client_id")) {
            (Some(Value::Array(list)), _) => list.iter().filter_map(Value::as_str).collect(),
            (Some(Value::String(one)), _) | (None, Some(Value::String(one))) => vec![one.as_str()],
            _ => Vec::new(),
        };
        if !audiences.contains(&self.audience.as_str()) {
            return Err(JwtError::Audience);
        }
        match claims.get("sub") {
            Some(Value::String(sub)) if !sub.is_empty() => {}
            _ => return Err(JwtError::NoSubject),
        }
        Ok(claims
            .into_iter()
            .map(|(name, value)| {
                let text = match value {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                (name, text)
            })
            .collect())
    }
}

/// True when the token's header is JSON naming an `alg` other than HS256.
fn names_another_algorithm(token: &str) -> bool {
    let header = token.split('.').next().unwrap_or_default();
    URL_SAFE_NO_PAD
        .decode(header)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .and_then(|header| header.get("alg").and_then(Value::as_str).map(str::to_owned))
        .is_some_and(|alg| alg != "HS256")
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000;

    #[test]
    fn a_minted_token_authorizes_with_its_claims() {
        let auth = JwtAuthorizer::new("s3cret");
        let token = auth.mint("alice", NOW, 60);
        let claims = auth
            .authorize(Some(&format!("Bearer {token}")), NOW)
            .unwrap();
        assert_eq!(claims["sub"], "alice");
        assert_eq!(claims["exp"], (NOW + 60).to_string());
    }

    #[test]
    fn bad_tokens_are_refused_with_their_reason() {
        let auth = JwtAuthorizer::new("s3cret");
        let token = auth.mint("alice", NOW, 60);
        assert_eq!(auth.authorize(None, NOW), Err(JwtError::Missing));
        assert_eq!(
            auth.authorize(Some("Bearer x.y"), NOW),
            Err(JwtError::Malformed)
        );
        assert_eq!(
            JwtAuthorizer::new("other").authorize(Some(&token), NOW),
            Err(JwtError::Signature)
        );
        assert_eq!(
            auth.authorize(Some(&token), NOW + 60),
            Err(JwtError::Expired)
        );
        let no_sub = auth.mint("", NOW, 60);
        assert_eq!(auth.authorize(Some(&no_sub), NOW), Err(JwtError::NoSubject));
        let mut tampered = token.clone().into_bytes();
        let at = token.find('.').unwrap() + 2;
        tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).unwrap();
        assert!(auth.authorize(Some(&tampered), NOW).is_err());
    }

    #[test]
    fn a_token_of_another_issuer_or_audience_is_refused() {
        let auth = JwtAuthorizer::new("s3cret");
        let token = |iss: &str, aud: Value| {
            let claims = serde_json::json!({"sub": "a", "exp": NOW + 60, "iss": iss, "aud": aud});
            format!("Bearer {}", auth.sign(&claims))
        };
        let theirs = token("https://other.example", LOCAL_AUDIENCE.into());
        assert_eq!(auth.authorize(Some(&theirs), NOW), Err(JwtError::Issuer));
        let other_app = token(LOCAL_ISSUER, "another-app".into());
        assert_eq!(
            auth.authorize(Some(&other_app), NOW),
            Err(JwtError::Audience)
        );
        let listed = token(
            LOCAL_ISSUER,
            serde_json::json!(["another-app", LOCAL_AUDIENCE]),
        );
        assert!(auth.authorize(Some(&listed), NOW).is_ok());
        let deployed = JwtAuthorizer::new("s3cret").expecting("https://issuer.example", "app");
        assert_eq!(
            deployed.authorize(Some(&format!("Bearer {}", auth.mint("a", NOW, 60))), NOW),
            Err(JwtError::Issuer),
            "a local token is not the deployed issuer's"
        );
        let theirs = token("https://issuer.example", "app".into());
        assert!(deployed.authorize(Some(&theirs), NOW).is_ok());
    }

    #[test]
    fn unsigned_tokens_are_refused() {
        let auth = JwtAuthorizer::new("s3cret");
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
        let payload = URL_SAFE_NO_PAD.encode(format!(r#"{{"sub":"a","exp":{}}}"#, NOW + 60));
        let token = format!("{header}.{payload}.");
        assert_eq!(auth.authorize(Some(&token), NOW), Err(JwtError::Algorithm));
        let claims = serde_json::json!({ "sub": "a", "exp": NOW + 60 });
        let hs512 = jsonwebtoken::encode(
            &Header::new(Algorithm::HS512),
            &claims,
            &EncodingKey::from_secret(b"s3cret"),
        )
        .unwrap();
        assert_eq!(auth.authorize(Some(&hs512), NOW), Err(JwtError::Algorithm));
    }
}
