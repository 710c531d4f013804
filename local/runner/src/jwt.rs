//! The local token issuer and the local stand-in for API Gateway's JWT authorizer. The
//! issuer signs ES256 tokens with keys derived from `LIKES_LOCAL_JWT_SECRET` (default
//! `local-dev-secret`), so every process of the local stack (the stack, `likes-local token`)
//! signs with the same keys, and publishes them as a JWKS document (the web origin serves it,
//! as an issuer serves its `jwks_uri`), which the live API's `$connect` fetches as it fetches
//! the real issuer's in AWS. Keys rotate: each rotation signs with the next generation's key
//! and lists it beside the one before, so tokens already issued stay valid until the next
//! rotation withdraws their key. The authorizer checks tokens as API Gateway's does: signed
//! by a listed key, `sub` and `exp` present, `iss` the template's `JwtIssuer`, `aud` its
//! `JwtAudience`; the handlers see the same claims.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use aws_lc_rs::agreement::{PrivateKey, ECDH_P256};
use aws_lc_rs::hmac;
use aws_lc_rs::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
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
/// Where the local issuer's keys are, as the template's `JwtJwksUri` names them; the local
/// stack points it at the web origin, which serves them.
pub const LOCAL_JWKS_PATH: &str = "/.well-known/jwks.json";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    #[error("no bearer token")]
    Missing,
    #[error("the token is not a well-formed JWT")]
    Malformed,
    #[error("the token is not signed with ES256")]
    Algorithm,
    #[error("the token is signed with a key the issuer does not list")]
    UnknownKey,
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

/// One generation's P-256 key: its private scalar is HMAC-SHA256 of the secret over the
/// generation's label, so it is the same in every process given the same secret.
struct SigningKey {
    kid: String,
    encoding: EncodingKey,
    decoding: DecodingKey,
    jwk: Value,
}

impl SigningKey {
    fn derive(secret: &[u8], generation: u32) -> Self {
        let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
        // A scalar past the curve's order (about one in 2^32) is skipped for the next.
        let (scalar, private) = (0u32..)
            .find_map(|attempt| {
                let label = format!("likes local issuer key {generation}.{attempt}");
                let scalar = hmac::sign(&key, label.as_bytes());
                let private = PrivateKey::from_private_key(&ECDH_P256, scalar.as_ref()).ok()?;
                Some((scalar, private))
            })
            .expect("some scalar is on the curve");
        let public = private
            .compute_public_key()
            .expect("a valid private key has a public key");
        let pair = EcdsaKeyPair::from_private_key_and_public_key(
            &ECDSA_P256_SHA256_FIXED_SIGNING,
            scalar.as_ref(),
            public.as_ref(),
        )
        .expect("the pair was derived together");
        let pkcs8 = pair.to_pkcs8v1().expect("a P-256 key serializes");
        // The uncompressed point: 0x04, then x and y.
        let (x, y) = public.as_ref()[1..].split_at(32);
        let (x, y) = (URL_SAFE_NO_PAD.encode(x), URL_SAFE_NO_PAD.encode(y));
        let kid = format!("local-{generation}");
        Self {
            encoding: EncodingKey::from_ec_der(pkcs8.as_ref()),
            decoding: DecodingKey::from_ec_components(&x, &y).expect("a point's coordinates"),
            jwk: serde_json::json!({"kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig",
                "kid": kid, "x": x, "y": y}),
            kid,
        }
    }
}

/// The local issuer's keys and the authorizer's check. Clones share the keys: a rotation
/// through one is seen by all (the HTTP front, the web origin, a test).
#[derive(Clone)]
pub struct JwtAuthorizer {
    secret: Arc<Vec<u8>>,
    /// Every generation so far, oldest first: the last signs, the last two are listed.
    keys: Arc<RwLock<Vec<Arc<SigningKey>>>>,
    /// The `iss` a token must name, and the `aud` it must hold.
    issuer: String,
    audience: String,
}

/// How many generations the issuer lists: the signing one and the one before it.
const LISTED: usize = 2;

impl JwtAuthorizer {
    pub fn new(secret: impl AsRef<[u8]>) -> Self {
        Self {
            keys: Arc::new(RwLock::new(vec![Arc::new(SigningKey::derive(
                secret.as_ref(),
                1,
            ))])),
            secret: Arc::new(secret.as_ref().to_vec()),
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

    fn signing(&self) -> Arc<SigningKey> {
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
        keys.last().expect("one key at least").clone()
    }

    fn listed(&self) -> Vec<Arc<SigningKey>> {
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
        keys[keys.len().saturating_sub(LISTED)..].to_vec()
    }

    /// Signs with the next generation's key from now on, listing it beside the one before;
    /// the key before that is withdrawn. Answers the new key's id.
    pub fn rotate(&self) -> String {
        let mut keys = self.keys.write().unwrap_or_else(|e| e.into_inner());
        let next = SigningKey::derive(&self.secret, keys.len() as u32 + 1);
        let kid = next.kid.clone();
        keys.push(Arc::new(next));
        kid
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

    /// A token of exactly `claims`, signed with the issuer's current key (a test's token of
    /// another issuer or audience).
    pub fn sign(&self, claims: &Value) -> String {
        let key = self.signing();
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(key.kid.clone());
        jsonwebtoken::encode(&header, claims, &key.encoding).expect("ES256 signs any claims")
    }

    /// The keys the issuer lists, as its JWKS document.
    pub fn jwks(&self) -> Value {
        let keys = self.listed();
        serde_json::json!({ "keys": keys.iter().map(|key| key.jwk.clone()).collect::<Vec<_>>() })
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
        let header = jsonwebtoken::decode_header(token).map_err(|_| {
            // An algorithm the library does not know at all (`none`) is still an algorithm
            // refused, not a malformed token.
            if names_another_algorithm(token) {
                JwtError::Algorithm
            } else {
                JwtError::Malformed
            }
        })?;
        if header.alg != Algorithm::ES256 {
            return Err(JwtError::Algorithm);
        }
        let key = self
            .listed()
            .into_iter()
            .find(|key| header.kid.as_deref() == Some(key.kid.as_str()))
            .ok_or(JwtError::UnknownKey)?;
        let mut validation = Validation::new(Algorithm::ES256);
        // The claims are checked against the caller's clock below, as API Gateway checks
        // them; the library verifies the signature and the algorithm only.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.required_spec_claims = HashSet::new();
        let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key.decoding, &validation)
            .map_err(|err| match err.kind() {
                ErrorKind::InvalidSignature => JwtError::Signature,
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

/// True when the token's header is JSON naming an `alg` other than ES256.
fn names_another_algorithm(token: &str) -> bool {
    let header = token.split('.').next().unwrap_or_default();
    URL_SAFE_NO_PAD
        .decode(header)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .and_then(|header| header.get("alg").and_then(Value::as_str).map(str::to_owned))
        .is_some_and(|alg| alg != "ES256")
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
    fn unsigned_and_symmetric_tokens_are_refused() {
        let auth = JwtAuthorizer::new("s3cret");
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
        let payload = URL_SAFE_NO_PAD.encode(format!(r#"{{"sub":"a","exp":{}}}"#, NOW + 60));
        let token = format!("{header}.{payload}.");
        assert_eq!(auth.authorize(Some(&token), NOW), Err(JwtError::Algorithm));
        let claims = serde_json::json!({ "sub": "a", "exp": NOW + 60 });
        let hs256 = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(b"s3cret"),
        )
        .unwrap();
        assert_eq!(auth.authorize(Some(&hs256), NOW), Err(JwtError::Algorithm));
    }

    #[test]
    fn keys_are_the_same_in_every_process_and_rotate() {
        let stack = JwtAuthorizer::new("s3cret");
        let cli = JwtAuthorizer::new("s3cret");
        assert_eq!(stack.jwks(), cli.jwks(), "derived from the secret alone");
        assert_ne!(stack.jwks(), JwtAuthorizer::new("other").jwks());
        let before = cli.mint("alice", NOW, 60);
        assert!(stack.authorize(Some(&before), NOW).is_ok());
        assert_eq!(stack.rotate(), "local-2");
        let kids = |auth: &JwtAuthorizer| {
            auth.jwks()["keys"]
                .as_array()
                .unwrap()
                .iter()
                .map(|key| key["kid"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(kids(&stack), ["local-1", "local-2"]);
        let after = stack.mint("alice", NOW, 60);
        assert!(stack.authorize(Some(&before), NOW).is_ok(), "still listed");
        assert!(stack.authorize(Some(&after), NOW).is_ok());
        assert_eq!(
            cli.authorize(Some(&after), NOW),
            Err(JwtError::UnknownKey),
            "another process lists the new key only once it rotates too"
        );
        stack.rotate();
        assert_eq!(kids(&stack), ["local-2", "local-3"]);
        assert_eq!(
            stack.authorize(Some(&before), NOW),
            Err(JwtError::UnknownKey),
            "withdrawn"
        );
        assert!(stack.authorize(Some(&after), NOW).is_ok());
    }
}
