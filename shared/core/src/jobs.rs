//! Paced background jobs over one user's Reactions rows (account erasure, a moderator's
//! retraction): their ids and states, and the sweep every slice of them follows. A job is
//! resumable from its stored state; the rows and the stream trigger are the store's and the
//! workers'.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::ValidationError;

/// Finished jobs are forgotten (TTL) this long after they finished.
pub const DONE_RETENTION_S: i64 = 30 * 24 * 3600;
/// Keys one slice plans at most: they are stored on the job row (each up to 128 bytes, so a
/// row stays far below 400 KB) and written in a few batched calls.
pub const MAX_SLICE_ROWS: u32 = 100;

const MS_DIGITS: usize = 13;
const RANDOM_DIGITS: usize = 16;

/// A job id: `<epoch ms, 13 digits>-<16 hex digits>`, time-ordered.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct JobId(String);

impl JobId {
    /// The id of a job requested at `now_ms`, `random` telling two requests of one
    /// millisecond apart.
    pub fn new(now_ms: i64, random: u64) -> Self {
        Self(format!("{now_ms:0MS_DIGITS$}-{random:0RANDOM_DIGITS$x}"))
    }

    pub fn parse(raw: &str) -> Result<Self, ValidationError> {
        let well_formed = raw.split_once('-').is_some_and(|(ms, random)| {
            ms.len() == MS_DIGITS
                && ms.bytes().all(|b| b.is_ascii_digit())
                && random.len() == RANDOM_DIGITS
                && random
                    .bytes()
                    .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        });
        if !well_formed {
            return Err(ValidationError::JobId(raw.chars().take(64).collect()));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    Running,
    Done,
}

impl JobStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Done => "done",
        }
    }
}

/// What a slice does once its planned rows are written and the page after them was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SliceEnd {
    /// Plan `next` for the following slice (empty: sweep again from the start).
    Continue { next: Vec<String> },
    /// A sweep from the start found nothing: every row is done.
    Done,
}

/// Where a slice's Query starts: after the last `planned` key, or at the start of the
/// partition when nothing was planned.
pub fn query_after(planned: &[String]) -> Option<&str> {
    planned.last().map(String::as_str)
}

/// A slice's decision from the page read after its `planned` keys. A job stops only when a
/// Query from the start finds nothing, so a row written behind the sweep (the user reacting
/// while the job runs) is found by the next sweep.
pub fn slice_end(planned: &[String], page: Vec<String>) -> SliceEnd {
    if planned.is_empty() && page.is_empty() {
        SliceEnd::Done
    } else {
        SliceEnd::Continue { next: page }
    }
}

/// Rows one slice plans at `rows_per_second`: about a second's worth, at most
/// [`MAX_SLICE_ROWS`].
pub fn slice_rows(rows_per_second: u32) -> u32 {
    rows_per_second.clamp(1, MAX_SLICE_ROWS)
}

/// How long writing `rows` rows must take at `rows_per_second`: a slice that was quicker
/// waits out the rest before it checkpoints (and so before the next slice is triggered).
pub fn paced(rows: usize, rows_per_second: u32) -> Duration {
    Duration::from_millis(rows as u64 * 1000 / u64::from(rows_per_second.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(planned: &[&str]) -> Vec<String> {
        planned.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn job_ids_are_time_ordered_and_parse_back() {
        let early = JobId::new(1_764_455_190_123, 0xab);
        let later = JobId::new(1_764_455_190_124, 0);
        assert_eq!(early.as_str(), "1764455190123-00000000000000ab");
        assert!(early < later);
        assert_eq!(JobId::parse(early.as_str()), Ok(early));
        for bad in [
            "",
            "#active",
            "1764455190123",
            "1764455190123-00000000000000AB",
            "176445519012-00000000000000ab",
            "1764455190123-00000000000000abc",
            "1764455190123_00000000000000ab",
            "x764455190123-00000000000000ab",
        ] {
            assert!(JobId::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_job_ends_only_when_a_sweep_from_the_start_finds_nothing() {
        let fresh = keys(&[]);
        assert_eq!(query_after(&fresh), None);
        assert_eq!(slice_end(&fresh, vec![]), SliceEnd::Done);
        assert_eq!(
            slice_end(&fresh, keys(&["a"])),
            SliceEnd::Continue { next: keys(&["a"]) }
        );
        let paging = keys(&["a", "b"]);
        assert_eq!(query_after(&paging), Some("b"));
        // The end of the partition: sweep again from the start, for rows written behind.
        assert_eq!(
            slice_end(&paging, vec![]),
            SliceEnd::Continue { next: vec![] }
        );
    }

    #[test]
    fn slices_are_about_a_second_of_the_rate() {
        assert_eq!(slice_rows(100), 100);
        assert_eq!(slice_rows(1000), MAX_SLICE_ROWS);
        assert_eq!(slice_rows(0), 1);
        assert_eq!(paced(100, 100), Duration::from_secs(1));
        assert_eq!(paced(25, 100), Duration::from_millis(250));
        assert_eq!(paced(0, 100), Duration::ZERO);
    }
}
