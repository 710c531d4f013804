//! The leaderboard's arithmetic: which windows an event scores in, one delta per window and
//! item for a run of events, and the exact ranking (most likes first, ties by item id).

use std::collections::BTreeMap;

use time::OffsetDateTime;

use crate::pipeline::ReactionEvent;
use crate::ValidationError;

/// Day windows are kept this long after their day ends (by TTL), then dropped.
pub const DAY_RETENTION_MS: i64 = 2 * DAY_MS;
const DAY_MS: i64 = 86_400_000;

/// A leaderboard: all-time, or one UTC day.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Window {
    All,
    /// The UTC day holding this epoch-millis time, kept as its first millisecond.
    Day(i64),
}

impl Window {
    /// The day window holding `epoch_ms`.
    pub fn day_of(epoch_ms: i64) -> Self {
        Self::Day(epoch_ms.div_euclid(DAY_MS) * DAY_MS)
    }

    /// `window=all|day` as a client asks for it; `day` is the current UTC day at `now_ms`.
    pub fn parse(raw: &str, now_ms: i64) -> Result<Self, ValidationError> {
        match raw {
            "all" => Ok(Self::All),
            "day" => Ok(Self::day_of(now_ms)),
            other => Err(ValidationError::Window(other.chars().take(32).collect())),
        }
    }

    /// The window as a client names it.
    pub fn name(&self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Day(_) => "day",
        }
    }

    /// The stored key: `all`, or `day#2026-12-01`.
    pub fn key(&self) -> String {
        match self {
            Self::All => "all".to_owned(),
            Self::Day(start) => {
                let date = OffsetDateTime::from_unix_timestamp(start / 1000)
                    .map(|t| t.date())
                    .unwrap_or(time::Date::MIN);
                format!("day#{date}")
            }
        }
    }

    /// When a window's rows may be dropped (epoch seconds, as TTL reads it); never for `all`.
    pub fn expires_at_secs(&self) -> Option<i64> {
        match self {
            Self::All => None,
            Self::Day(start) => Some((start + DAY_MS + DAY_RETENTION_MS) / 1000),
        }
    }
}

/// The net like deltas a run of events adds, one per window and item: every event scores in
/// `all` and in the UTC day of its event time. Events that add no like (a dislike flip
/// between NONE and DISLIKE) add nothing.
pub fn score_deltas<'a>(
    events: impl IntoIterator<Item = &'a ReactionEvent>,
) -> BTreeMap<(Window, String), i64> {
    let mut deltas = BTreeMap::new();
    for event in events {
        if event.like_delta == 0 {
            continue;
        }
        for window in [Window::All, Window::day_of(event.event_time_ms)] {
            *deltas.entry((window, event.item_id.clone())).or_insert(0) += event.like_delta;
        }
    }
    deltas
}

/// One item's place on a board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub item_id: String,
    pub like_count: i64,
}

/// The top `limit` of `entries` that have likes: most first, ties by item id ascending.
/// `entries` must hold every item scoring at least as much as the `limit`-th (a reader of a
/// score-sorted index reads on past the `limit`-th while scores tie).
pub fn rank(mut entries: Vec<Entry>, limit: usize) -> Vec<Entry> {
    entries.retain(|e| e.like_count > 0);
    entries.sort_by(|a, b| {
        b.like_count
            .cmp(&a.like_count)
            .then_with(|| a.item_id.cmp(&b.item_id))
    });
    entries.truncate(limit);
    entries
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ReactionState::{Dislike, Like, None as Neutral};

    fn event(user: &str, item: &str, like_delta: i64, event_time_ms: i64) -> ReactionEvent {
        ReactionEvent {
            event_id: format!("{user}#{item}#1"),
            user_id: user.into(),
            item_id: item.into(),
            op_id: 1,
            old_state: Neutral,
            new_state: if like_delta > 0 { Like } else { Dislike },
            like_delta,
            dislike_delta: 0,
            event_time_ms,
            source_sequence_number: "1".into(),
            row_created_ms: 0,
        }
    }

    // 2026-12-01T10:00:00Z
    const DEC_1: i64 = 1_796_119_200_000;

    #[test]
    fn days_are_utc_days_and_expire_two_days_after_they_end() {
        assert_eq!(Window::day_of(DEC_1).key(), "day#2026-12-01");
        assert_eq!(
            Window::day_of(DEC_1 + 14 * 3_600_000 - 1).key(),
            "day#2026-12-01"
        );
        assert_eq!(
            Window::day_of(DEC_1 + 14 * 3_600_000).key(),
            "day#2026-12-02"
        );
        assert_eq!(Window::All.key(), "all");
        let end_of_dec_3 = 1_796_342_400; // 2026-12-04T00:00:00Z
        assert_eq!(Window::day_of(DEC_1).expires_at_secs(), Some(end_of_dec_3));
        assert_eq!(Window::All.expires_at_secs(), None);
    }

    #[test]
    fn a_run_of_events_adds_one_delta_per_window_and_item() {
        let yesterday = DEC_1 - DAY_MS;
        let events = [
            event("u1", "a", 1, DEC_1),
            event("u2", "a", 1, DEC_1),
            event("u3", "a", -1, DEC_1),
            event("u1", "b", 1, yesterday),
            event("u1", "c", 0, DEC_1),
        ];
        let deltas = score_deltas(&events);
        assert_eq!(deltas[&(Window::All, "a".into())], 1);
        assert_eq!(deltas[&(Window::day_of(DEC_1), "a".into())], 1);
        assert_eq!(deltas[&(Window::day_of(yesterday), "b".into())], 1);
        assert_eq!(deltas.len(), 4, "c added no like");
    }

    #[test]
    fn ties_break_by_item_id_and_only_liked_items_rank() {
        let entry = |item: &str, like_count| Entry {
            item_id: item.into(),
            like_count,
        };
        let ranked = rank(
            vec![
                entry("b", 2),
                entry("z", 0),
                entry("c", 5),
                entry("a", 2),
                entry("d", -1),
            ],
            10,
        );
        assert_eq!(ranked, [entry("c", 5), entry("a", 2), entry("b", 2)]);
        assert_eq!(rank(vec![entry("b", 2), entry("a", 2)], 1), [entry("a", 2)]);
    }

    #[test]
    fn windows_are_validated() {
        assert_eq!(Window::parse("all", DEC_1), Ok(Window::All));
        assert_eq!(Window::parse("day", DEC_1), Ok(Window::day_of(DEC_1)));
        assert!(Window::parse("week", DEC_1).is_err());
    }
}
