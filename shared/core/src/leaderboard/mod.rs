//! The leaderboard's arithmetic: which windows an event scores in, one delta per window and
//! item for a run of events, which board shard an item's score rows live on, and the exact
//! ranking (most likes first, ties by item id).

mod log;
mod window;

use std::collections::BTreeMap;

pub use log::{board_as_of, expired_log_shards, log_shard_start, LogProgress, LogShard};
pub use window::{Board, KeptWindows, Window, DAY_RETENTION_MS};

use crate::pipeline::{user_hash, ReactionEvent};
use crate::reconcile::Period;

/// How many items a materialized board holds: the largest `limit` a reader may ask for.
pub const TOP_SIZE: usize = 100;

/// What a run of events adds to one score row: its net likes and, on the all-time board
/// (which reconciliation repairs), the same split by the epoch each flip was written in and
/// the flips near each cut, as count rows keep them (see [`crate::reconcile`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScoreDelta {
    pub total: i64,
    pub by_epoch: BTreeMap<i64, i64>,
    pub near_cuts: BTreeMap<i64, u64>,
}

impl ScoreDelta {
    /// Nothing to write: no like added, and no flip near a cut.
    pub fn is_empty(&self) -> bool {
        self.total == 0 && self.near_cuts.is_empty()
    }
}

/// The net like deltas a run of events adds, one per window and item: every event scores in
/// `all` and in the windows of its event time its namespace keeps (`kept`). Events that add
/// no like (a dislike flip between NONE and DISLIKE) add nothing. An item whose likes in the
/// run cancel out still writes its flips near a cut on `all`.
pub fn score_deltas<'a>(
    events: impl IntoIterator<Item = &'a ReactionEvent>,
    period: Period,
    kept: &KeptWindows,
) -> BTreeMap<(Window, String), ScoreDelta> {
    let mut deltas: BTreeMap<(Window, String), ScoreDelta> = BTreeMap::new();
    for event in events {
        if event.like_delta == 0 {
            continue;
        }
        for window in kept.at(&event.item_id, event.event_time_ms) {
            let delta = deltas
                .entry((window.clone(), event.item_id.clone()))
                .or_default();
            delta.total += event.like_delta;
            if window != Window::All {
                continue;
            }
            *delta
                .by_epoch
                .entry(period.epoch(event.event_time_ms))
                .or_default() += event.like_delta;
            if let Some(cut) = period.near_cut(event.event_time_ms) {
                *delta.near_cuts.entry(cut).or_default() += 1;
            }
        }
    }
    for delta in deltas.values_mut() {
        delta.by_epoch.retain(|_, d| *d != 0);
    }
    deltas.retain(|_, delta| !delta.is_empty());
    deltas
}

/// The most epochs one run's events may span: its all-time score rows carry a subtotal for
/// each, and an update expression must stay bounded by construction.
pub const MAX_RUN_EPOCHS: usize = 16;

/// The board shard (`0..shards`) an item's score rows live on, in every window: the same
/// stable SHA-256 hash that spreads users over the event log's keys.
pub fn item_shard(item_id: &str, shards: u32) -> u32 {
    user_hash(item_id) % shards.max(1)
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
            liked_at_ms: None,
            cause: None,
            reason: None,
            moderation_id: None,
        }
    }

    // 2026-12-01T10:00:00Z
    const DEC_1: i64 = 1_796_119_200_000;
    const DAY_MS: i64 = 86_400_000;
    const HOUR: Period = Period {
        length_ms: 3_600_000,
        uncertainty_ms: 60_000,
    };

    #[test]
    fn a_namespace_scores_in_the_hour_and_week_its_rules_keep() {
        use crate::namespace::{Namespace, Window as Kind};
        let kept = KeptWindows::new([(
            Namespace::of_prefix("clip:"),
            vec![Kind::Hour, Kind::Week, Kind::All],
        )]);
        let events = [
            event("u1", "clip:1", 1, DEC_1),
            event("u1", "post:1", 1, DEC_1),
        ];
        let deltas = score_deltas(&events, HOUR, &kept);
        let windows = |item: &str| -> Vec<Window> {
            deltas
                .keys()
                .filter(|(_, i)| i == item)
                .map(|(w, _)| w.clone())
                .collect()
        };
        assert_eq!(
            windows("clip:1"),
            [
                Window::All,
                Window::day_of(DEC_1),
                Window::hour_of(DEC_1),
                Window::week_of(DEC_1)
            ]
        );
        assert_eq!(windows("post:1"), [Window::All, Window::day_of(DEC_1)]);
        assert!(deltas[&(Window::hour_of(DEC_1), "clip:1".to_owned())]
            .by_epoch
            .is_empty());
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
        let deltas = score_deltas(&events, HOUR, &KeptWindows::default());
        let total = |window: Window, item: &str| deltas[&(window, item.to_owned())].total;
        assert_eq!(total(Window::All, "a"), 1);
        assert_eq!(total(Window::day_of(DEC_1), "a"), 1);
        assert_eq!(total(Window::day_of(yesterday), "b"), 1);
        assert_eq!(deltas.len(), 4, "c added no like");
        // All-time rows keep the split by epoch that reconciliation reads; day rows do not.
        let all_b = &deltas[&(Window::All, "b".to_owned())];
        assert_eq!(all_b.by_epoch, BTreeMap::from([(HOUR.epoch(yesterday), 1)]));
        assert!(deltas[&(Window::day_of(DEC_1), "a".to_owned())]
            .by_epoch
            .is_empty());
    }

    #[test]
    fn flips_near_a_cut_are_kept_even_when_they_cancel_out() {
        let cut = HOUR.cut_at(DEC_1) + HOUR.length_ms;
        let events = [
            event("u1", "a", 1, cut - 1_000),
            event("u1", "a", -1, cut + 1_000),
        ];
        let deltas = score_deltas(&events, HOUR, &KeptWindows::default());
        let all = &deltas[&(Window::All, "a".to_owned())];
        assert_eq!(all.total, 0);
        assert_eq!(
            all.by_epoch,
            BTreeMap::from([(HOUR.epoch(cut) - 1, 1), (HOUR.epoch(cut), -1)])
        );
        assert_eq!(all.near_cuts, BTreeMap::from([(HOUR.epoch(cut), 2)]));
        assert_eq!(deltas.len(), 1, "the day row nets to nothing");
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
    fn items_spread_over_every_board_shard() {
        let mut seen = [0u32; 16];
        for n in 0..1_600 {
            let shard = item_shard(&format!("game:{n}"), 16);
            seen[shard as usize] += 1;
            assert_eq!(shard, item_shard(&format!("game:{n}"), 16), "stable");
        }
        assert!(seen.iter().all(|n| (50..150).contains(n)), "{seen:?}");
        assert_eq!(item_shard("game:1", 1), 0);
    }
}
