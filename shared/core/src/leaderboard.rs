//! The leaderboard's arithmetic: which windows an event scores in, one delta per window and
//! item for a run of events, which board shard an item's score rows live on, and the exact
//! ranking (most likes first, ties by item id).

use std::collections::BTreeMap;

use time::OffsetDateTime;

use crate::namespace::{Namespace, Window as WindowKind};
use crate::pipeline::{sequence_after, user_hash, ReactionEvent, REPLAY_HORIZON_MS};
use crate::reconcile::Period;
use crate::ValidationError;

/// How many items a materialized board holds: the largest `limit` a reader may ask for.
pub const TOP_SIZE: usize = 100;

/// A window's rows are kept this long after it ends (by TTL), then dropped.
pub const DAY_RETENTION_MS: i64 = 2 * DAY_MS;
const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 86_400_000;
const WEEK_MS: i64 = 7 * DAY_MS;
/// 1970-01-01 was a Thursday: the Monday that began its ISO week was three days before.
const FIRST_MONDAY_MS: i64 = -3 * DAY_MS;

/// A leaderboard's window: all time, or one UTC hour, day or ISO week (UTC), each kept as its
/// first millisecond.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Window {
    All,
    Day(i64),
    Hour(i64),
    Week(i64),
}

impl Window {
    /// The day window holding `epoch_ms`.
    pub fn day_of(epoch_ms: i64) -> Self {
        Self::Day(epoch_ms.div_euclid(DAY_MS) * DAY_MS)
    }

    /// The hour window holding `epoch_ms`.
    pub fn hour_of(epoch_ms: i64) -> Self {
        Self::Hour(epoch_ms.div_euclid(HOUR_MS) * HOUR_MS)
    }

    /// The ISO week window (Monday to Sunday, UTC) holding `epoch_ms`.
    pub fn week_of(epoch_ms: i64) -> Self {
        Self::Week((epoch_ms - FIRST_MONDAY_MS).div_euclid(WEEK_MS) * WEEK_MS + FIRST_MONDAY_MS)
    }

    /// The window of `kind` holding `epoch_ms`.
    pub fn of(kind: WindowKind, epoch_ms: i64) -> Self {
        match kind {
            WindowKind::All => Self::All,
            WindowKind::Day => Self::day_of(epoch_ms),
            WindowKind::Hour => Self::hour_of(epoch_ms),
            WindowKind::Week => Self::week_of(epoch_ms),
        }
    }

    /// `window=hour|day|week|all` as a client asks for it: the window holding `now_ms`.
    pub fn parse(raw: &str, now_ms: i64) -> Result<Self, ValidationError> {
        let kind = serde_json::from_value(serde_json::Value::String(raw.to_owned()))
            .map_err(|_| ValidationError::Window(raw.chars().take(32).collect()))?;
        Ok(Self::of(kind, now_ms))
    }

    pub fn kind(&self) -> WindowKind {
        match self {
            Self::All => WindowKind::All,
            Self::Day(_) => WindowKind::Day,
            Self::Hour(_) => WindowKind::Hour,
            Self::Week(_) => WindowKind::Week,
        }
    }

    /// The window as a client names it.
    pub fn name(&self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Day(_) => "day",
            Self::Hour(_) => "hour",
            Self::Week(_) => "week",
        }
    }

    /// The stored key: `all`, `day#2026-12-01`, `hour#2026-12-01T13`, `week#2026-W49`.
    pub fn key(&self) -> String {
        let Some(start) = self.start_ms() else {
            return "all".to_owned();
        };
        let at =
            OffsetDateTime::from_unix_timestamp(start / 1000).unwrap_or(OffsetDateTime::UNIX_EPOCH);
        match self {
            Self::All => unreachable!("all has no start"),
            Self::Day(_) => format!("day#{}", at.date()),
            Self::Hour(_) => format!("hour#{}T{:02}", at.date(), at.hour()),
            Self::Week(_) => {
                let (year, week, _) = at.to_iso_week_date();
                format!("week#{year}-W{week:02}")
            }
        }
    }

    /// The window a stored [`Self::key`] names.
    pub fn parse_key(key: &str) -> Option<Self> {
        use time::macros::format_description;
        let (kind, at) = match key.split_once('#') {
            None if key == "all" => return Some(Self::All),
            None => return None,
            Some(split) => split,
        };
        let date = |raw: &str| time::Date::parse(raw, format_description!("[year]-[month]-[day]"));
        let ms = |date: time::Date, hour: u8| {
            let at = date.with_hms(hour, 0, 0).ok()?.assume_utc();
            Some(at.unix_timestamp() * 1000)
        };
        match kind {
            "day" => ms(date(at).ok()?, 0).map(Self::Day),
            "hour" => {
                let (day, hour) = at.split_once('T')?;
                ms(date(day).ok()?, hour.parse().ok()?).map(Self::Hour)
            }
            "week" => {
                let (year, week) = at.split_once("-W")?;
                let monday = time::Date::from_iso_week_date(
                    year.parse().ok()?,
                    week.parse().ok()?,
                    time::Weekday::Monday,
                )
                .ok()?;
                ms(monday, 0).map(Self::Week)
            }
            _ => None,
        }
    }

    /// A window's first millisecond; `None` for `all`.
    pub fn start_ms(&self) -> Option<i64> {
        match self {
            Self::All => None,
            Self::Day(start) | Self::Hour(start) | Self::Week(start) => Some(*start),
        }
    }

    /// The partition key of board shard `shard` of the score rows: `all#7`,
    /// `day#2026-12-01#7`. A window's score rows spread over its shards by item, so no one
    /// key takes every item's writes.
    pub fn board_key(&self, shard: u32) -> String {
        format!("{}#{shard}", self.key())
    }

    /// When a window's rows may be dropped (epoch seconds, as TTL reads it); never for `all`.
    pub fn expires_at_secs(&self) -> Option<i64> {
        let length = match self {
            Self::All => return None,
            Self::Day(_) => DAY_MS,
            Self::Hour(_) => HOUR_MS,
            Self::Week(_) => WEEK_MS,
        };
        self.start_ms()
            .map(|start| (start + length + DAY_RETENTION_MS) / 1000)
    }
}

/// A board: one namespace's window, or (no namespace) a window over every namespace, ranked
/// from the namespaces' own tops.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Board {
    pub namespace: Option<Namespace>,
    pub window: Window,
}

impl Board {
    /// Every namespace's `window`.
    pub fn global(window: Window) -> Self {
        Self {
            namespace: None,
            window,
        }
    }

    /// The board of `item`'s namespace in `window`.
    pub fn of_item(item_id: &str, window: Window) -> Self {
        Self {
            namespace: Some(Namespace::of_prefix(item_id)),
            window,
        }
    }

    /// The stored key: the window's (`all`) for a global board, `<namespace>:<window key>`
    /// (`post:all`, `post:hour#2026-12-01T13`) for a namespace's: a namespace has no `:`.
    pub fn key(&self) -> String {
        match &self.namespace {
            None => self.window.key(),
            Some(namespace) => format!("{}:{}", namespace.as_str(), self.window.key()),
        }
    }

    /// The board a stored [`Self::key`] names.
    pub fn parse_key(key: &str) -> Option<Self> {
        match key.split_once(':') {
            None => Window::parse_key(key).map(Self::global),
            Some((namespace, window)) => Some(Self {
                namespace: Some(Namespace::of_prefix(&format!("{namespace}:"))),
                window: Window::parse_key(window)?,
            }),
        }
    }

    /// The score index's partition of a namespace board's shard `shard`: `post:all#7`.
    pub fn shard_key(&self, shard: u32) -> String {
        format!("{}#{shard}", self.key())
    }

    /// What a score row of `item_id` in the score rows' partition `board_key` ranks under
    /// in the score index: its namespace's board shard.
    pub fn ranked_key(item_id: &str, board_key: &str) -> String {
        format!("{}:{board_key}", Namespace::of_prefix(item_id).as_str())
    }
}

/// The windows each namespace's boards keep besides `all` and `day`, which every namespace
/// keeps (the global boards rank from them): `hour` and `week` where its rules name them.
#[derive(Debug, Clone, Default)]
pub struct KeptWindows(BTreeMap<Namespace, Vec<WindowKind>>);

impl KeptWindows {
    /// Keeps, for each namespace, the windows its rules name.
    pub fn new(named: impl IntoIterator<Item = (Namespace, Vec<WindowKind>)>) -> Self {
        Self(named.into_iter().collect())
    }

    /// The windows an event at `epoch_ms` on `item_id` scores in.
    pub fn at(&self, item_id: &str, epoch_ms: i64) -> Vec<Window> {
        let named = self.0.get(&Namespace::of_prefix(item_id));
        let extra = [WindowKind::Hour, WindowKind::Week]
            .into_iter()
            .filter(|kind| named.is_some_and(|named| named.contains(kind)));
        [WindowKind::All, WindowKind::Day]
            .into_iter()
            .chain(extra)
            .map(|kind| Window::of(kind, epoch_ms))
            .collect()
    }
}

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

/// A shard of the event log as Kinesis lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogShard {
    pub shard_id: String,
    pub parent_shard_id: Option<String>,
    /// The other parent of a shard two merged shards opened.
    pub adjacent_parent_shard_id: Option<String>,
    /// Set once the shard is closed (split or merged): no record comes after it.
    pub ending_sequence_number: Option<String>,
    /// The lowest hash key the shard takes: a record put with it as its explicit hash key
    /// lands on this shard.
    pub starting_hash_key: String,
}

impl LogShard {
    /// The shards a reshard closed to open this one: none, one (a split), two (a merge).
    pub fn parents(&self) -> impl Iterator<Item = &str> {
        self.parent_shard_id
            .iter()
            .chain(&self.adjacent_parent_shard_id)
            .map(String::as_str)
    }
}

/// Where the leaderboard's consumer is on one log shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogProgress {
    pub shard_id: String,
    /// The sequence number of the last record applied.
    pub through_seq: Option<String>,
    /// The arrival on the log of the last record applied.
    pub applied_through_ms: i64,
}

/// The boards' `as_of`: the lowest arrival time applied over the log's shards, so every
/// record that arrived before it on any shard is applied. It leaves out a closed shard that
/// is done with: read to its ending sequence number, or continued by a child that has
/// carried records (Lambda reads a parent to its end before its children); without that, a
/// shard closed by a reshard would hold `as_of` at the split for ever. A shard not listed
/// (expired with its records) is left out too.
///
/// A listed shard without progress (a child of a reshard not read yet, a shard that has
/// carried nothing) has records nobody applied, each arrived after it opened: it holds
/// `as_of` at its start, which the log does not say but its parents' progress bounds, since
/// it opened when they closed, after every record on them arrived ([`log_shard_start`]);
/// where no ancestor's progress is known, the log's own creation (`log_opened_ms`) bounds
/// it. The refresher's heartbeat gives such a shard progress within seconds.
pub fn board_as_of(
    shards: &[LogShard],
    progress: &[LogProgress],
    log_opened_ms: i64,
) -> Option<i64> {
    let progress_of = |id: &str| progress.iter().find(|p| p.shard_id == id);
    let continued = |id: &str| {
        shards
            .iter()
            .any(|child| child.parents().any(|p| p == id) && progress_of(&child.shard_id).is_some())
    };
    let done = |p: &LogProgress| {
        let Some(shard) = shards.iter().find(|s| s.shard_id == p.shard_id) else {
            return true;
        };
        let Some(end) = &shard.ending_sequence_number else {
            return false;
        };
        let read_to_end = p
            .through_seq
            .as_deref()
            .is_some_and(|through| !sequence_after(end, through));
        read_to_end || continued(&shard.shard_id)
    };
    let mut held = Vec::new();
    for shard in shards {
        if progress_of(&shard.shard_id).is_some()
            || (shard.ending_sequence_number.is_some() && continued(&shard.shard_id))
        {
            continue;
        }
        held.push(log_shard_start(
            shards,
            progress,
            log_opened_ms,
            &shard.shard_id,
        ));
    }
    progress
        .iter()
        .filter(|p| !done(p))
        .map(|p| p.applied_through_ms)
        .chain(held)
        .min()
}

/// A time no record of log shard `id` arrived before, as far as the shards' progress says:
/// the latest arrival applied on one of its parents (each closed as it opened, so every
/// record on them arrived before any on it), or, for a parent without progress, that
/// parent's own start; for a shard without parents, or none the log still lists, the log's
/// creation (`log_opened_ms`), before which nothing arrived.
pub fn log_shard_start(
    shards: &[LogShard],
    progress: &[LogProgress],
    log_opened_ms: i64,
    id: &str,
) -> i64 {
    // Reshards form a graph without cycles; the bound only guards a corrupt listing.
    fn start(
        shards: &[LogShard],
        progress: &[LogProgress],
        opened: i64,
        id: &str,
        depth: usize,
    ) -> i64 {
        let Some(shard) = shards.iter().find(|s| s.shard_id == id) else {
            return opened;
        };
        if depth > shards.len() {
            return opened;
        }
        shard
            .parents()
            .map(
                |parent| match progress.iter().find(|p| p.shard_id == parent) {
                    Some(p) => p.applied_through_ms,
                    None => start(shards, progress, opened, parent, depth + 1),
                },
            )
            .fold(opened, i64::max)
    }
    start(shards, progress, log_opened_ms, id, 0)
}

/// The log shards whose progress is no longer needed: not listed by the log (a closed shard
/// is listed until its records expire), and whose last record applied arrived more than
/// [`REPLAY_HORIZON_MS`] ago, past any retention the log keeps, so no delivery can come from
/// them again. Their progress rows, and the intent numbers their consumers left on score
/// rows, can go.
pub fn expired_log_shards<'p>(
    shards: &[LogShard],
    progress: &'p [LogProgress],
    now_ms: i64,
) -> Vec<&'p LogProgress> {
    progress
        .iter()
        .filter(|p| !shards.iter().any(|s| s.shard_id == p.shard_id))
        .filter(|p| p.applied_through_ms < now_ms - REPLAY_HORIZON_MS)
        .collect()
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
    const HOUR: Period = Period {
        length_ms: 3_600_000,
        uncertainty_ms: 60_000,
    };

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
        assert_eq!(Window::day_of(DEC_1).board_key(7), "day#2026-12-01#7");
        assert_eq!(Window::All.board_key(0), "all#0");
        let end_of_dec_3 = 1_796_342_400; // 2026-12-04T00:00:00Z
        assert_eq!(Window::day_of(DEC_1).expires_at_secs(), Some(end_of_dec_3));
        assert_eq!(Window::All.expires_at_secs(), None);
    }

    #[test]
    fn hours_and_iso_weeks_are_utc_and_their_keys_read_back() {
        let midnight = Window::day_of(DEC_1).start_ms().unwrap();
        let at = midnight + 13 * 3_600_000 + 59 * 60_000; // 2026-12-01T13:59Z, a Tuesday
        assert_eq!(Window::hour_of(at).key(), "hour#2026-12-01T13");
        assert_eq!(Window::week_of(at).key(), "week#2026-W49");
        let monday = midnight - DAY_MS;
        assert_eq!(Window::week_of(at), Window::Week(monday));
        assert_eq!(Window::week_of(monday - 1).key(), "week#2026-W48");
        // 2027-01-01 is in the ISO week of 2026's last Monday.
        assert_eq!(Window::week_of(1_798_761_600_000).key(), "week#2026-W53");
        let end_of_hour_and_two_days =
            (Window::hour_of(at).start_ms().unwrap() + 3_600_000) / 1000 + 2 * 86_400;
        assert_eq!(
            Window::hour_of(at).expires_at_secs(),
            Some(end_of_hour_and_two_days)
        );
        for window in [
            Window::All,
            Window::day_of(at),
            Window::hour_of(at),
            Window::week_of(at),
            Window::week_of(1_798_761_600_000),
        ] {
            assert_eq!(Window::parse_key(&window.key()), Some(window.clone()));
            let board = Board::of_item("post:1", window.clone());
            assert_eq!(Board::parse_key(&board.key()), Some(board));
            assert_eq!(Board::parse_key(&window.key()), Some(Board::global(window)));
        }
        assert_eq!(Board::of_item("x", Window::All).key(), "default:all");
        assert_eq!(Board::ranked_key("post:1", "all#7"), "post:all#7");
        assert_eq!(Window::parse("week", at).unwrap(), Window::week_of(at));
        assert!(Window::parse("month", at).is_err());
    }

    #[test]
    fn a_namespace_scores_in_the_hour_and_week_its_rules_keep() {
        use crate::namespace::Window as Kind;
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

    #[test]
    fn windows_are_validated() {
        assert_eq!(Window::parse("all", DEC_1), Ok(Window::All));
        assert_eq!(Window::parse("day", DEC_1), Ok(Window::day_of(DEC_1)));
        assert_eq!(Window::parse("hour", DEC_1), Ok(Window::hour_of(DEC_1)));
        assert!(Window::parse("month", DEC_1).is_err());
        assert!(Window::parse("\"all\"", DEC_1).is_err());
    }

    fn log_shard(id: &str, parent: Option<&str>, end: Option<&str>) -> LogShard {
        LogShard {
            shard_id: id.into(),
            parent_shard_id: parent.map(str::to_owned),
            adjacent_parent_shard_id: None,
            ending_sequence_number: end.map(str::to_owned),
            starting_hash_key: "0".into(),
        }
    }

    /// When the log was created, before any record on it.
    const OPENED: i64 = 500;

    fn at(id: &str, through: &str, applied_ms: i64) -> LogProgress {
        LogProgress {
            shard_id: id.into(),
            through_seq: Some(through.into()),
            applied_through_ms: applied_ms,
        }
    }

    #[test]
    fn a_split_parent_stops_holding_the_boards_as_of_once_it_is_done_with() {
        let shards = [
            log_shard("p", None, Some("900")),
            log_shard("c1", Some("p"), None),
            log_shard("c2", Some("p"), None),
            log_shard("q", None, None),
        ];
        // Closed but not read to its end, and no child started: it still holds as_of.
        assert_eq!(
            board_as_of(
                &shards,
                &[at("p", "850", 1_000), at("q", "5", 9_000)],
                OPENED
            ),
            Some(1_000)
        );
        // Read to its ending sequence number (compared as numbers, not text), its children
        // not listed yet.
        assert_eq!(
            board_as_of(
                &[shards[0].clone(), shards[3].clone()],
                &[at("p", "900", 1_000), at("q", "5", 9_000)],
                OPENED
            ),
            Some(9_000)
        );
        // A child carried events: the parent was read to its end before it.
        assert_eq!(
            board_as_of(
                &shards,
                &[
                    at("p", "850", 1_000),
                    at("c1", "1001", 8_000),
                    at("c2", "1000", 7_000),
                    at("q", "5", 9_000)
                ],
                OPENED
            ),
            Some(7_000)
        );
        // An open shard behind still holds it, and a shard the log no longer lists does not.
        assert_eq!(
            board_as_of(
                &shards,
                &[
                    at("q", "5", 9_000),
                    at("gone", "1", 10),
                    at("c1", "1001", 9_500),
                    at("c2", "1000", 9_500)
                ],
                OPENED
            ),
            Some(9_000)
        );
        // Nothing read yet: every record arrived after the log was created.
        assert_eq!(board_as_of(&shards, &[], OPENED), Some(OPENED));
        assert_eq!(board_as_of(&[], &[], OPENED), None);
    }

    #[test]
    fn a_shard_not_read_yet_holds_the_boards_as_of_at_its_parents_last_record() {
        let shards = [
            log_shard("p", None, Some("900")),
            log_shard("c1", Some("p"), None),
            log_shard("c2", Some("p"), None),
            log_shard("q", None, None),
        ];
        // The parent is read to its end and one child scores on: the other child's records
        // all arrived after the parent's last, which is where it holds as_of.
        assert_eq!(
            board_as_of(
                &shards,
                &[
                    at("p", "900", 1_000),
                    at("c2", "1000", 7_000),
                    at("q", "5", 9_000)
                ],
                OPENED
            ),
            Some(1_000)
        );
        // Read to its end, neither child read yet.
        assert_eq!(
            board_as_of(
                &shards,
                &[at("p", "900", 1_000), at("q", "5", 9_000)],
                OPENED
            ),
            Some(1_000)
        );
        // Once each child has progress, they hold it at their own.
        assert_eq!(
            board_as_of(
                &shards,
                &[
                    at("p", "900", 1_000),
                    at("c1", "1001", 8_000),
                    at("c2", "1000", 7_000),
                    at("q", "5", 9_000)
                ],
                OPENED
            ),
            Some(7_000)
        );
        // A shard that never carried a record, with no ancestor's progress: its records
        // arrived after the log was created, which holds as_of until it has progress.
        assert_eq!(
            board_as_of(&shards, &[at("q", "5", 9_000)], OPENED),
            Some(OPENED)
        );
    }

    #[test]
    fn a_grandchild_and_a_merge_child_start_after_their_ancestors_last_records() {
        let mut merged = log_shard("m", Some("c1"), None);
        merged.adjacent_parent_shard_id = Some("c2".into());
        let shards = [
            log_shard("p", None, Some("900")),
            log_shard("c1", Some("p"), Some("1500")),
            log_shard("c2", Some("p"), Some("1600")),
            merged,
            log_shard("g", Some("x"), None),
            log_shard("x", Some("p"), Some("2000")),
        ];
        let progress = [at("p", "900", 1_000), at("c1", "1500", 4_000)];
        // The merge child opened after both its parents' records: the later bound holds.
        assert_eq!(log_shard_start(&shards, &progress, OPENED, "m"), 4_000);
        // A grandchild through a parent without progress: the grandparent's bound.
        assert_eq!(log_shard_start(&shards, &progress, OPENED, "g"), 1_000);
        assert_eq!(log_shard_start(&shards, &progress, OPENED, "p"), OPENED);
        assert_eq!(board_as_of(&shards, &progress, OPENED), Some(1_000));
    }

    #[test]
    fn a_shard_is_expired_once_unlisted_and_past_every_replay() {
        let now = 10 * REPLAY_HORIZON_MS;
        let shards = [
            log_shard("open", None, None),
            log_shard("closed", None, Some("9")),
        ];
        let old = now - REPLAY_HORIZON_MS - 1;
        let progress = [
            at("open", "5", old),
            at("closed", "9", old),
            at("gone", "7", old),
            // Unlisted but recent: a listing that lags is never taken for an expiry.
            at("just-gone", "7", now - 1_000),
        ];
        let expired: Vec<_> = expired_log_shards(&shards, &progress, now)
            .into_iter()
            .map(|p| p.shard_id.as_str())
            .collect();
        assert_eq!(expired, ["gone"]);
    }
}
