//! The bearer token check of `$connect`. A WebSocket API has no JWT authorizer, so the
//! connect handler does what the HTTP API's does: the token (query parameter `token`, or the
//! `Authorization` header) must be signed by one of the issuer's keys (its JWKS, given to the
//! function at deploy), carry the issuer and audience the API accepts, be within its validity
//! and name a user (`sub`).

use std::collections::HashSet;

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use likes_core::UserId;
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("no bearer token")]
    Missing,
    #[error("the token does not verify: {0}")]
    Invalid(String),
    #[error("the token's subject is not a usable user id")]
    Subject,
}

struct Key {
    kid: Option<String>,
    algorithm: Algorithm,
    decoding: DecodingKey,
}

/// Checks tokens against the issuer's keys.
#[derive(Clone)]
pub struct TokenVerifier {
    keys: std::sync::Arc<Vec<Key>>,
    issuer: String,
    audience: String,
}

impl std::fmt::Debug for TokenVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenVerifier")
            .field("keys", &self.keys.len())
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .finish()
    }
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
}

impl TokenVerifier {
    /// From a JWKS document; every key must name its algorithm (`alg`).
    pub fn from_jwks(jwks: &str, issuer: &str, audience: &str) -> Result<Self, String> {
        let set: JwkSet =
            serde_json::from_str(jwks).map_err(|err| format!("not a JWKS document: {err}"))?;
        let keys = set
            .keys
            .iter()
            .map(|jwk| {
                let algorithm = jwk
                    .common
                    .key_algorithm
                    .and_then(|alg| alg.to_string().parse::<Algorithm>().ok())
                    .ok_or("a JWKS key names no signing algorithm")?;
                let decoding = DecodingKey::from_jwk(jwk).map_err(|err| err.to_string())?;
                Ok(Key {
                    kid: jwk.common.key_id.clone(),
                    algorithm,
                    decoding,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        if keys.is_empty() {
            return Err("the JWKS document holds no keys".into());
        }
        Ok(Self {
            keys: std::sync::Arc::new(keys),
            issuer: issuer.to_owned(),
            audience: audience.to_owned(),
        })
    }

    /// The user a token names, if it verifies. `raw` is the token, with or without `Bearer `.
    pub fn verify(&self, raw: Option<&str>) -> Result<UserId, TokenError> {
        let raw = raw.map(str::trim).filter(|t| !t.is_empty());
        let raw = raw.ok_or(TokenError::Missing)?;
        let token = raw
            .strip_prefix("Bearer ")
            .or_else(|| raw.strip_prefix("bearer "))
            .unwrap_or(raw)
            .trim();
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| TokenError::Invalid(e.to_string()))?;
        let key = self
            .keys
            .iter()
            .find(|key| {
                key.algorithm == header.alg && (header.kid.is_none() || key.kid == header.kid)
            })
            .ok_or_else(|| {
                TokenError::Invalid("signed with a key the issuer does not list".into())
            })?;
        let mut validation = Validation::new(key.algorithm);
        validation.leeway = 0;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        // `iss` and `aud` must be there, as API Gateway's JWT authorizer requires them: the
        // checks above only compare a claim that is present.
        validation.required_spec_claims = ["exp", "sub", "iss", "aud"]
            .into_iter()
            .map(str::to_owned)
            .collect::<HashSet<_>>();
        let claims = jsonwebtoken::decode::<Claims>(token, &key.decoding, &validation)
            .map_err(|e| TokenError::Invalid(e.to_string()))?
            .claims;
        UserId::parse(&claims.sub).map_err(|_| TokenError::Subject)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header};

    const JWKS: &str =
        r#"{"keys":[{"kty":"oct","kid":"k1","alg":"HS256","k":"c2VjcmV0LWtleS1mb3ItdGVzdHM"}]}"#;

    fn token(secret: &[u8], claims: serde_json::Value) -> String {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some("k1".into());
        jsonwebtoken::encode(&header, &claims, &EncodingKey::from_secret(secret)).unwrap()
    }

    fn claims(exp_from_now: i64) -> serde_json::Value {
        let now = likes_core::clock::now_ms() / 1000;
        serde_json::json!({"sub": "alice", "iss": "https://issuer", "aud": "likes",
            "exp": now + exp_from_now})
    }

    #[test]
    fn a_token_signed_by_a_listed_key_names_its_user() {
        let verifier = TokenVerifier::from_jwks(JWKS, "https://issuer", "likes").unwrap();
        let good = token(b"secret-key-for-tests", claims(60));
        assert_eq!(
            verifier
                .verify(Some(&format!("Bearer {good}")))
                .unwrap()
                .as_str(),
            "alice"
        );
        assert_eq!(verifier.verify(Some(&good)).unwrap().as_str(), "alice");
    }

    #[test]
    fn bad_tokens_are_refused() {
        let verifier = TokenVerifier::from_jwks(JWKS, "https://issuer", "likes").unwrap();
        assert_eq!(verifier.verify(None), Err(TokenError::Missing));
        assert_eq!(verifier.verify(Some(" ")), Err(TokenError::Missing));
        let other_key = token(b"another-secret", claims(60));
        let expired = token(b"secret-key-for-tests", claims(-5));
        let mut wrong_audience = claims(60);
        wrong_audience["aud"] = "other".into();
        let wrong_audience = token(b"secret-key-for-tests", wrong_audience);
        // API Gateway's JWT authorizer requires both claims; a token without one is refused
        // here too, not taken for one with the right value.
        let without = |claim: &str| {
            let mut claims = claims(60);
            claims.as_object_mut().unwrap().remove(claim);
            token(b"secret-key-for-tests", claims)
        };
        let (no_issuer, no_audience) = (without("iss"), without("aud"));
        for bad in [
            "x.y.z",
            &other_key,
            &expired,
            &wrong_audience,
            &no_issuer,
            &no_audience,
        ] {
            assert!(
                matches!(verifier.verify(Some(bad)), Err(TokenError::Invalid(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_jwks_without_usable_keys_is_refused() {
        assert!(TokenVerifier::from_jwks(r#"{"keys":[]}"#, "i", "a").is_err());
        assert!(TokenVerifier::from_jwks("nope", "i", "a").is_err());
    }
}
