//! Cleaning: dropping the subtotals before a reconciled cut, or before the horizon when no
//! run completed, and the stale notes of stream shards' intents, from every count row.

use likes_core::clock::now_ms;
use likes_core::pipeline::INTENT_NOTE_HORIZON_MS;
use likes_store::pruning::SegmentCursor;
use likes_store::reconciliation::{reconciled_attributes, stale_intent_notes, SCAN_SEGMENTS};

use crate::ReconcileError;

use super::{Progress, Reconciler};

impl Reconciler {
    /// Goes on with the cleaning pass in progress, then starts the one a completed run asked
    /// for (through its cut) or, when no pass finished for half the horizon, one through the
    /// horizon: a pass over the Counts table dropping subtotals and near-cut
    /// counts before its epoch, a Scan page at a time in each segment, its cursors kept in
    /// the table, so any invocation goes on where the last stopped, until `until_ms`. Every
    /// scheduled invocation runs it; the scale bench's ledger runs it to price it.
    pub async fn clean(
        &self,
        until_ms: i64,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<(), ReconcileError> {
        let period = self.config.period;
        let horizon_ms = self.config.horizon.as_millis() as i64;
        let segments = SCAN_SEGMENTS as usize;
        // A pass, then perhaps the one a run asked for meanwhile: a few rounds at most.
        for _ in 0..3 {
            let mut state = match self.pruning.state(segments).await? {
                // A pass still going goes on to its end: restarting it would never finish one.
                Some(state) if !state.done => state,
                last => {
                    let (cleaned, wanted) =
                        last.map_or((i64::MIN, i64::MIN), |s| (s.cleaned, s.wanted));
                    // Rows keep at most one and a half horizons of epochs: a pass through
                    // the horizon starts once the last one is half a horizon old.
                    let horizon = period.epoch(now_ms() - horizon_ms);
                    let horizon_due = cleaned < period.epoch(now_ms() - horizon_ms * 3 / 2);
                    let through = match (wanted > cleaned, horizon_due) {
                        (true, true) => wanted.max(horizon),
                        (true, false) => wanted,
                        (false, true) => horizon,
                        (false, false) => return Ok(()),
                    };
                    // The log shards retired by now: no row can take their intent numbers
                    // after, so once the pass is done no row keeps them.
                    let retiring = self.leaderboard.retired().await?;
                    self.pruning.begin(through, segments, &retiring).await?;
                    continue;
                }
            };
            let mut rows_done = 0;
            for (segment, cursor) in state.segments.iter_mut().enumerate() {
                while *cursor != SegmentCursor::Done {
                    if now_ms() >= until_ms {
                        return Ok(());
                    }
                    let start = match cursor {
                        SegmentCursor::At(key) => Some(key.clone()),
                        _ => None,
                    };
                    let (rows, next) = self.store.scan_page(segment as i32, start).await?;
                    let stale_before = now_ms() - INTENT_NOTE_HORIZON_MS;
                    for (_, key, row) in &rows {
                        let dropped = reconciled_attributes(row, state.through);
                        let notes = stale_intent_notes(row, stale_before, !dropped.is_empty());
                        self.store
                            .drop_reconciled(key, &dropped, (&notes, stale_before))
                            .await?;
                    }
                    rows_done += rows.len() as u64;
                    progress(Progress::Cleaning {
                        through_ms: state.through * period.length_ms,
                        rows_done,
                    });
                    *cursor = next.map_or(SegmentCursor::Done, SegmentCursor::At);
                    if !self.pruning.advance(state.through, segment, cursor).await? {
                        // Another invocation moved the pass on: it goes on from there.
                        return Ok(());
                    }
                }
            }
            let (mut shard, mut cursor) = state.board;
            while cursor != SegmentCursor::Done {
                if now_ms() >= until_ms {
                    return Ok(());
                }
                let start = match cursor {
                    SegmentCursor::At(key) => Some(key),
                    _ => None,
                };
                let (rows, next) = self.leaderboard.all_time_page(shard, start).await?;
                for row in &rows {
                    let mut dropped = reconciled_attributes(&row.state, state.through);
                    dropped.extend(row.retired_attributes(&state.retiring));
                    self.leaderboard
                        .drop_reconciled(&row.item_id, &dropped)
                        .await?;
                }
                rows_done += rows.len() as u64;
                progress(Progress::Cleaning {
                    through_ms: state.through * period.length_ms,
                    rows_done,
                });
                cursor = match next {
                    Some(key) => SegmentCursor::At(key),
                    None if shard + 1 < self.leaderboard.board_shards() => {
                        shard += 1;
                        SegmentCursor::Start
                    }
                    None => SegmentCursor::Done,
                };
                if !self
                    .pruning
                    .advance_board(state.through, shard, &cursor)
                    .await?
                {
                    return Ok(());
                }
            }
            self.pruning.finish(state.through).await?;
            self.leaderboard.forget_retired(&state.retiring).await?;
        }
        Ok(())
    }
}
