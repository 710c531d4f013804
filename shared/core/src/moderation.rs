//! Moderation: what a moderator may ask (retract a user's reactions, optionally suspending
//! their writes; lift a suspension; remove an item), the retraction job's decisions, and the
//! record every action leaves on the event log. A retraction writes NONE to each reaction
//! through the ordinary pipeline, so counts, likers, the leaderboard and liked lists drop it
//! as they drop an unlike; removing an item is a retraction of every reaction to it.

use serde::{Deserialize, Serialize};

use crate::jobs::{JobId, JobStatus};
use crate::limit::LEASE_MS;
use crate::{ItemId, UserId, ValidationError};

/// The OAuth scope a token must hold for every moderation route (`AuthorizationScopes` in
/// the template; API Gateway refuses a token without it with 403).
pub const MODERATE_SCOPE: &str = "likes/moderate";
/// A reason is kept on every reaction row it retracts, which stays under 1 KB with it.
pub const REASON_MAX_CHARS: usize = 200;
/// A write an API function admitted has landed within this of its admission, or never will:
/// Lambda stops the function at its `Timeout` (6 s, template.yaml's Globals, which a test
/// holds under this), and its last request in flight reaches DynamoDB within the second left.
pub const WRITES_LAND_WITHIN_MS: i64 = 7_000;
/// A suspended user's write may still be admitted from a lease its container took before the
/// suspension ([`LEASE_MS`]) and land as late as a write can: a retraction with suspension
/// does not finish before its last sweep starts this long after the request.
pub const SUSPENSION_SETTLE_MS: i64 = LEASE_MS + WRITES_LAND_WITHIN_MS;
/// How long a container trusts what it read of an item's removal; a removal is answered
/// only after this, so from its answer on every write of the item is refused.
pub const REMOVAL_CACHE_MS: i64 = 1_000;
/// Every write of a removed item admitted before the removal has landed this long after the
/// request. The removal finds reactions in the likers entries, which the event log feeds
/// behind the writes (seconds, or much more when the log lags), so it also waits for the
/// item's counts to hold nothing ([`counted_out`]).
pub const REMOVAL_SETTLE_MS: i64 = REMOVAL_CACHE_MS + WRITES_LAND_WITHIN_MS;

/// Why a moderator acted: 1–200 characters, no control characters, kept as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason(String);

impl Reason {
    pub fn parse(raw: &str) -> Result<Self, ValidationError> {
        let chars = raw.chars().count();
        if raw.trim().is_empty() || chars > REASON_MAX_CHARS || raw.chars().any(char::is_control) {
            return Err(ValidationError::Reason(chars));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

/// A retraction job as its row holds it: of a user's reactions (all, or one item's), or of
/// every reaction to an item (the item's removal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetractionJob {
    pub id: JobId,
    /// Whose reactions are retracted; `None` for an item's removal.
    pub user_id: Option<String>,
    /// Only this item's reaction (with a user), or the removed item (without one).
    pub item_id: Option<ItemId>,
    pub reason: String,
    /// The user's writes are refused from the request on, until the suspension is lifted.
    pub suspend: bool,
    /// The moderator (their token's `sub`) and when they asked.
    pub requested_by: String,
    pub requested_at_ms: i64,
    pub status: JobStatus,
    /// Bumped by every checkpoint; a checkpoint applies only at the step it read.
    pub step: u64,
    /// Reactions this job turned to NONE, in committed slices.
    pub reactions_retracted: u64,
    /// The keys the next slice retracts (the user's item ids, or the item's likers entries,
    /// which name their users); empty: sweep from the start.
    pub planned: Vec<String>,
}

/// Whose reactions a retraction takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// A user's: every one, or only the one to an item.
    User {
        user_id: &'a str,
        item_id: Option<&'a ItemId>,
    },
    /// Every user's reaction to a removed item.
    Item { item_id: &'a ItemId },
}

impl RetractionJob {
    /// A job `by` a moderator asks for at `now_ms` (`random` tells two requests of one
    /// millisecond apart): of `user`'s reactions (only `item`'s when given), or with no user
    /// of every reaction to `item`, which is removed.
    pub fn requested(
        user: Option<&UserId>,
        item: Option<ItemId>,
        reason: Reason,
        suspend: bool,
        by: &UserId,
        now_ms: i64,
        random: u64,
    ) -> Self {
        Self {
            id: JobId::new(now_ms, random),
            user_id: user.map(|user| user.as_str().to_owned()),
            item_id: item,
            reason: reason.into_string(),
            suspend,
            requested_by: by.as_str().to_owned(),
            requested_at_ms: now_ms,
            status: JobStatus::Running,
            step: 0,
            reactions_retracted: 0,
            planned: Vec::new(),
        }
    }

    pub fn target(&self) -> Target<'_> {
        match (&self.user_id, &self.item_id) {
            (Some(user_id), item_id) => Target::User {
                user_id,
                item_id: item_id.as_ref(),
            },
            (None, Some(item_id)) => Target::Item { item_id },
            (None, None) => unreachable!("a retraction job names a user or an item"),
        }
    }

    /// The cause its flips carry.
    pub fn cause(&self) -> Cause {
        match self.target() {
            Target::User { .. } => Cause::Retracted,
            Target::Item { .. } => Cause::Removed,
        }
    }

    /// Rows written after this time are not retracted: without a suspension, what the user
    /// sets after the request is theirs. A suspended user writes nothing after it (nor does
    /// anyone to a removed item), and a write admitted just before it is retracted too.
    pub fn cut_ms(&self) -> Option<i64> {
        match self.target() {
            Target::User { .. } if !self.suspend => Some(self.requested_at_ms),
            _ => None,
        }
    }

    /// From when a sweep from the start that finds nothing ends the job: a write that can
    /// still land (a leased write of a suspended user), or a reaction the likers model has
    /// not shown yet (a removal's), is found by a sweep that starts after it.
    pub fn settled_at_ms(&self) -> i64 {
        let settle = match self.target() {
            Target::Item { .. } => REMOVAL_SETTLE_MS,
            Target::User { .. } if self.suspend => SUSPENSION_SETTLE_MS,
            Target::User { .. } => 0,
        };
        self.requested_at_ms + settle
    }

    /// Whether a sweep from the start that found nothing, starting at `now_ms`, ends the job
    /// (a removal's also needs its item [`counted_out`]).
    pub fn may_finish(&self, now_ms: i64) -> bool {
        now_ms >= self.settled_at_ms()
    }
}

/// Whether a removal that found nothing in the likers entries has truly nothing left: the
/// item's counts hold no reaction (`likes` and `dislikes`, summed as stored, not clamped) as
/// of a time past the job's settle (`as_of_ms` against `settled_at_ms`). Every reaction to
/// the item landed before the settle, so by then each one is counted, and each flip is
/// counted exactly once; a user's flips alternate, so each user adds a like (or a dislike)
/// to the sum until their retraction is counted too. Counts of zero that late therefore
/// leave no reaction the log has not shown yet, however far it lags; anything else, and the
/// job sweeps again. (A count that drifted keeps the job sweeping until reconciliation puts
/// it right.)
pub fn counted_out(as_of_ms: Option<i64>, settled_at_ms: i64, likes: i64, dislikes: i64) -> bool {
    as_of_ms.is_some_and(|as_of| as_of >= settled_at_ms) && likes == 0 && dislikes == 0
}

/// What a moderator did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModerationAction {
    /// Retract a user's reactions (one item's, or all), perhaps suspending their writes.
    Retract,
    /// Let a suspended user write again.
    LiftSuspension,
    /// Remove an item: every reaction to it retracted, and its writes and reads refused.
    RemoveItem,
}

/// Why a reaction flipped when its user did not flip it: carried by the row the moderation
/// job wrote, and by its event on the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// A moderator retracted the user's reactions.
    Retracted,
    /// A moderator removed the item.
    Removed,
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Retracted => "retracted",
            Self::Removed => "removed",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        [Self::Retracted, Self::Removed]
            .into_iter()
            .find(|cause| cause.as_str() == raw)
    }
}

/// A moderation action on the event log: who did it, why, when, to whom.
/// `{"moderation": {"moderation_id", "action", "user_id", "item_id"?, "reason"?, "suspend"?,
/// "by", "at_ms"}}`; consumers that count reactions step over it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModerationEvent {
    /// The job or action id: the same on every put of this action, so readers deduplicate.
    pub moderation_id: String,
    pub action: ModerationAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    pub by: String,
    pub at_ms: i64,
}

impl ModerationEvent {
    /// The event of a retraction's (or a removal's) request.
    pub fn retraction(job: &RetractionJob) -> Self {
        let (action, suspend) = match job.target() {
            Target::User { .. } => (ModerationAction::Retract, Some(job.suspend)),
            Target::Item { .. } => (ModerationAction::RemoveItem, None),
        };
        Self {
            moderation_id: job.id.as_str().to_owned(),
            action,
            user_id: job.user_id.clone(),
            item_id: job.item_id.as_ref().map(|item| item.as_str().to_owned()),
            reason: Some(job.reason.clone()),
            suspend,
            by: job.requested_by.clone(),
            at_ms: job.requested_at_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(suspend: bool) -> RetractionJob {
        RetractionJob {
            id: JobId::new(1_000, 1),
            user_id: Some("bot".into()),
            item_id: None,
            reason: "bought likes".into(),
            suspend,
            requested_by: "mod".into(),
            requested_at_ms: 1_000,
            status: JobStatus::Running,
            step: 0,
            reactions_retracted: 0,
            planned: Vec::new(),
        }
    }

    #[test]
    fn reasons_are_short_printable_text() {
        assert_eq!(Reason::parse("bot ring").unwrap().as_str(), "bot ring");
        assert!(Reason::parse(&"é".repeat(REASON_MAX_CHARS)).is_ok());
        for bad in ["", "   ", "line\nbreak", &"x".repeat(REASON_MAX_CHARS + 1)] {
            assert!(Reason::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_suspension_retracts_everything_and_waits_out_the_leases() {
        let plain = job(false);
        assert_eq!(plain.cut_ms(), Some(1_000));
        assert!(plain.may_finish(1_000));
        let suspended = job(true);
        assert_eq!(suspended.cut_ms(), None);
        assert!(!suspended.may_finish(1_000 + SUSPENSION_SETTLE_MS - 1));
        assert!(suspended.may_finish(1_000 + SUSPENSION_SETTLE_MS));
        assert_eq!(suspended.cause(), Cause::Retracted);
    }

    #[test]
    fn a_removal_ends_only_on_counts_of_zero_past_its_settle() {
        assert!(counted_out(Some(5_000), 5_000, 0, 0));
        assert!(
            !counted_out(Some(4_999), 5_000, 0, 0),
            "as_of before the settle"
        );
        assert!(!counted_out(None, 5_000, 0, 0), "as_of unknown");
        assert!(
            !counted_out(Some(9_000), 5_000, 1, 0),
            "a like not swept yet"
        );
        assert!(
            !counted_out(Some(9_000), 5_000, 0, 2),
            "dislikes not swept yet"
        );
        assert!(!counted_out(Some(9_000), 5_000, -1, 0), "a drifted count");
    }

    #[test]
    fn a_removal_retracts_every_reaction_to_the_item_once_its_reactors_are_listed() {
        let removal = RetractionJob {
            user_id: None,
            item_id: Some(ItemId::parse("game:1").unwrap()),
            ..job(false)
        };
        assert!(
            matches!(removal.target(), Target::Item { item_id } if item_id.as_str() == "game:1")
        );
        assert_eq!((removal.cut_ms(), removal.cause()), (None, Cause::Removed));
        assert!(!removal.may_finish(1_000 + REMOVAL_SETTLE_MS - 1));
        assert!(removal.may_finish(1_000 + REMOVAL_SETTLE_MS));
        let event = ModerationEvent::retraction(&removal);
        assert_eq!(event.action, ModerationAction::RemoveItem);
        assert_eq!((event.user_id, event.suspend), (None, None));
        for cause in [Cause::Retracted, Cause::Removed] {
            assert_eq!(Cause::parse(cause.as_str()), Some(cause));
        }
    }

    #[test]
    fn a_retraction_event_names_who_why_and_when() {
        let event = ModerationEvent::retraction(&job(true));
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["action"], "retract");
        assert_eq!(json["by"], "mod");
        assert_eq!(json["reason"], "bought likes");
        assert_eq!(json["suspend"], true);
        assert!(json.get("item_id").is_none());
        let back: ModerationEvent = serde_json::from_value(json).unwrap();
        assert_eq!(back, event);
    }
}
