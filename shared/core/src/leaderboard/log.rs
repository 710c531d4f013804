//! The event log's shards as the leaderboard follows them: how far its consumer applied
//! each, the boards' `as_of` through reshards, and which shards' progress may go.

use crate::pipeline::{sequence_after, REPLAY_HORIZON_MS};

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

#[cfg(test)]
mod tests {
    use super::*;

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
