//! Who sees whose likes, free of AWS types: a user's likes visibility, their blocks, and what
//! a likers list shows its reader.
//!
//! A user's privacy lives in their own partition: the settings row [`SETTINGS_ENTRY`] (their
//! likes visibility, and how many users they block) and one row per user they block
//! ([`block_entry`]). A likers list asks, for each liker it would show, the liker's settings
//! (private, or blocks somebody), then, only for likers who block somebody, whether they
//! block the reader; whom the reader blocks is one read of the reader's own rows, bounded by
//! [`MAX_BLOCKS`]. Every read is per liker or per reader, never per user who blocked the
//! reader: that set has no bound (anyone may block a celebrity).

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{UserId, ValidationError};

/// A user blocks at most this many users: whom a reader blocks is read whole for every
/// likers page, so it must stay one small Query.
pub const MAX_BLOCKS: u64 = 1_000;
/// The sort key of a user's settings row (`#` sorts before every block row).
pub const SETTINGS_ENTRY: &str = "#settings";
/// The sort keys of a user's block rows: `b#<blocked user id>`.
pub const BLOCK_PREFIX: &str = "b#";

/// The sort key of the row saying its user blocks `blocked`.
pub fn block_entry(blocked: &str) -> String {
    format!("{BLOCK_PREFIX}{blocked}")
}

/// The blocked user a block row's sort key names; `None` for any other row.
pub fn blocked_of(entry: &str) -> Option<&str> {
    entry.strip_prefix(BLOCK_PREFIX)
}

/// Whether a user's likes show in other users' likers lists. Their likes count either way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LikesVisibility {
    #[default]
    Public,
    Private,
}

impl LikesVisibility {
    pub const ALL: [Self; 2] = [Self::Public, Self::Private];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Public => "public",
            Self::Private => "private",
        }
    }
}

impl fmt::Display for LikesVisibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for LikesVisibility {
    type Err = ValidationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|visibility| visibility.as_str() == s)
            .ok_or_else(|| ValidationError::LikesVisibility(s.chars().take(64).collect()))
    }
}

/// A user's settings row; a user who never set anything has the default (public, no blocks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrivacySettings {
    pub likes_visibility: LikesVisibility,
    /// How many users they block, kept with every block and unblock.
    pub blocks: u64,
}

/// The user a caller asks to block or unblock: a valid user id other than the caller's own.
pub fn block_target(caller: &UserId, other: UserId) -> Result<UserId, ValidationError> {
    if &other == caller {
        return Err(ValidationError::BlockSelf);
    }
    Ok(other)
}

/// What a block request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockOutcome {
    /// The block is new, since this time (epoch ms).
    Blocked { blocked_at_ms: i64 },
    /// The caller blocked that user already, since this time: nothing written.
    AlreadyBlocked { blocked_at_ms: i64 },
    /// The caller blocks [`MAX_BLOCKS`] users already: nothing written.
    AtLimit,
}

/// What a likers list shows its reader of one liker, as far as the liker's settings and the
/// reader's own blocks tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sight {
    Shown,
    Hidden,
    /// Shown unless the liker blocks the reader: the liker blocks somebody, so their row for
    /// the reader must be asked for.
    UnlessBlocked,
}

/// What `reader` sees of `liker` on a likers list: themselves always; nobody private, and
/// nobody they block; a liker who blocks nobody, at once.
pub fn sight(
    reader: &UserId,
    liker: &str,
    settings: &PrivacySettings,
    reader_blocks: &HashSet<String>,
) -> Sight {
    if liker == reader.as_str() {
        Sight::Shown
    } else if settings.likes_visibility == LikesVisibility::Private || reader_blocks.contains(liker)
    {
        Sight::Hidden
    } else if settings.blocks > 0 {
        Sight::UnlessBlocked
    } else {
        Sight::Shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(id: &str) -> UserId {
        UserId::parse(id).unwrap()
    }

    #[test]
    fn visibilities_read_and_write_their_lowercase_names_only() {
        for visibility in LikesVisibility::ALL {
            assert_eq!(visibility.as_str().parse(), Ok(visibility));
            assert_eq!(
                serde_json::to_value(visibility).unwrap(),
                visibility.as_str()
            );
        }
        for bad in ["PUBLIC", "Private", "", "friends"] {
            assert_eq!(
                bad.parse::<LikesVisibility>(),
                Err(ValidationError::LikesVisibility(bad.into()))
            );
        }
        assert_eq!(LikesVisibility::default(), LikesVisibility::Public);
    }

    #[test]
    fn block_rows_name_their_user_and_sort_after_the_settings() {
        let entry = block_entry("bob#2");
        assert_eq!(blocked_of(&entry), Some("bob#2"));
        assert_eq!(blocked_of(SETTINGS_ENTRY), None);
        assert!(SETTINGS_ENTRY < block_entry("").as_str());
    }

    #[test]
    fn nobody_blocks_themselves() {
        assert_eq!(
            block_target(&user("ann"), user("ann")),
            Err(ValidationError::BlockSelf)
        );
        assert_eq!(block_target(&user("ann"), user("bob")), Ok(user("bob")));
    }

    #[test]
    fn a_reader_sees_public_likers_they_do_not_block_and_always_themselves() {
        let reader = user("ann");
        let public = PrivacySettings::default();
        let private = PrivacySettings {
            likes_visibility: LikesVisibility::Private,
            blocks: 0,
        };
        let blocking = PrivacySettings {
            blocks: 3,
            ..public
        };
        let none = HashSet::new();
        let ann_blocks_bob = HashSet::from(["bob".to_owned()]);
        assert_eq!(sight(&reader, "bob", &public, &none), Sight::Shown);
        assert_eq!(sight(&reader, "bob", &private, &none), Sight::Hidden);
        assert_eq!(
            sight(&reader, "bob", &public, &ann_blocks_bob),
            Sight::Hidden
        );
        assert_eq!(
            sight(&reader, "bob", &blocking, &none),
            Sight::UnlessBlocked
        );
        assert_eq!(
            sight(&reader, "bob", &blocking, &ann_blocks_bob),
            Sight::Hidden
        );
        // A private reader, or one who blocks others, still sees their own like.
        let private_blocking = PrivacySettings {
            likes_visibility: LikesVisibility::Private,
            blocks: 1,
        };
        assert_eq!(
            sight(&reader, "ann", &private_blocking, &none),
            Sight::Shown
        );
    }
}
