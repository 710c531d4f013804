//! The bearer token check of `$connect`. A WebSocket API has no JWT authorizer, so the
//! connect handler does what the HTTP API's does: the token (query parameter `token`, or the
//! `Authorization` header) must be signed with an asymmetric algorithm by one of the keys the
//! issuer publishes (its JWKS, fetched at run time from `JWT_JWKS_URI` and kept for warm
//! invocations), carry the issuer and audience the API accepts, be within its validity and
//! name a user (`sub`). A token naming a key the function does not hold makes it fetch the
//! JWKS again (at most once a second), so a key the issuer rotates in is accepted at once and
//! one it withdraws stops being accepted within [`KEYS_MAX_AGE`], with no deploy.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use likes_aws::keys::FetchedKeys;
use likes_core::UserId;
use serde::Deserialize;
use tokio::time::Instant;

/// How long fetched keys serve before they are fetched again: a withdrawn key is refused
/// at most this long after the issuer stops listing it.
pub const KEYS_MAX_AGE: Duration = Duration::from_secs(600);
/// The least time between two fetches a token with an unknown key can cause.
const MISS_INTERVAL: Duration = Duration::from_secs(1);
/// A JWKS fetch that takes longer than this fails (the connect is answered 503).
const FETCH_TIMEOUT: Duration = Duration::from_secs(3);
/// The largest JWKS document read.
const JWKS_MAX_BYTES: usize = 64 * 1024;

/// The algorithms a token may be signed with: asymmetric only, as API Gateway's JWT
/// authorizer takes them. A symmetric key would be a shared secret in a public document.
const ALGORITHMS: [Algorithm; 5] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::ES256,
    Algorithm::ES384,
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("no bearer token")]
    Missing,
    #[error("the token does not verify: {0}")]
    Invalid(String),
    #[error("the token's subject is not a usable user id")]
    Subject,
    /// The issuer's keys could not be read: nothing can be checked, so nothing is let in.
    #[error("the issuer's keys are unavailable: {0}")]
    KeysUnavailable(String),
}

struct Key {
    kid: Option<String>,
    algorithm: Algorithm,
    decoding: DecodingKey,
}

/// The issuer's signing keys as last fetched.
struct KeySet(Vec<Key>);

impl KeySet {
    /// The keys of a JWKS document an asymmetric algorithm can use; a key of another kind
    /// or without its algorithm is left out (an issuer may publish encryption keys beside).
    fn parse(jwks: &[u8]) -> Result<Self, String> {
        let set: JwkSet =
            serde_json::from_slice(jwks).map_err(|err| format!("not a JWKS document: {err}"))?;
        let keys = set
            .keys
            .iter()
            .filter_map(|jwk| {
                let algorithm = jwk
                    .common
                    .key_algorithm
                    .and_then(|alg| alg.to_string().parse::<Algorithm>().ok())
                    .filter(|alg| ALGORITHMS.contains(alg))?;
                let decoding = DecodingKey::from_jwk(jwk).ok()?;
                Some(Key {
                    kid: jwk.common.key_id.clone(),
                    algorithm,
                    decoding,
                })
            })
            .collect::<Vec<_>>();
        if keys.is_empty() {
            return Err("the JWKS document holds no asymmetric signing key".into());
        }
        Ok(Self(keys))
    }

    fn find(&self, algorithm: Algorithm, kid: Option<&str>) -> Option<&Key> {
        self.0
            .iter()
            .find(|key| key.algorithm == algorithm && (kid.is_none() || key.kid.as_deref() == kid))
    }
}

/// Where the issuer's keys are read from.
struct Jwks {
    uri: http::Uri,
    client: Client<HttpsConnector<HttpConnector>, Empty<Bytes>>,
}

impl Jwks {
    async fn fetch(&self) -> Result<KeySet, String> {
        let read = async {
            let response = self
                .client
                .get(self.uri.clone())
                .await
                .map_err(|err| format!("GET {}: {err}", self.uri))?;
            if !response.status().is_success() {
                return Err(format!("GET {}: {}", self.uri, response.status()));
            }
            Limited::new(response.into_body(), JWKS_MAX_BYTES)
                .collect()
                .await
                .map(|body| body.to_bytes())
                .map_err(|err| format!("GET {}: {err}", self.uri))
        };
        let body = tokio::time::timeout(FETCH_TIMEOUT, read)
            .await
            .map_err(|_| format!("GET {}: no answer in {FETCH_TIMEOUT:?}", self.uri))??;
        KeySet::parse(&body)
    }
}

/// Checks tokens against the issuer's keys.
#[derive(Clone)]
pub struct TokenVerifier {
    jwks: Arc<Jwks>,
    keys: Arc<FetchedKeys<KeySet>>,
    issuer: String,
    audience: String,
}

impl std::fmt::Debug for TokenVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenVerifier")
            .field("jwks_uri", &self.jwks.uri)
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
    /// Tokens of `issuer` for `audience`, signed by a key of the JWKS at `jwks_uri` (https;
    /// plain http only where the local stack serves its issuer). Nothing is fetched yet.
    pub fn new(jwks_uri: &str, issuer: &str, audience: &str) -> Result<Self, String> {
        let uri = jwks_uri
            .parse::<http::Uri>()
            .map_err(|err| format!("{jwks_uri:?}: {err}"))?;
        let connector = HttpsConnectorBuilder::new()
            .with_native_roots()
            .map_err(|err| format!("no trusted roots to check the issuer with: {err}"))?
            .https_or_http()
            .enable_http1()
            .build();
        Ok(Self {
            jwks: Arc::new(Jwks {
                uri,
                client: Client::builder(TokioExecutor::new()).build(connector),
            }),
            keys: Arc::new(FetchedKeys::new(KEYS_MAX_AGE, MISS_INTERVAL)),
            issuer: issuer.to_owned(),
            audience: audience.to_owned(),
        })
    }

    /// The user a token names, if it verifies. `raw` is the token, with or without `Bearer `.
    pub async fn verify(&self, raw: Option<&str>) -> Result<UserId, TokenError> {
        let raw = raw.map(str::trim).filter(|t| !t.is_empty());
        let raw = raw.ok_or(TokenError::Missing)?;
        let token = raw
            .strip_prefix("Bearer ")
            .or_else(|| raw.strip_prefix("bearer "))
            .unwrap_or(raw)
            .trim();
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| TokenError::Invalid(e.to_string()))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(TokenError::Invalid(format!(
                "{:?} is not an asymmetric algorithm the API accepts",
                header.alg
            )));
        }
        let fetch = || self.jwks.fetch();
        let looked_at = Instant::now();
        let keys = self
            .keys
            .get(fetch)
            .await
            .map_err(TokenError::KeysUnavailable)?;
        let keys = match keys.find(header.alg, header.kid.as_deref()) {
            Some(_) => keys,
            // Signed after a rotation this instance has not seen: the issuer's keys now.
            None => self
                .keys
                .refreshed(looked_at, fetch)
                .await
                .map_err(TokenError::KeysUnavailable)?,
        };
        let key = keys
            .find(header.alg, header.kid.as_deref())
            .ok_or_else(|| {
                TokenError::Invalid("signed with a key the issuer does not list".into())
            })?;
        self.check(token, key)
    }

    fn check(&self, token: &str, key: &Key) -> Result<UserId, TokenError> {
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
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    use jsonwebtoken::{EncodingKey, Header};

    /// A fresh P-256 key: its signing half, and its JWKS document under `kid`.
    fn es256_key(kid: &str) -> (EncodingKey, String) {
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .unwrap();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
        // The uncompressed point: 0x04, then x and y.
        let point = pair.public_key().as_ref();
        let jwks = serde_json::json!({"keys": [{"kty": "EC", "crv": "P-256", "alg": "ES256",
            "kid": kid, "use": "sig", "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..])}]});
        (EncodingKey::from_ec_der(pkcs8.as_ref()), jwks.to_string())
    }

    fn token(key: &EncodingKey, kid: &str, claims: serde_json::Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.into());
        jsonwebtoken::encode(&header, &claims, key).unwrap()
    }

    fn claims(exp_from_now: i64) -> serde_json::Value {
        let now = likes_core::clock::now_ms() / 1000;
        serde_json::json!({"sub": "alice", "iss": "https://issuer", "aud": "likes",
            "exp": now + exp_from_now})
    }

    fn verifier() -> TokenVerifier {
        TokenVerifier::new("https://issuer/jwks.json", "https://issuer", "likes").unwrap()
    }

    /// The user `token` names under the keys of `jwks`, as `verify` checks it once the key is
    /// found.
    fn checked(jwks: &str, token: &str) -> Result<UserId, TokenError> {
        let keys = KeySet::parse(jwks.as_bytes()).unwrap();
        let header = jsonwebtoken::decode_header(token).unwrap();
        let key = keys
            .find(header.alg, header.kid.as_deref())
            .ok_or(TokenError::Invalid("no key".into()))?;
        verifier().check(token, key)
    }

    #[test]
    fn a_token_signed_by_a_listed_key_names_its_user() {
        let (key, jwks) = es256_key("k1");
        let good = token(&key, "k1", claims(60));
        assert_eq!(checked(&jwks, &good).unwrap().as_str(), "alice");
    }

    #[test]
    fn bad_tokens_are_refused() {
        let (key, jwks) = es256_key("k1");
        let (other_key, _) = es256_key("k1");
        let forged = token(&other_key, "k1", claims(60));
        let unlisted = token(&key, "k2", claims(60));
        let expired = token(&key, "k1", claims(-5));
        let mut wrong_audience = claims(60);
        wrong_audience["aud"] = "other".into();
        let wrong_audience = token(&key, "k1", wrong_audience);
        // API Gateway's JWT authorizer requires both claims; a token without one is refused
        // here too, not taken for one with the right value.
        let without = |claim: &str| {
            let mut claims = claims(60);
            claims.as_object_mut().unwrap().remove(claim);
            token(&key, "k1", claims)
        };
        let (no_issuer, no_audience) = (without("iss"), without("aud"));
        for bad in [
            &forged,
            &unlisted,
            &expired,
            &wrong_audience,
            &no_issuer,
            &no_audience,
        ] {
            assert!(
                matches!(checked(&jwks, bad), Err(TokenError::Invalid(_))),
                "{bad}"
            );
        }
    }

    #[tokio::test]
    async fn symmetric_and_unsigned_tokens_are_refused_before_any_key_is_read() {
        // The JWKS address answers nothing: a refusal here never fetched it.
        let verifier = verifier();
        assert_eq!(verifier.verify(None).await, Err(TokenError::Missing));
        assert_eq!(verifier.verify(Some(" ")).await, Err(TokenError::Missing));
        let hs256 = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims(60),
            &EncodingKey::from_secret(b"a-shared-secret"),
        )
        .unwrap();
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
        let unsigned = format!("{header}.{}.", URL_SAFE_NO_PAD.encode(b"{}"));
        for bad in [hs256.as_str(), &unsigned, "x.y.z"] {
            assert!(
                matches!(
                    verifier.verify(Some(bad)).await,
                    Err(TokenError::Invalid(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_jwks_keeps_only_asymmetric_signing_keys() {
        let symmetric = r#"{"keys":[{"kty":"oct","kid":"k1","alg":"HS256","k":"c2VjcmV0LWtleS1mb3ItdGVzdHM"}]}"#;
        assert!(KeySet::parse(symmetric.as_bytes()).is_err());
        assert!(KeySet::parse(br#"{"keys":[]}"#).is_err());
        assert!(KeySet::parse(b"nope").is_err());
        let (_, jwks) = es256_key("k1");
        let mut mixed: serde_json::Value = serde_json::from_str(&jwks).unwrap();
        let symmetric: serde_json::Value = serde_json::from_str(symmetric).unwrap();
        mixed["keys"]
            .as_array_mut()
            .unwrap()
            .push(symmetric["keys"][0].clone());
        let keys = KeySet::parse(mixed.to_string().as_bytes()).unwrap();
        assert_eq!(keys.0.len(), 1);
        assert!(keys.find(Algorithm::HS256, Some("k1")).is_none());
    }
}
