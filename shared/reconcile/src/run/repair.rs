//! The read models' repair from the same exports: the all-time leaderboard's scores and
//! ranks, and the likers lists, without undoing what happened after the cut.

use std::collections::{BTreeMap, BTreeSet};

use likes_core::clock::now_ms;
use likes_core::leaderboard::{Board, Window};
use likes_core::likers::{repair, LikerChange, LikerUpdate};
use likes_core::moderation::Cause;
use likes_core::moderation::RetractionJob;
use likes_core::pipeline::Counts;
use likes_core::reconcile::{judge, CountRowState, Verdict};
use likes_core::{ItemId, JobId, JobStatus};
use likes_store::reactions::{Retracted, RetractionWrite};
use likes_store::reconciliation::RunState;

use crate::athena::{JudgedLine, ResultLines};
use crate::export::{ExportedLikes, Recount};
use crate::report::DriftReport;
use crate::ReconcileError;

use super::{Progress, Reconciler, DEADLINE_MARGIN_MS};

/// The reason a retraction of a removed item's reaction gives when its removal's job row
/// is gone.
const REMOVED: &str = "item removed";

/// The removals' jobs a run read while it retracts their items' reactions (`None`: the row
/// expired), and the time of its writes.
struct Removals {
    jobs: BTreeMap<JobId, Option<RetractionJob>>,
    now_ms: i64,
}

impl Removals {
    fn at(now_ms: i64) -> Self {
        Self {
            jobs: BTreeMap::new(),
            now_ms,
        }
    }
}

impl Reconciler {
    /// Repairs the all-time leaderboard from the recount, as the counts are: every score row
    /// is read (each board shard a page at a time) and judged by [`judge`] on its subtotals,
    /// then every item the recount holds likes of and no row lists; a drift is added to the
    /// score once per cut, attributed to the epoch before it. Only once the boards' `as_of`
    /// has passed the cut's uncertainty (else `leaderboard_behind`, and the next run
    /// repairs). Past `deadline_ms` it stops where it is (`leaderboard_incomplete`); the
    /// board is re-ranked when a score changed.
    pub(super) async fn repair_leaderboard(
        &self,
        state: &RunState,
        recount: &BTreeMap<ItemId, Counts>,
        deadline_ms: i64,
        report: &mut DriftReport,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<(), ReconcileError> {
        progress(Progress::RepairingLeaderboard);
        let started_ms = now_ms();
        let as_of = self
            .leaderboard
            .board(&Board::global(Window::All), 0)
            .await?
            .as_of_ms;
        if as_of.is_none_or(|a| a < state.cut_ms + self.config.period.uncertainty_ms) {
            report.leaderboard_behind = true;
            return Ok(());
        }
        let cut = self.config.period.epoch(state.cut_ms);
        let out_of_time = || now_ms() >= deadline_ms + DEADLINE_MARGIN_MS / 2;
        let mut unlisted: BTreeMap<&str, u64> = recount
            .iter()
            .filter(|(_, counts)| counts.like_count > 0)
            .map(|(item, counts)| (item.as_str(), counts.like_count))
            .collect();
        let (rows, whole) = self.leaderboard.all_time_rows(out_of_time).await?;
        report.leaderboard_incomplete = !whole;
        let mut judged: Vec<_> = rows
            .into_iter()
            .map(|(item, row)| {
                let likes = unlisted.remove(item.as_str()).unwrap_or(0);
                (item, likes, vec![row])
            })
            .collect();
        // Likes no score row lists are known only once every row was read.
        if !report.leaderboard_incomplete {
            judged.extend(
                unlisted
                    .into_iter()
                    .map(|(item, likes)| (item.to_owned(), likes, Vec::new())),
            );
        }
        for (item, likes, rows) in judged {
            if out_of_time() {
                report.leaderboard_incomplete = true;
                break;
            }
            self.judge_score(&item, likes, &rows, cut, report).await?;
        }
        self.rerank(as_of, started_ms, report).await
    }

    /// Athena mode's repair of the all-time leaderboard: Athena's totals, then each item
    /// whose score drifted, judged again from its live score row. Past `deadline_ms` it stops
    /// where it is (`leaderboard_incomplete`); what it corrected stays in sync, so the next
    /// run's judgement no longer lists it.
    pub(super) async fn repair_scores(
        &self,
        state: &RunState,
        lines: &mut ResultLines,
        deadline_ms: i64,
        report: &mut DriftReport,
    ) -> Result<(), ReconcileError> {
        let started_ms = now_ms();
        let as_of = self
            .leaderboard
            .board(&Board::global(Window::All), 0)
            .await?
            .as_of_ms;
        let cut = self.config.period.epoch(state.cut_ms);
        while let Some(line) = lines.next().await? {
            match line {
                JudgedLine::Total { kind, n } => match kind.as_str() {
                    "in_sync" => report.leaderboard_checked += n,
                    "deferred" => {
                        report.leaderboard_checked += n;
                        report.leaderboard_deferred += n;
                    }
                    _ => {}
                },
                JudgedLine::Unknown { .. }
                | JudgedLine::Liker { .. }
                | JudgedLine::Unlisted { .. }
                | JudgedLine::Removed { .. } => {}
                JudgedLine::Drift { item, recount, .. } => {
                    if now_ms() >= deadline_ms + DEADLINE_MARGIN_MS / 2 {
                        report.leaderboard_incomplete = true;
                        break;
                    }
                    let rows: Vec<_> = self
                        .leaderboard
                        .all_time_row(item.as_str())
                        .await?
                        .into_iter()
                        .collect();
                    self.judge_score(item.as_str(), recount.like_count, &rows, cut, report)
                        .await?;
                }
            }
        }
        self.rerank(as_of, started_ms, report).await
    }

    /// Judges one item's all-time score row against its recounted likes, corrects a drift
    /// once per cut, and tallies it.
    pub(super) async fn judge_score(
        &self,
        item: &str,
        likes: u64,
        rows: &[CountRowState],
        cut: i64,
        report: &mut DriftReport,
    ) -> Result<(), ReconcileError> {
        let recounted = Counts {
            like_count: likes,
            dislike_count: 0,
        };
        report.leaderboard_checked += 1;
        match judge(recounted, rows, cut) {
            Verdict::InSync => {}
            Verdict::Deferred => report.leaderboard_deferred += 1,
            Verdict::Correct(delta) | Verdict::Clamped(delta) => {
                if self
                    .leaderboard
                    .correct_all_time(item, delta.like, cut)
                    .await?
                {
                    report.leaderboard_corrected += 1;
                }
            }
        }
        Ok(())
    }

    /// Re-ranks the all-time board when the repair changed a score.
    pub(super) async fn rerank(
        &self,
        as_of: Option<i64>,
        started_ms: i64,
        report: &DriftReport,
    ) -> Result<(), ReconcileError> {
        if report.leaderboard_corrected > 0 {
            self.leaderboard.refresh_all_time(as_of, started_ms).await?;
        }
        Ok(())
    }

    /// Repairs the likers lists from the export's `likes`: every liked entry is read (a Scan,
    /// a page at a time) and judged against the export by [`repair`], then every exported
    /// like no entry lists is added. Each write is the pipeline's own conditional one, at a
    /// flip's order, so it never overwrites a flip applied after the cut. It is not
    /// checkpointed: past `deadline_ms` it stops where it is (`likers_incomplete` in the
    /// report), so the counts' run still finishes, and the next run repairs again.
    pub(super) async fn repair_likers(
        &self,
        state: &RunState,
        (mut likes, unreadable): (ExportedLikes, u64),
        deadline_ms: i64,
        report: &mut DriftReport,
        progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<(), ReconcileError> {
        progress(Progress::RepairingLikers);
        report.likers_unreadable = unreadable;
        // The compare may pause at the deadline; the repair is given the time after it.
        let out_of_time = || now_ms() >= deadline_ms + DEADLINE_MARGIN_MS / 2;
        let settled_before = state.cut_ms - self.config.period.uncertainty_ms;
        let now = now_ms();
        let mut updates = Vec::new();
        let mut start = None;
        loop {
            let (entries, next) = self.likers.liked_page(start).await?;
            for (item, user, listed) in entries {
                // An exported like listed at its flip (or a later one) needs no entry added;
                // one the user's other entries hold only older flips of is still to add.
                let key = (item.clone(), user.clone());
                let exported = likes.get(&key).copied();
                if exported.is_some_and(|exported| listed.order() >= exported.order()) {
                    likes.remove(&key);
                }
                updates.extend(repair(
                    &item,
                    &user,
                    Some(listed),
                    exported,
                    settled_before,
                    now,
                ));
            }
            match next {
                Some(_) if out_of_time() => {
                    report.likers_incomplete = true;
                    break;
                }
                Some(next) => start = Some(next),
                None => break,
            }
        }
        // Likes no entry listed are known only once every entry was read.
        if !report.likers_incomplete {
            updates.extend(
                likes
                    .into_iter()
                    .flat_map(|((item, user), at)| repair(&item, &user, None, Some(at), 0, now)),
            );
        }
        for update in &updates {
            if out_of_time() {
                report.likers_incomplete = true;
                break;
            }
            self.apply_liker(update, report).await?;
        }
        Ok(())
    }

    /// Athena mode's repair of the likers lists: each (item, user) pair Athena found out of
    /// step with the export, decided by [`repair`] and written as the in-function repair
    /// writes it. Past `deadline_ms` it stops where it is (`likers_incomplete`); what it
    /// repaired is in step, so the next run's judgement no longer lists it.
    pub(super) async fn repair_judged_likers(
        &self,
        state: &RunState,
        lines: &mut ResultLines,
        deadline_ms: i64,
        report: &mut DriftReport,
    ) -> Result<(), ReconcileError> {
        let settled_before = report.cut_ms - self.config.period.uncertainty_ms;
        let now = now_ms();
        // The removal marks, read once the judgement names a reaction to a removed item.
        let mut removed: Option<BTreeMap<ItemId, JobId>> = None;
        let mut removals = Removals::at(now);
        // The buckets to list of one item at a time (its lines come together).
        let mut unlisted: Option<(ItemId, BTreeSet<u32>)> = None;
        while let Some(line) = lines.next().await? {
            let out_of_time = now_ms() >= deadline_ms + DEADLINE_MARGIN_MS / 2;
            if out_of_time && !matches!(line, JudgedLine::Total { .. }) {
                report.likers_incomplete = true;
                break;
            }
            if let Some((of, buckets)) = unlisted.take_if(
                |(of, _)| !matches!(&line, JudgedLine::Unlisted { item, .. } if item == of),
            ) {
                self.list_unlisted(&of, &buckets, report).await?;
            }
            match line {
                JudgedLine::Total { kind, n } if kind == "unreadable" => {
                    report.likers_unreadable = n;
                }
                JudgedLine::Unlisted { item, bucket } => {
                    unlisted
                        .get_or_insert_with(|| (item, BTreeSet::new()))
                        .1
                        .insert(bucket);
                }
                JudgedLine::Removed { item, user_id } => {
                    if removed.is_none() {
                        removed = Some(self.moderation.removals().await?.into_iter().collect());
                    }
                    // Removals only grow: the judgement's removed items are all here.
                    if let Some(job_id) = removed.as_ref().and_then(|r| r.get(&item)) {
                        self.retract_removed_reaction(
                            &mut removals,
                            state,
                            &item,
                            job_id,
                            &user_id,
                            report,
                        )
                        .await?;
                    }
                }
                JudgedLine::Liker {
                    item,
                    user_id,
                    listed,
                    exported,
                } => {
                    for update in repair(&item, &user_id, listed, exported, settled_before, now) {
                        self.apply_liker(&update, report).await?;
                    }
                }
                _ => {}
            }
        }
        if let Some((of, buckets)) = unlisted {
            self.list_unlisted(&of, &buckets, report).await?;
        }
        Ok(())
    }

    /// Lists on `item`'s count rows the likers buckets that hold its likes and that none
    /// of them lists (a like whose count write was lost lost its bucket's listing too).
    async fn list_unlisted(
        &self,
        item: &ItemId,
        buckets: &BTreeSet<u32>,
        report: &mut DriftReport,
    ) -> Result<(), ReconcileError> {
        self.store.list_liked_buckets(item, buckets).await?;
        report.likers_buckets_listed += buckets.len() as u64;
        Ok(())
    }

    /// Retracts every reaction to a removed item that the export holds, a backstop for
    /// reactions its removal's job never saw (a row written behind the service, or one the
    /// job's plan of likers entries missed): each is turned to NONE by the removal's own
    /// conditional retract write (cause `removed`, its job's id and reason), only if it
    /// is still as the export saw it (written by the cut), so the pipeline takes the counts
    /// down as for any retraction.
    pub(super) async fn retract_removed(
        &self,
        state: &RunState,
        recount: &Recount,
        report: &mut DriftReport,
    ) -> Result<(), ReconcileError> {
        let mut removals = Removals::at(now_ms());
        for (item, job_id) in self.moderation.removals().await? {
            let reacted = recount.per_item.get(&item).copied().unwrap_or_default();
            if reacted.like_count + reacted.dislike_count == 0 {
                continue;
            }
            let from = (item.clone(), String::new());
            let liked = recount
                .likes
                .iter()
                .flat_map(|likes| likes.range(from.clone()..));
            let users = liked
                .map(|((of, user), _)| (of, user))
                .take_while(|(of, _)| **of == item)
                .chain(
                    recount
                        .dislikes
                        .range(from.clone()..)
                        .map(|(of, user)| (of, user))
                        .take_while(|(of, _)| **of == item),
                );
            for (_, user) in users {
                self.retract_removed_reaction(&mut removals, state, &item, &job_id, user, report)
                    .await?;
            }
        }
        Ok(())
    }

    /// Retracts `user_id`'s reaction to `item`, removed by job `job_id`, as
    /// [`Self::retract_removed`] does (Athena's judgement lists them).
    async fn retract_removed_reaction(
        &self,
        removals: &mut Removals,
        state: &RunState,
        item: &ItemId,
        job_id: &JobId,
        user_id: &str,
        report: &mut DriftReport,
    ) -> Result<(), ReconcileError> {
        if !removals.jobs.contains_key(job_id) {
            let job = self.moderation.retraction(job_id).await?;
            removals.jobs.insert(job_id.clone(), job);
        }
        let job = removals.jobs[job_id].as_ref();
        // A removal still running retracts these itself; its next slice would take a row
        // written under its step for its own. What it misses, a later run finds.
        if job.is_some_and(|job| job.status == JobStatus::Running) {
            return Ok(());
        }
        let write = RetractionWrite {
            job_id: job_id.as_str(),
            // The job row may have expired since; its removal's mark stays.
            reason: job.map_or(REMOVED, |job| job.reason.as_str()),
            cause: Cause::Removed,
            step: job.map_or(0, |job| job.step),
            cut_ms: Some(state.cut_ms),
        };
        let retracted = self
            .reactions
            .retract(user_id, item.as_str(), write, removals.now_ms)
            .await?;
        if retracted == Retracted::Now {
            report.removed_reactions_retracted += 1;
        }
        Ok(())
    }

    /// Writes one likers repair (the pipeline's own conditional write) and tallies it. A
    /// like's bucket is listed on the item's count rows first, so a page reads it even when
    /// the pipeline never counted that like.
    pub(super) async fn apply_liker(
        &self,
        update: &LikerUpdate,
        report: &mut DriftReport,
    ) -> Result<(), ReconcileError> {
        if matches!(update.change, LikerChange::Liked { .. }) {
            self.store
                .list_liked_buckets(&update.item_id, &BTreeSet::from([update.bucket]))
                .await?;
        }
        if self.likers.apply(update).await? {
            match update.change {
                LikerChange::Liked { .. } => report.likers_added += 1,
                LikerChange::Unliked { .. } => report.likers_removed += 1,
                // A repair lists or unlists likes; it never writes a dislike.
                LikerChange::Disliked | LikerChange::Undisliked { .. } => {}
            }
        }
        Ok(())
    }
}
