//! Opaque page cursors, encrypted and bound to what they page through: "my liked items" and
//! "my blocks" cursors to their user, "who liked" cursors to their item.
//!
//! A cursor holds the position of the last entry its page examined, which on a likers page
//! may be a liker hidden from the reader (a private user, a user the reader blocks or who
//! blocks them): so the position is sealed, not only signed. Wire form:
//! `base64url(nonce ‖ AES-256-GCM-SIV(key, nonce, position, domain ‖ scope))`, no padding,
//! where the key is HMAC-SHA256 of the cursor key's secret over a fixed label, the nonce is
//! random, and the list's domain and its user or item (each length-prefixed) are the
//! associated data. The position is padded to one length, so every cursor is
//! [`CURSOR_LEN`] characters whatever it names, and two cursors of one position differ: a
//! client learns nothing from a cursor, not even whether two name the same entry. A cursor
//! made for another user or item, for another list, under another key, or with any byte
//! changed fails to open. GCM-SIV rather than GCM: a repeat of a random nonce over the
//! key's life then tells only that two cursors are equal, never the key's authenticator.

use std::sync::Arc;

use aws_lc_rs::aead::{Aad, Nonce, RandomizedNonceKey, AES_256_GCM_SIV, NONCE_LEN};
use aws_lc_rs::hmac;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use crate::ids::{ItemId, UserId, ITEM_ID_MAX_LEN, USER_ID_MAX_LEN};
use crate::ValidationError;

const LIKED_DOMAIN: &[u8] = b"liked-items-cursor-v2";
const LIKERS_DOMAIN: &[u8] = b"likers-cursor-v2";
const BLOCKS_DOMAIN: &[u8] = b"blocks-cursor-v2";
/// What the encryption key is derived for: another use of the secret derives another key.
const KEY_LABEL: &[u8] = b"likes page cursor encryption key v2";

/// The longest id a position names.
const ID_MAX_LEN: usize = if ITEM_ID_MAX_LEN > USER_ID_MAX_LEN {
    ITEM_ID_MAX_LEN
} else {
    USER_ID_MAX_LEN
};
const _: () = assert!(
    ID_MAX_LEN <= u8::MAX as usize,
    "an id's length fits its byte"
);
/// A position sealed: when (epoch ms, big-endian), the id's length, the id, zeros.
const POSITION_LEN: usize = 8 + 1 + ID_MAX_LEN;
const TAG_LEN: usize = 16;
const SEALED_LEN: usize = NONCE_LEN + POSITION_LEN + TAG_LEN;
/// Every cursor's length in characters; any other is refused before decoding.
pub const CURSOR_LEN: usize = (SEALED_LEN * 4).div_ceil(3);

/// The key cursors are sealed with, derived from the cursor secret's current value; during
/// a rotation also the key of its previous value, which still opens the cursors handed out
/// before (they are never sealed with it).
#[derive(Clone)]
pub struct CursorKey {
    current: Arc<RandomizedNonceKey>,
    previous: Option<Arc<RandomizedNonceKey>>,
}

/// Where a page starts: after the entry at this time with this id.
struct Position {
    at_ms: i64,
    id: String,
}

impl CursorKey {
    pub fn new(secret: impl AsRef<[u8]>) -> Result<Self, ValidationError> {
        Ok(Self {
            current: Arc::new(Self::derive(secret.as_ref())?),
            previous: None,
        })
    }

    /// The same, also opening the cursors sealed under the secret's previous value.
    pub fn with_previous(self, secret: impl AsRef<[u8]>) -> Result<Self, ValidationError> {
        Ok(Self {
            previous: Some(Arc::new(Self::derive(secret.as_ref())?)),
            ..self
        })
    }

    fn derive(secret: &[u8]) -> Result<RandomizedNonceKey, ValidationError> {
        if secret.len() < 16 {
            return Err(ValidationError::WeakCursorKey);
        }
        let derived = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, secret), KEY_LABEL);
        Ok(RandomizedNonceKey::new(&AES_256_GCM_SIV, derived.as_ref())
            .expect("HMAC-SHA256 gives an AES-256 key"))
    }

    /// The list's domain, then its user or item, each length-prefixed: what a cursor is
    /// bound to.
    fn bound_to(domain: &[u8], scope: &str) -> Aad<Vec<u8>> {
        let mut bound = Vec::with_capacity(16 + domain.len() + scope.len());
        for part in [domain, scope.as_bytes()] {
            bound.extend((part.len() as u64).to_be_bytes());
            bound.extend(part);
        }
        Aad::from(bound)
    }

    fn seal(&self, domain: &[u8], scope: &str, position: &Position) -> String {
        let id = position.id.as_bytes();
        // Ids are bounded where they are parsed; one longer would make a cursor of another
        // length, which opening refuses.
        debug_assert!(id.len() <= ID_MAX_LEN, "{:?}", position.id);
        let mut sealed = Vec::with_capacity(SEALED_LEN);
        sealed.extend(position.at_ms.to_be_bytes());
        sealed.push(id.len() as u8);
        sealed.extend(id);
        sealed.resize(POSITION_LEN.max(sealed.len()), 0);
        let nonce = self
            .current
            .seal_in_place_append_tag(Self::bound_to(domain, scope), &mut sealed)
            .expect("the system's random source gives a nonce");
        let mut wire = nonce.as_ref().to_vec();
        wire.append(&mut sealed);
        URL_SAFE_NO_PAD.encode(wire)
    }

    fn open(&self, domain: &[u8], scope: &str, raw: &str) -> Result<Position, ValidationError> {
        if raw.len() != CURSOR_LEN {
            return Err(ValidationError::Cursor);
        }
        let wire = URL_SAFE_NO_PAD
            .decode(raw)
            .map_err(|_| ValidationError::Cursor)?;
        let (nonce, _) = wire.split_at(NONCE_LEN);
        let opened = [Some(&self.current), self.previous.as_ref()]
            .into_iter()
            .flatten()
            .find_map(|key| {
                let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
                let mut sealed = wire[NONCE_LEN..].to_vec();
                let len = key
                    .open_in_place(nonce, Self::bound_to(domain, scope), &mut sealed)
                    .ok()?
                    .len();
                sealed.truncate(len);
                Some(sealed)
            });
        let position = opened.ok_or(ValidationError::Cursor)?;
        let (at_ms, rest) = position.split_at(8);
        let (&len, rest) = rest.split_first().ok_or(ValidationError::Cursor)?;
        let id = rest
            .get(..usize::from(len))
            .ok_or(ValidationError::Cursor)?;
        Ok(Position {
            at_ms: i64::from_be_bytes(at_ms.try_into().expect("eight bytes")),
            id: String::from_utf8(id.to_vec()).map_err(|_| ValidationError::Cursor)?,
        })
    }
}

/// Whether `raw` has a cursor's form (its length, URL-safe base64): one that has it and
/// does not open may have been sealed under a key its reader has not read yet; one that
/// lacks it was never sealed by this service.
pub fn well_formed(raw: &str) -> bool {
    raw.len() == CURSOR_LEN && URL_SAFE_NO_PAD.decode(raw).is_ok()
}

impl std::fmt::Debug for CursorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CursorKey(..)")
    }
}

/// Where the next page of liked items starts: after this (liked_at, item_id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LikedCursor {
    pub liked_at_ms: i64,
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
        let position = Position {
            at_ms: self.liked_at_ms,
            id: self.item_id.clone(),
        };
        key.seal(LIKED_DOMAIN, user.as_str(), &position)
    }

    pub fn decode(raw: &str, key: &CursorKey, user: &UserId) -> Result<Self, ValidationError> {
        let position = key.open(LIKED_DOMAIN, user.as_str(), raw)?;
        ItemId::parse(&position.id).map_err(|_| ValidationError::Cursor)?;
        Ok(Self {
            liked_at_ms: position.at_ms,
            item_id: position.id,
        })
    }
}

/// Where the next page of an item's likers starts: after this (liked_at, user_id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LikersCursor {
    pub liked_at_ms: i64,
    pub user_id: String,
}

impl LikersCursor {
    pub fn encode(&self, key: &CursorKey, item: &ItemId) -> String {
        let position = Position {
            at_ms: self.liked_at_ms,
            id: self.user_id.clone(),
        };
        key.seal(LIKERS_DOMAIN, item.as_str(), &position)
    }

    pub fn decode(raw: &str, key: &CursorKey, item: &ItemId) -> Result<Self, ValidationError> {
        let position = key.open(LIKERS_DOMAIN, item.as_str(), raw)?;
        UserId::parse(&position.id).map_err(|_| ValidationError::Cursor)?;
        Ok(Self {
            liked_at_ms: position.at_ms,
            user_id: position.id,
        })
    }
}

/// Where the next page of a user's blocks starts: after this blocked user (they are listed
/// in user id order, so the position's time is unused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlocksCursor {
    pub user_id: String,
}

impl BlocksCursor {
    pub fn encode(&self, key: &CursorKey, user: &UserId) -> String {
        let position = Position {
            at_ms: 0,
            id: self.user_id.clone(),
        };
        key.seal(BLOCKS_DOMAIN, user.as_str(), &position)
    }

    pub fn decode(raw: &str, key: &CursorKey, user: &UserId) -> Result<Self, ValidationError> {
        let position = key.open(BLOCKS_DOMAIN, user.as_str(), raw)?;
        UserId::parse(&position.id).map_err(|_| ValidationError::Cursor)?;
        Ok(Self {
            user_id: position.id,
        })
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
    fn a_cursor_sealed_under_another_key_is_refused() {
        let other = CursorKey::new("another-key-of-enough-length").unwrap();
        let raw = cursor().encode(&other, &user("alice"));
        assert!(LikedCursor::decode(&raw, &key(), &user("alice")).is_err());
    }

    #[test]
    fn during_a_rotation_cursors_of_the_previous_key_open_and_new_ones_are_sealed_with_the_new() {
        let (first, second, third) = (
            "the-first-key-of-enough-length",
            "the-second-key-of-enough-length",
            "the-third-key-of-enough-length",
        );
        let before = cursor().encode(&CursorKey::new(first).unwrap(), &user("alice"));
        let rotating = CursorKey::new(second)
            .unwrap()
            .with_previous(first)
            .unwrap();
        assert_eq!(
            LikedCursor::decode(&before, &rotating, &user("alice")).unwrap(),
            cursor()
        );
        let after = cursor().encode(&rotating, &user("alice"));
        let only_second = CursorKey::new(second).unwrap();
        assert_eq!(
            LikedCursor::decode(&after, &only_second, &user("alice")).unwrap(),
            cursor(),
            "sealed under the current key"
        );
        let rotated_again = CursorKey::new(third)
            .unwrap()
            .with_previous(second)
            .unwrap();
        assert!(LikedCursor::decode(&after, &rotated_again, &user("alice")).is_ok());
        assert_eq!(
            LikedCursor::decode(&before, &rotated_again, &user("alice")),
            Err(ValidationError::Cursor),
            "two rotations on, the first key opens nothing"
        );
        assert!(CursorKey::new(second)
            .unwrap()
            .with_previous("short")
            .is_err());
    }

    #[test]
    fn only_what_has_a_cursors_form_is_well_formed() {
        let raw = cursor().encode(&key(), &user("alice"));
        assert!(well_formed(&raw));
        for bad in [
            "",
            "x",
            &raw[1..],
            &format!("{raw}A"),
            &format!("+{}", &raw[1..]),
        ] {
            assert!(!well_formed(bad), "{bad}");
        }
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
        let right_length = "A".repeat(CURSOR_LEN);
        let wrong_alphabet = "+".repeat(CURSOR_LEN);
        for bad in [
            "",
            ".",
            "abc",
            "abc.def",
            "!!!.???",
            &"a".repeat(600),
            &right_length,
            &wrong_alphabet,
        ] {
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
    fn a_cursor_holds_its_position_sealed_not_in_clear() {
        let item = ItemId::parse("game:a-secret-item").unwrap();
        let liked_at_ms = 1_700_000_000_123_i64;
        let raw = LikedCursor::new(liked_at_ms, &item).encode(&key(), &user("alice"));
        let bytes = URL_SAFE_NO_PAD.decode(&raw).unwrap();
        let holds = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
        assert!(!holds(item.as_str().as_bytes()), "{raw}");
        assert!(!holds(&liked_at_ms.to_be_bytes()), "{raw}");
        assert!(!holds(liked_at_ms.to_string().as_bytes()), "{raw}");
        assert!(!raw.contains(&liked_at_ms.to_string()), "{raw}");
    }

    #[test]
    fn every_cursor_is_one_length_and_no_two_are_alike() {
        let longest = "u".repeat(crate::ids::USER_ID_MAX_LEN);
        assert_eq!(CURSOR_LEN, 220, "docs/api.md says so");
        let mut seen = std::collections::HashSet::new();
        for id in ["a", "bob", longest.as_str()] {
            for _ in 0..3 {
                let raw = BlocksCursor { user_id: id.into() }.encode(&key(), &user("alice"));
                assert_eq!(raw.len(), CURSOR_LEN, "{id}");
                assert!(seen.insert(raw), "a fresh nonce each time");
                let raw = LikersCursor {
                    liked_at_ms: i64::MIN,
                    user_id: id.into(),
                }
                .encode(&key(), &ItemId::parse("game:1").unwrap());
                assert_eq!(raw.len(), CURSOR_LEN, "{id}");
                let opened = LikersCursor::decode(&raw, &key(), &ItemId::parse("game:1").unwrap());
                assert_eq!(opened.unwrap().user_id, id);
            }
        }
    }

    #[test]
    fn short_keys_are_refused() {
        assert!(CursorKey::new("short").is_err());
    }
}
