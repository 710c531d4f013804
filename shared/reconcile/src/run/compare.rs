//! The compare: every item of the recount (or of Athena's judgements) against what the
//! count rows applied before the cut, corrected once, paused and resumed across invocations.

use std::collections::BTreeSet;

use likes_core::clock::{now_ms, rfc3339};
use likes_core::likers::bucket_of;
use likes_core::pipeline::Counts;
use likes_core::reconcile::{judge, Verdict};
use likes_core::ItemId;
use likes_store::reconciliation::{ItemCountRows, RunState};
use likes_store::StoreError;

use crate::athena::{AthenaJudge, Judged, JudgedLine, Judgement, ResultLines};
use crate::export::{Export, ExportedLikes, Recount, UnknownStateRow, FOREIGN_REPORTED};
use crate::report::{DriftReport, GivenUp};
use crate::ReconcileError;

use super::{Progress, Reconciler};

/// Items between two progress reports of the compare.
const PROGRESS_EVERY: u64 = 100;

impl Reconciler {
    /// Compares every item of the recount with what was applied before the cut, in item
    /// order, and corrects; then repairs the leaderboard and the likers lists, reports and
    /// starts the pass that drops the subtotals before the cut. A compare paused by an
    /// earlier invocation goes on after the item it stopped at, with its tally. Past
    /// `deadline_ms` (after at least one item, so every invocation makes progress) it pauses
    /// again.
    pub(super) async fn compare(
        &self,
        state: &RunState,
        export: &Export,
        export_arn: &str,
        judging: Judging<'_>,
        deadline_ms: i64,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<Compared, ReconcileError> {
        let started = now_ms();
        let mut fresh = DriftReport {
            run_id: state.run_id(),
            cut_ms: state.cut_ms,
            cut: rfc3339(state.cut_ms),
            export_arn: export_arn.to_owned(),
            recounted_by: match judging {
                Judging::InFunction(_) => "function",
                Judging::InAthena { .. } => "athena",
            }
            .to_owned(),
            cuts_given_up: state
                .given_up
                .iter()
                .map(|cut| GivenUp {
                    cut_ms: cut.cut,
                    cut: rfc3339(cut.cut),
                    reason: cut.reason.clone(),
                })
                .collect(),
            cuts_given_up_dropped: state.given_up_dropped,
            ..DriftReport::default()
        };
        // Athena's census is in its result, read as the compare goes.
        if let Judging::InFunction(recount) = &judging {
            fresh.rows_read = recount.rows_read;
            fresh.probe_rows = recount.probes;
            fresh.foreign_rows = recount.foreign_rows;
            fresh.unknown_state_rows = recount.unknown_state_rows;
            fresh.unknown_states = recount.unknown_states.clone();
        }
        let (report, after) = match &state.paused {
            None => (fresh, None),
            Some(pause) => {
                let tally: DriftReport = serde_json::from_str(&pause.tally).map_err(|err| {
                    ReconcileError::Store(StoreError::Corrupt(format!(
                        "a paused compare's tally: {err}"
                    )))
                })?;
                (tally, Some(&pause.through))
            }
        };
        let mut comparison = Comparison {
            state,
            after,
            report,
            started,
            deadline_ms,
        };
        let likes = match judging {
            Judging::InFunction(recount) => {
                if let Some(paused) = self
                    .compare_recount(&mut comparison, &recount, progress)
                    .await?
                {
                    return Ok(paused);
                }
                let report = &mut comparison.report;
                self.repair_leaderboard(state, &recount.per_item, deadline_ms, report, progress)
                    .await?;
                self.retract_removed(state, &recount, report).await?;
                Some((recount.likes.unwrap_or_default(), recount.unreadable_likes))
            }
            Judging::InAthena { athena, judged } => {
                let mut lines = athena.lines(&judged.counts, Judgement::Counts).await?;
                if let Some(paused) = self
                    .compare_judged(&mut comparison, export, &mut lines, progress)
                    .await?
                {
                    return Ok(paused);
                }
                let report = &mut comparison.report;
                progress(Progress::RepairingLeaderboard);
                match &judged.scores {
                    None => report.leaderboard_behind = true,
                    Some(scores) => {
                        let mut lines = athena.lines(scores, Judgement::Scores).await?;
                        self.repair_scores(state, &mut lines, deadline_ms, report)
                            .await?;
                    }
                }
                progress(Progress::RepairingLikers);
                let mut lines = athena.lines(&judged.likers, Judgement::Likers).await?;
                self.repair_judged_likers(state, &mut lines, deadline_ms, report)
                    .await?;
                None
            }
        };
        let mut report = comparison.report;
        if let Some(likes) = likes {
            self.repair_likers(state, likes, deadline_ms, &mut report, progress)
                .await?;
        }
        progress(Progress::Reporting);
        report.duration_ms += now_ms() - started;
        let key = self.put_report(&report).await?;
        report.emit();
        self.store.done(state.cut_ms, &key).await?;
        // Subtotals before the cut are dropped by a cleaning pass that resumes across
        // invocations, not here: the compare writes only corrections.
        self.pruning
            .want(self.config.period.epoch(state.cut_ms))
            .await?;
        Ok(Compared::Done(Box::new(report)))
    }

    /// The in-function compare: every item of the recount and of a Scan of the count rows,
    /// in item order, after the checkpoint; `Some` when it paused at the deadline.
    pub(super) async fn compare_recount(
        &self,
        comparison: &mut Comparison<'_>,
        recount: &Recount,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<Option<Compared>, ReconcileError> {
        let Comparison { state, after, .. } = *comparison;
        progress(Progress::ReadingCounts);
        let rows = self.store.count_rows().await?;
        let cut = self.config.period.epoch(state.cut_ms);
        let items: BTreeSet<_> = recount
            .per_item
            .keys()
            .chain(rows.keys())
            .filter(|item| after.is_none_or(|after| *item > after))
            .cloned()
            .collect();
        let total = comparison.report.items_checked + items.len() as u64;
        progress(Progress::Comparing {
            items_done: comparison.report.items_checked,
            items_total: total,
        });
        for (judged_here, item) in items.iter().enumerate() {
            if judged_here > 0 && now_ms() >= comparison.deadline_ms {
                let last = items
                    .range(..item)
                    .next_back()
                    .expect("this invocation judged the item before this one");
                return self.pause(comparison, last, total).await.map(Some);
            }
            let none = ItemCountRows::default();
            let counted = recount
                .per_item
                .get(item)
                .copied()
                .unwrap_or(Counts::default());
            let liked = recount
                .likes
                .as_ref()
                .map(|likes| liked_buckets(likes, item));
            let rows = rows.get(item).unwrap_or(&none);
            let judging = (counted, rows, liked.as_ref());
            self.judge_item(state, item, judging, cut, &mut comparison.report)
                .await?;
            every_so_often(progress, comparison.report.items_checked, total);
        }
        Ok(None)
    }

    /// The compare in Athena mode: the census and totals of Athena's judgement (tallied once,
    /// by the invocation that begins the compare), then each drifted item after `after`, in
    /// item order, judged again from its live count rows; `Some` when it paused at the
    /// deadline. The export must be read whole: the census's rows add up to its item count.
    pub(super) async fn compare_judged(
        &self,
        comparison: &mut Comparison<'_>,
        export: &Export,
        lines: &mut ResultLines,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<Option<Compared>, ReconcileError> {
        let Comparison { state, after, .. } = *comparison;
        let cut = self.config.period.epoch(state.cut_ms);
        let fresh = after.is_none();
        let mut rows_read = None;
        let mut total = 0;
        let mut drifts_begun = false;
        let mut last: Option<ItemId> = None;
        while let Some(line) = lines.next().await? {
            let (item, recount, overflow) = match line {
                JudgedLine::Total { kind, n } => {
                    match kind.as_str() {
                        "rows" => rows_read = Some(n),
                        "in_sync" | "deferred" | "drifted" => total += n,
                        _ => {}
                    }
                    if fresh {
                        comparison.report.tally(&kind, n);
                    }
                    continue;
                }
                JudgedLine::Unknown { item_id, rows } => {
                    if fresh {
                        comparison.report.unknown_state_rows += rows;
                        if comparison.report.unknown_states.len() < FOREIGN_REPORTED {
                            comparison.report.unknown_states.push(UnknownStateRow {
                                item_id,
                                user_id: None,
                                state: None,
                                rows,
                            });
                        }
                    }
                    continue;
                }
                JudgedLine::Drift {
                    item,
                    recount,
                    overflow,
                } => (item, recount, overflow),
                // Only a likers result has these.
                JudgedLine::Liker { .. }
                | JudgedLine::Unlisted { .. }
                | JudgedLine::Removed { .. } => continue,
            };
            if !drifts_begun {
                drifts_begun = true;
                check_rows_read(export, rows_read)?;
                progress(Progress::Comparing {
                    items_done: comparison.report.items_checked,
                    items_total: total,
                });
            }
            if after.is_some_and(|after| item <= *after) {
                continue;
            }
            if let Some(last) = &last {
                if now_ms() >= comparison.deadline_ms {
                    return self.pause(comparison, last, total).await.map(Some);
                }
            }
            let live = self.store.item_count_rows(&item, overflow).await?;
            self.judge_item(
                state,
                &item,
                (recount, &live, None),
                cut,
                &mut comparison.report,
            )
            .await?;
            every_so_often(progress, comparison.report.items_checked, total);
            last = Some(item);
        }
        check_rows_read(export, rows_read)?;
        Ok(None)
    }

    /// Judges one item's count rows, as a reader adds them up, against its recount, corrects
    /// a drift once per cut, and tallies the verdict. Overflow rows no marker names are rows
    /// no reader adds: their marker is named again first, so what is judged is what a reader
    /// reads after the run. Where its likes drifted, the count rows may also miss the likers
    /// buckets of likes the aggregator never took: the buckets that hold a like are listed
    /// beside the correction; and every bucket holding a like of the export (`liked`, when
    /// the export was read here) is listed too, however the count came out.
    pub(super) async fn judge_item(
        &self,
        state: &RunState,
        item: &ItemId,
        (recount, rows, liked): (Counts, &ItemCountRows, Option<&BTreeSet<u32>>),
        cut: i64,
        report: &mut DriftReport,
    ) -> Result<(), ReconcileError> {
        if rows.overflow > rows.marked
            && self
                .store
                .restore_overflow_marker(item, rows.overflow)
                .await?
        {
            report.overflow_markers_restored += 1;
        }
        let mut listed = rows.liked_buckets.clone();
        let verdict = judge(recount, &rows.states(), cut);
        let written = match verdict {
            Verdict::Correct(delta) | Verdict::Clamped(delta) => {
                let written = self
                    .store
                    .correct(item, delta, cut, &state.run_id())
                    .await?;
                if written && delta.like != 0 {
                    let liked = self.likers.buckets_with_likes(item).await?;
                    if !liked.is_empty() {
                        self.store.list_liked_buckets(item, &liked).await?;
                        listed.extend(liked);
                    }
                }
                written
            }
            Verdict::InSync | Verdict::Deferred => false,
        };
        report.record(item, verdict, written);
        // A like's count write that was lost lost its bucket's listing too, though the
        // count may have come out right: a bucket is listed whatever the verdict.
        let unlisted: BTreeSet<u32> = liked
            .into_iter()
            .flatten()
            .filter(|bucket| !listed.contains(bucket))
            .copied()
            .collect();
        if !unlisted.is_empty() {
            self.store.list_liked_buckets(item, &unlisted).await?;
            report.likers_buckets_listed += unlisted.len() as u64;
        }
        Ok(())
    }

    /// Records where the compare stopped (`last`, the item it judged last) and its tally, for
    /// the next invocation to go on from.
    pub(super) async fn pause(
        &self,
        comparison: &mut Comparison<'_>,
        last: &ItemId,
        items_total: u64,
    ) -> Result<Compared, ReconcileError> {
        let report = &mut comparison.report;
        report.duration_ms += now_ms() - comparison.started;
        let tally = serde_json::to_string(&report).expect("reports serialize");
        self.store
            .pause(comparison.state.cut_ms, last, &tally)
            .await?;
        Ok(Compared::Paused {
            items_done: report.items_checked,
            items_total,
        })
    }
}

/// Where the compare's judgements come from: the in-function recount, judged here against a
/// Scan of the count rows, or Athena's judgements over the exports.
pub(super) enum Judging<'a> {
    InFunction(Recount),
    InAthena {
        athena: &'a AthenaJudge,
        judged: Judged,
    },
}

/// A compare in progress: its run, the item a paused compare judged last, and its report so
/// far.
pub(super) struct Comparison<'a> {
    state: &'a RunState,
    after: Option<&'a ItemId>,
    report: DriftReport,
    started: i64,
    deadline_ms: i64,
}

pub(super) enum Compared {
    Done(Box<DriftReport>),
    Paused { items_done: u64, items_total: u64 },
}

/// An error unless Athena's census (`rows`) adds up to the export's item count.
pub(super) fn check_rows_read(
    export: &Export,
    rows_read: Option<u64>,
) -> Result<(), ReconcileError> {
    let expected = export.summary.item_count;
    match rows_read {
        Some(read) if read == expected => Ok(()),
        read => Err(ReconcileError::ItemCount {
            key: export.summary_key.clone(),
            expected,
            read: read.unwrap_or(0),
        }),
    }
}

/// The likers buckets that hold a like of `item` in the export.
fn liked_buckets(likes: &ExportedLikes, item: &ItemId) -> BTreeSet<u32> {
    likes
        .range((item.clone(), String::new())..)
        .take_while(|((liked, _), _)| liked == item)
        .map(|((_, user), _)| bucket_of(user))
        .collect()
}

/// Reports the compare's progress every [`PROGRESS_EVERY`] items, and at its last.
fn every_so_often(progress: &mut (dyn FnMut(Progress) + Send), items_done: u64, items_total: u64) {
    if items_done % PROGRESS_EVERY == 0 || items_done == items_total {
        progress(Progress::Comparing {
            items_done,
            items_total,
        });
    }
}
