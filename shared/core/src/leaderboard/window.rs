//! The leaderboard's windows and boards: the UTC hour, day and ISO week an event falls in
//! (or all time), their stored keys, a board as a namespace's window or a window over every
//! namespace, and which windows each namespace keeps.

use std::collections::BTreeMap;

use time::OffsetDateTime;

use crate::namespace::{Namespace, Window as WindowKind};
use crate::ValidationError;

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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn windows_are_validated() {
        assert_eq!(Window::parse("all", DEC_1), Ok(Window::All));
        assert_eq!(Window::parse("day", DEC_1), Ok(Window::day_of(DEC_1)));
        assert_eq!(Window::parse("hour", DEC_1), Ok(Window::hour_of(DEC_1)));
        assert!(Window::parse("month", DEC_1).is_err());
        assert!(Window::parse("\"all\"", DEC_1).is_err());
    }
}
