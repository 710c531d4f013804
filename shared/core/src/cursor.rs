//! Opaque page cursors, signed and bound to what they page through: "my liked items" and "my
//! blocks" cursors to their user, "who liked" cursors to their item.
//!
//! Wire form: `base64url(payload) "." base64url(HMAC-SHA256(key, domain 0 scope 0 payload))`
//! (each part length-prefixed). The payload is the position of the last entry on the page; a
//! cursor made for another user or item, for the other list, or with any byte changed, fails
//! verification.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::ids::{ItemId, UserId};
use crate::ValidationError;

const LIKED_DOMAIN: &[u8] = b"likes-cursor-v1";
const LIKERS_DOMAIN: &[u8] = b"likers-cursor-v1";
const BLOCKS_DOMAIN: &[u8] = b"blocks-cursor-v1";
/// Longer input is refused before decoding: a real cursor is under 400 characters.
const MAX_CURSOR_LEN: usize = 512;

/// The key cursors are signed with (configuration: `CURSOR_SIGNING_KEY`).
#[derive(Clone)]
pub struct CursorKey(Vec<u8>);

impl CursorKey {
    pub fn new(secret: impl AsRef<[u8]>) -> Result<Self, ValidationError> {
        let secret = secret.as_ref();
        if secret.len() < 16 {
            return Err(ValidationError::WeakCursorKey);
        }
        Ok(Self(secret.to_vec()))
    }

    fn mac(&self, domain: &[u8], scope: &str, payload: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC accepts any key length");
        for part in [domain, scope.as_bytes(), payload] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac
    }

    fn seal(&self, domain: &[u8], scope: &str, position: &impl Serialize) -> String {
        let payload = serde_json::to_vec(position).expect("cursor serializes");
        let tag = self.mac(domain, scope, &payload).finalize().into_bytes();
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(&payload),
            URL_SAFE_NO_PAD.encode(tag)
        )
    }

    fn open<T: DeserializeOwned>(
        &self,
        domain: &[u8],
        scope: &str,
        raw: &str,
    ) -> Result<T, ValidationError> {
        if raw.len() > MAX_CURSOR_LEN {
            return Err(ValidationError::Cursor);
        }
        let (payload, tag) = raw.split_once('.').ok_or(ValidationError::Cursor)?;
        let payload = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| ValidationError::Cursor)?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| ValidationError::Cursor)?;
        // Constant-time comparison: a forger learns nothing from timing.
        self.mac(domain, scope, &payload)
            .verify_slice(&tag)
            .map_err(|_| ValidationError::Cursor)?;
        serde_json::from_slice(&payload).map_err(|_| ValidationError::Cursor)
    }
}

impl std::fmt::Debug for CursorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CursorKey(..)")
    }
}

/// Where the next page of liked items starts: after this (liked_at, item_id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LikedCursor {
    #[serde(rename = "t")]
    pub liked_at_ms: i64,
    #[serde(rename = "i")]
    pub item_id: String,
}

impl LikedCursor {
    pub fn new(liked_at_ms: i64, item_id: &ItemId) -> Self {
        Self {
            liked_at_ms,
            item_id: item_id.as_str().to_owned(),
        }
    }

    pub fn encode(&self, key: &CursorKey, user: &UserId) -> String {
        key.seal(LIKED_DOMAIN, user.as_str(), self)
    }

    pub fn decode(raw: &str, key: &CursorKey, user: &UserId) -> Result<Self, ValidationError> {
        let cursor: Self = key.open(LIKED_DOMAIN, user.as_str(), raw)?;
        ItemId::parse(&cursor.item_id).map_err(|_| ValidationError::Cursor)?;
        Ok(cursor)
    }
}

/// Where the next page of an item's likers starts: after this (liked_at, user_id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LikersCursor {
    #[serde(rename = "t")]
    pub liked_at_ms: i64,
    #[serde(rename = "u")]
    pub user_id: String,
}

impl LikersCursor {
    pub fn encode(&self, key: &CursorKey, item: &ItemId) -> String {
        key.seal(LIKERS_DOMAIN, item.as_str(), self)
    }

    pub fn decode(raw: &str, key: &CursorKey, item: &ItemId) -> Result<Self, ValidationError> {
        let cursor: Self = key.open(LIKERS_DOMAIN, item.as_str(), raw)?;
        UserId::parse(&cursor.user_id).map_err(|_| ValidationError::Cursor)?;
        Ok(cursor)
    }
}

/// Where the next page of a user's blocks starts: after this blocked user (they are listed
/// in user id order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlocksCursor {
    #[serde(rename = "u")]
    pub user_id: String,
}

impl BlocksCursor {
    pub fn encode(&self, key: &CursorKey, user: &UserId) -> String {
        key.seal(BLOCKS_DOMAIN, user.as_str(), self)
    }

    pub fn decode(raw: &str, key: &CursorKey, user: &UserId) -> Result<Self, ValidationError> {
        let cursor: Self = key.open(BLOCKS_DOMAIN, user.as_str(), raw)?;
        UserId::parse(&cursor.user_id).map_err(|_| ValidationError::Cursor)?;
        Ok(cursor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> CursorKey {
        CursorKey::new("a-test-key-of-enough-length").unwrap()
    }

    fn user(id: &str) -> UserId {
        UserId::parse(id).unwrap()
    }

    fn cursor() -> LikedCursor {
        LikedCursor::new(1_700_000_000_123, &ItemId::parse("game:42").unwrap())
    }

    #[test]
    fn a_cursor_round_trips_for_its_user() {
        let raw = cursor().encode(&key(), &user("alice"));
        assert_eq!(
            LikedCursor::decode(&raw, &key(), &user("alice")).unwrap(),
            cursor()
        );
    }

    #[test]
    fn a_cursor_from_another_user_is_refused() {
        let raw = cursor().encode(&key(), &user("alice"));
        assert_eq!(
            LikedCursor::decode(&raw, &key(), &user("bob")),
            Err(ValidationError::Cursor)
        );
    }

    #[test]
    fn a_cursor_signed_with_another_key_is_refused() {
        let other = CursorKey::new("another-key-of-enough-length").unwrap();
        let raw = cursor().encode(&other, &user("alice"));
        assert!(LikedCursor::decode(&raw, &key(), &user("alice")).is_err());
    }

    #[test]
    fn any_changed_character_is_refused() {
        let raw = cursor().encode(&key(), &user("alice"));
        for i in 0..raw.len() {
            let mut bytes = raw.clone().into_bytes();
            bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
            let tampered = String::from_utf8(bytes).unwrap();
            if tampered != raw {
                assert!(
                    LikedCursor::decode(&tampered, &key(), &user("alice")).is_err(),
                    "changed at {i}"
                );
            }
        }
    }

    #[test]
    fn garbage_is_refused() {
        for bad in ["", ".", "abc", "abc.def", "!!!.???", &"a".repeat(600)] {
            assert!(
                LikedCursor::decode(bad, &key(), &user("alice")).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_likers_cursor_is_bound_to_its_item_and_never_passes_for_a_liked_cursor() {
        let item = |id: &str| ItemId::parse(id).unwrap();
        let position = LikersCursor {
            liked_at_ms: 1_700_000_000_123,
            user_id: "alice".into(),
        };
        let raw = position.encode(&key(), &item("game:1"));
        assert_eq!(
            LikersCursor::decode(&raw, &key(), &item("game:1")).unwrap(),
            position
        );
        assert_eq!(
            LikersCursor::decode(&raw, &key(), &item("game:2")),
            Err(ValidationError::Cursor)
        );
        // The same scope string in the other list's domain: refused both ways.
        assert!(LikedCursor::decode(&raw, &key(), &user("game:1")).is_err());
        let liked = cursor().encode(&key(), &user("game:1"));
        assert!(LikersCursor::decode(&liked, &key(), &item("game:1")).is_err());
    }

    #[test]
    fn a_blocks_cursor_is_bound_to_its_user_and_to_its_list() {
        let position = BlocksCursor {
            user_id: "bob".into(),
        };
        let raw = position.encode(&key(), &user("alice"));
        assert_eq!(
            BlocksCursor::decode(&raw, &key(), &user("alice")).unwrap(),
            position
        );
        assert_eq!(
            BlocksCursor::decode(&raw, &key(), &user("bob")),
            Err(ValidationError::Cursor)
        );
        // The user's liked-items cursor is not a blocks cursor, nor the other way round.
        assert!(LikedCursor::decode(&raw, &key(), &user("alice")).is_err());
        let liked = cursor().encode(&key(), &user("alice"));
        assert!(BlocksCursor::decode(&liked, &key(), &user("alice")).is_err());
    }

    #[test]
    fn short_keys_are_refused() {
        assert!(CursorKey::new("short").is_err());
    }
}
