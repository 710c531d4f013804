//! The local stand-in for API Gateway's JWT authorizer: HS256 tokens signed with
//! `LIKES_LOCAL_JWT_SECRET` (default `local-dev-secret`), `sub` and `exp` required.
//! In AWS the authorizer checks the issuer's keys instead; the handlers see the same claims.

use std::collections::HashMap;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

/// The documented local development default. Never used outside the local stack.
pub const DEFAULT_LOCAL_SECRET: &str = "local-dev-secret";

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
}

#[derive(Clone)]
pub struct JwtAuthorizer {
    secret: Vec<u8>,
}

impl JwtAuthorizer {
    pub fn new(secret: impl AsRef<[u8]>) -> Self {
        Self {
            secret: secret.as_ref().to_vec(),
        }
    }

    /// `LIKES_LOCAL_JWT_SECRET`, or the documented default.
    pub fn from_env() -> Self {
        Self::new(
            std::env::var("LIKES_LOCAL_JWT_SECRET").unwrap_or_else(|_| DEFAULT_LOCAL_SECRET.into()),
        )
    }

    fn mac(&self) -> Hmac<Sha256> {
        Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC accepts any key length")
    }

    /// A token for `sub`, valid for `ttl_seconds` from `now` (for tests and `likes-local token`).
    pub fn mint(&self, sub: &str, now: i64, ttl_seconds: i64) -> String {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let claims = serde_json::json!({ "sub": sub, "iat": now, "exp": now + ttl_seconds });
        let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
        let signing_input = format!("{header}.{payload}");
        let mut mac = self.mac();
        mac.update(signing_input.as_bytes());
        let signature = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        format!("{signing_input}.{signature}")
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
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(JwtError::Malformed);
        };
        let decode = |part: &str| -> Result<Value, JwtError> {
            let bytes = URL_SAFE_NO_PAD
                .decode(part)
                .map_err(|_| JwtError::Malformed)?;
            serde_json::from_slice(&bytes).map_err(|_| JwtError::Malformed)
        };
        if decode(header)?["alg"] != "HS256" {
            return Err(JwtError::Algorithm);
        }
        let signature = URL_SAFE_NO_PAD
            .decode(signature)
            .map_err(|_| JwtError::Malformed)?;
        let mut mac = self.mac();
        mac.update(format!("{header}.{payload}").as_bytes());
        mac.verify_slice(&signature)
            .map_err(|_| JwtError::Signature)?;
        let Value::Object(claims) = decode(payload)? else {
            return Err(JwtError::Malformed);
        };
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
    fn unsigned_tokens_are_refused() {
        let auth = JwtAuthorizer::new("s3cret");
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
        let payload = URL_SAFE_NO_PAD.encode(format!(r#"{{"sub":"a","exp":{}}}"#, NOW + 60));
        let token = format!("{header}.{payload}.");
        assert_eq!(auth.authorize(Some(&token), NOW), Err(JwtError::Algorithm));
    }
}
