//! Validated identifiers: items, users, idempotency keys.

use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::ValidationError;

pub const ITEM_ID_MAX_LEN: usize = 128;
pub const IDEMPOTENCY_KEY_MAX_LEN: usize = 255;
/// Identity providers' `sub` claims run 20 to 50 characters; 128 leaves room and keeps a
/// Reactions row (user id + item id + recent keys) under 1 KB, one write unit.
pub const USER_ID_MAX_LEN: usize = 128;

/// An item id: 1–128 characters of `[A-Za-z0-9_.:-]`, e.g. `game:123`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct ItemId(String);

impl ItemId {
    pub fn parse(raw: &str) -> Result<Self, ValidationError> {
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-');
        if raw.is_empty() || raw.len() > ITEM_ID_MAX_LEN || !raw.chars().all(allowed) {
            return Err(ValidationError::ItemId(raw.chars().take(64).collect()));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ItemId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The caller, as the JWT authorizer's `sub` claim names them. Never taken from a header,
/// path or body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UserId(String);

impl UserId {
    pub fn parse(raw: &str) -> Result<Self, ValidationError> {
        if raw.is_empty() || raw.len() > USER_ID_MAX_LEN || raw.chars().any(char::is_control) {
            return Err(ValidationError::UserId);
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A client's `Idempotency-Key`: 1–255 printable ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub fn parse(raw: &str) -> Result<Self, ValidationError> {
        if raw.is_empty() || raw.len() > IDEMPOTENCY_KEY_MAX_LEN {
            return Err(ValidationError::IdempotencyKeyLength);
        }
        if !raw.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
            return Err(ValidationError::IdempotencyKeyCharacters);
        }
        Ok(Self(raw.to_owned()))
    }

    /// What the row stores instead of the key itself: 64 bits of SHA-256. A row holds at most
    /// ten keys (a collision among them: about 1 in 10^17), and each stored key costs three
    /// attribute names, so short hashes keep the row under 1 KB.
    pub fn hash(&self) -> KeyHash {
        let digest = Sha256::digest(self.0.as_bytes());
        KeyHash(URL_SAFE_NO_PAD.encode(&digest[..8]))
    }
}

/// The stored form of an idempotency key (11 URL-safe characters).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyHash(String);

impl KeyHash {
    /// Reads a hash back from storage; `None` when it is not one this code wrote.
    pub fn from_stored(raw: &str) -> Option<Self> {
        let ok = raw.len() == 11
            && raw
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        ok.then(|| Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_ids_accept_the_documented_alphabet_and_length() {
        for ok in ["game:123", "a", "A-z_0.9:x", &"x".repeat(128)] {
            assert_eq!(ItemId::parse(ok).unwrap().as_str(), ok);
        }
        for bad in ["", &"x".repeat(129), "game/1", "a b", "é", "item#1", "a%2F"] {
            assert!(ItemId::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn idempotency_keys_are_printable_ascii_up_to_255() {
        assert!(IdempotencyKey::parse("k").is_ok());
        assert!(IdempotencyKey::parse(&"k".repeat(255)).is_ok());
        assert!(IdempotencyKey::parse(" spaces are printable ~").is_ok());
        assert_eq!(
            IdempotencyKey::parse(""),
            Err(ValidationError::IdempotencyKeyLength)
        );
        assert_eq!(
            IdempotencyKey::parse(&"k".repeat(256)),
            Err(ValidationError::IdempotencyKeyLength)
        );
        for bad in ["tab\there", "nl\n", "ünï"] {
            assert_eq!(
                IdempotencyKey::parse(bad),
                Err(ValidationError::IdempotencyKeyCharacters),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn key_hashes_are_stable_distinct_and_round_trip() {
        let a = IdempotencyKey::parse("key-a").unwrap().hash();
        let b = IdempotencyKey::parse("key-b").unwrap().hash();
        assert_ne!(a, b);
        assert_eq!(a, IdempotencyKey::parse("key-a").unwrap().hash());
        assert_eq!(a.as_str().len(), 11);
        assert_eq!(KeyHash::from_stored(a.as_str()), Some(a));
        assert_eq!(KeyHash::from_stored("short"), None);
        assert_eq!(KeyHash::from_stored(&"+".repeat(11)), None);
    }

    #[test]
    fn user_ids_must_be_present_and_printable() {
        assert!(UserId::parse("user-1").is_ok());
        assert!(UserId::parse("").is_err());
        assert!(UserId::parse("a\u{0}b").is_err());
        assert!(UserId::parse(&"u".repeat(128)).is_ok());
        assert!(UserId::parse(&"u".repeat(129)).is_err());
    }
}
