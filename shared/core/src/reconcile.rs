//! Reconciliation's arithmetic: what the pipeline had applied before a cut, and what to do
//! about an item whose recount from an export at that cut disagrees.
//!
//! Counts keep moving while an export of the Reactions table at cut T is taken, so a recount
//! at T can only be compared with what the pipeline applied for flips committed before T. The
//! aggregator makes that exact: every count row keeps, besides its totals, a subtotal per
//! **epoch** (of length E: epoch j holds flips committed in [jE, (j+1)E)), and cuts fall on
//! epoch boundaries. For a cut T = kE, `applied(< T) = total − Σ subtotals of epochs ≥ k`.
//! An export may be taken up to a minute away from the time asked for, so each row also
//! counts the changes it took within that uncertainty of an epoch boundary; an item with any of them at the cut
//! is deferred to the next run instead of corrected. A correction goes to the item's
//! correction row as a delta attributed to the epoch before the cut, so later runs see it
//! inside their own `applied(< T')`.

use std::collections::BTreeMap;

use crate::pipeline::{Counts, RowDelta};
use crate::Delta;

/// How far from the requested time an export may really be taken on AWS.
pub const EXPORT_UNCERTAINTY_MS: i64 = 60_000;

/// The epoch length E, which cuts fall on multiples of, and the export's time uncertainty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period {
    pub length_ms: i64,
    pub uncertainty_ms: i64,
}

impl Period {
    /// The epoch a flip committed at `t_ms` belongs to.
    pub fn epoch(self, t_ms: i64) -> i64 {
        t_ms.div_euclid(self.length_ms)
    }

    /// The boundary (as the index k of cut kE) within the export's uncertainty of `t_ms`, if
    /// any: a change there makes its item uncertain at that cut.
    pub fn near_cut(self, t_ms: i64) -> Option<i64> {
        let k = (t_ms + self.length_ms / 2).div_euclid(self.length_ms);
        ((t_ms - k * self.length_ms).abs() <= self.uncertainty_ms).then_some(k)
    }

    /// The latest cut at or before `t_ms`.
    pub fn cut_at(self, t_ms: i64) -> i64 {
        self.epoch(t_ms) * self.length_ms
    }

    /// The latest cut whose whole uncertainty window has passed by `now_ms`.
    pub fn latest_cut(self, now_ms: i64) -> i64 {
        self.cut_at(now_ms - self.uncertainty_ms)
    }
}

/// Attribute names on a count row: epoch j's like and dislike subtotals, and the changes
/// near cut k.
pub fn subtotal_attributes(epoch: i64) -> (String, String) {
    (format!("e{epoch}l"), format!("e{epoch}d"))
}

pub fn near_cut_attribute(cut: i64) -> String {
    format!("n{cut}")
}

/// The attribute a row whose first epoch is `first` counts its changes near cut k in: the
/// cuts that open and close its first epoch have their own two (`nf0`, `nf1`), which no
/// later cut needs cleaned away (they are two numbers for good), so a row written in one
/// epoch near its edge still leaves the cleaning pass nothing to drop.
pub fn near_cut_attribute_of(cut: i64, first: Option<i64>) -> String {
    match first.map(|first| cut - first) {
        Some(0) => FIRST_NEAR_CUTS[0].to_owned(),
        Some(1) => FIRST_NEAR_CUTS[1].to_owned(),
        _ => near_cut_attribute(cut),
    }
}

/// The changes near the cut that opens a row's first epoch, and near the one that closes it.
pub const FIRST_NEAR_CUTS: [&str; 2] = ["nf0", "nf1"];

/// The attribute a count row names its first epoch in: the epoch of the first change it
/// took. The row keeps no subtotal for that epoch (its total less its other subtotals is
/// that epoch's) and none for an earlier one, so a row whose changes all fell in one epoch
/// has no subtotal for the cleaning pass to drop. A row without it keeps a subtotal for
/// every epoch it took changes in.
pub const FIRST_EPOCH: &str = "fe";

/// The attribute an all-time score row sums, besides their subtotals, the likes it took from
/// epochs before its first (a lagging log shard's, or a correction attributed to an epoch
/// before the row began): what it applied before a cut at or before its first epoch,
/// once the cleaning pass has dropped their subtotals. A count row never takes such changes
/// (its item's correction row does).
pub const BEFORE_FIRST_LIKES: &str = "bfl";

/// A delta for a count row whose first epoch is `first`: the part the row takes (the
/// changes of `first` and later, every near-cut count and the likers buckets) and the part
/// of earlier epochs,
/// if any, which the item's correction row takes instead (it keeps a subtotal for every
/// epoch), so the row never holds a subtotal before its first epoch.
pub fn split_at_first_epoch(delta: &RowDelta, first: i64) -> (RowDelta, Option<RowDelta>) {
    let mut row = delta.clone();
    let later = row.by_epoch.split_off(&first);
    let earlier = std::mem::replace(&mut row.by_epoch, later);
    if earlier.is_empty() {
        return (row, None);
    }
    let mut early = RowDelta {
        by_epoch: earlier,
        ..RowDelta::default()
    };
    for part in early.by_epoch.values() {
        early.total += *part;
        row.total += Delta {
            like: -part.like,
            dislike: -part.dislike,
        };
    }
    (row, Some(early))
}

/// What a count row holds, as reconciliation reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CountRowState {
    pub total: Delta,
    pub subtotals: BTreeMap<i64, Delta>,
    /// Changes within the export's uncertainty of cut k, by k.
    pub near_cuts: BTreeMap<i64, u64>,
    /// The row's notes of the last intent each stream shard wrote to it (attribute, intent
    /// number): no reconciliation input, but old ones are cleaned away with the subtotals.
    pub intent_notes: BTreeMap<String, i64>,
    /// Its [`FIRST_EPOCH`], when it keeps one: then `subtotals` holds none for it.
    pub first_epoch: Option<i64>,
    /// What it took from epochs before its first ([`BEFORE_FIRST_LIKES`]).
    pub before_first: Delta,
    /// Its changes near the cuts that open and close its first epoch ([`FIRST_NEAR_CUTS`]),
    /// which `near_cuts` leaves out.
    pub first_near_cuts: [u64; 2],
}

impl CountRowState {
    /// The row's changes within the export's uncertainty of cut k.
    pub fn near(&self, cut: i64) -> u64 {
        let first = match self.first_epoch.map(|first| cut - first) {
            Some(0) => self.first_near_cuts[0],
            Some(1) => self.first_near_cuts[1],
            _ => 0,
        };
        first + self.near_cuts.get(&cut).copied().unwrap_or(0)
    }
}

/// What reconciliation decides for one item at cut k.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The pipeline applied exactly what the export holds.
    InSync,
    /// Flips near the cut: the comparison would be a guess. The next run decides.
    Deferred,
    /// Add this to the item's correction row.
    Correct(Delta),
    /// The correction that makes the counts equal the recount would leave the live count
    /// below zero: this one brings it to zero instead (and is reported).
    Clamped(Delta),
}

/// Compares an item's recount at cut `k` (epochs < k) with its count rows.
pub fn judge(recount: Counts, rows: &[CountRowState], cut: i64) -> Verdict {
    if rows.iter().any(|row| row.near(cut) > 0) {
        return Verdict::Deferred;
    }
    let mut applied = Delta::ZERO;
    let mut live = Delta::ZERO;
    for row in rows {
        live += row.total;
        // A row first written at or after the cut took before it only changes from before
        // its first epoch, each with its subtotal: all of them less those from the cut on.
        if let Some(first) = row.first_epoch.filter(|first| *first >= cut) {
            applied += row.before_first;
            for (_, subtotal) in row.subtotals.range(cut..first) {
                applied += Delta {
                    like: -subtotal.like,
                    dislike: -subtotal.dislike,
                };
            }
            continue;
        }
        applied += row.total;
        for (_, subtotal) in row.subtotals.range(cut..) {
            applied += Delta {
                like: -subtotal.like,
                dislike: -subtotal.dislike,
            };
        }
    }
    let drift = Delta {
        like: recount.like_count as i64 - applied.like,
        dislike: recount.dislike_count as i64 - applied.dislike,
    };
    if drift.is_zero() {
        return Verdict::InSync;
    }
    // The live count after the correction is live + drift; never below zero.
    let clamped = Delta {
        like: drift.like.max(-live.like),
        dislike: drift.dislike.max(-live.dislike),
    };
    if clamped == drift {
        Verdict::Correct(drift)
    } else {
        Verdict::Clamped(clamped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Period = Period {
        length_ms: 3_600_000,
        uncertainty_ms: EXPORT_UNCERTAINTY_MS,
    };

    fn delta(like: i64, dislike: i64) -> Delta {
        Delta { like, dislike }
    }

    fn counts(like: u64, dislike: u64) -> Counts {
        Counts {
            like_count: like,
            dislike_count: dislike,
        }
    }

    fn row(total: Delta, subtotals: &[(i64, Delta)]) -> CountRowState {
        CountRowState {
            total,
            subtotals: subtotals.iter().copied().collect(),
            ..CountRowState::default()
        }
    }

    #[test]
    fn epochs_and_cuts_fall_on_the_period() {
        assert_eq!(HOUR.epoch(3_600_000 * 5 + 1), 5);
        assert_eq!(HOUR.epoch(-1), -1);
        assert_eq!(HOUR.latest_cut(3_600_000 * 5 + 59_999), 3_600_000 * 4);
        assert_eq!(HOUR.latest_cut(3_600_000 * 5 + 60_000), 3_600_000 * 5);
        assert_eq!(HOUR.cut_at(3_600_000 * 5 + 1), 3_600_000 * 5);
        assert_eq!(HOUR.near_cut(3_600_000 * 5 - 60_000), Some(5));
        assert_eq!(HOUR.near_cut(3_600_000 * 5 + 30_000), Some(5));
        assert_eq!(HOUR.near_cut(3_600_000 * 5 + 60_001), None);
        assert_eq!(HOUR.near_cut(1_800_000), None);
    }

    #[test]
    fn flips_after_the_cut_are_not_drift() {
        // 7 likes applied before cut 5, 3 more in epoch 5 and 1 in epoch 6.
        let rows = [row(
            delta(11, 0),
            &[(4, delta(7, 0)), (5, delta(3, 0)), (6, delta(1, 0))],
        )];
        assert_eq!(judge(counts(7, 0), &rows, 5), Verdict::InSync);
    }

    #[test]
    fn a_lost_batch_is_corrected_by_what_the_export_holds() {
        let rows = [
            row(delta(5, 1), &[(4, delta(5, 1))]),
            row(delta(2, 0), &[(5, delta(2, 0))]),
        ];
        assert_eq!(judge(counts(9, 1), &rows, 5), Verdict::Correct(delta(4, 0)));
    }

    #[test]
    fn items_with_changes_near_the_cut_are_deferred() {
        let mut near = row(delta(1, 0), &[(4, delta(1, 0))]);
        near.near_cuts.insert(5, 1);
        assert_eq!(judge(counts(3, 0), &[near.clone()], 5), Verdict::Deferred);
        assert_eq!(
            judge(counts(3, 0), &[near], 6),
            Verdict::Correct(delta(2, 0)),
            "another cut is not uncertain"
        );
    }

    #[test]
    fn a_row_keeps_no_subtotal_for_its_first_epoch() {
        // A row first written in epoch 4 (7 likes), then 3 in epoch 5 and 1 in epoch 6:
        // only the later epochs have subtotals.
        let mut since_4 = row(delta(11, 0), &[(5, delta(3, 0)), (6, delta(1, 0))]);
        since_4.first_epoch = Some(4);
        assert_eq!(judge(counts(7, 0), &[since_4.clone()], 5), Verdict::InSync);
        assert_eq!(judge(counts(10, 0), &[since_4.clone()], 6), Verdict::InSync);
        assert_eq!(judge(counts(0, 0), &[since_4.clone()], 4), Verdict::InSync);
        // First written in epoch 5: nothing of it was applied before cut 5.
        let mut since_5 = row(delta(4, 0), &[(6, delta(1, 0))]);
        since_5.first_epoch = Some(5);
        assert_eq!(
            judge(counts(2, 0), &[since_5.clone()], 5),
            Verdict::Correct(delta(2, 0))
        );
        assert_eq!(judge(counts(3, 0), &[since_5], 6), Verdict::InSync);
        // First written in epoch 7, then 2 likes from epoch 4 (its subtotal since dropped)
        // and 1 from epoch 6 arrived late: 3 before its first epoch.
        let mut late = row(delta(8, 0), &[(6, delta(1, 0))]);
        late.first_epoch = Some(7);
        late.before_first = delta(3, 0);
        assert_eq!(judge(counts(2, 0), &[late.clone()], 5), Verdict::InSync);
        assert_eq!(judge(counts(3, 0), &[late.clone()], 7), Verdict::InSync);
        assert_eq!(judge(counts(8, 0), &[late.clone()], 8), Verdict::InSync);
        // Changes near the cuts that open and close its first epoch defer those cuts only.
        late.first_near_cuts = [1, 2];
        assert_eq!(judge(counts(2, 0), &[late.clone()], 7), Verdict::Deferred);
        assert_eq!(judge(counts(2, 0), &[late.clone()], 8), Verdict::Deferred);
        assert_eq!(judge(counts(8, 0), &[late], 9), Verdict::InSync);
        assert_eq!(near_cut_attribute_of(7, Some(7)), "nf0");
        assert_eq!(near_cut_attribute_of(8, Some(7)), "nf1");
        assert_eq!(near_cut_attribute_of(9, Some(7)), "n9");
        assert_eq!(near_cut_attribute_of(7, None), "n7");
    }

    #[test]
    fn changes_before_a_rows_first_epoch_are_split_off() {
        let written = RowDelta {
            total: delta(4, 1),
            by_epoch: [(4, delta(1, 1)), (5, delta(2, 0)), (6, delta(1, 0))].into(),
            near_cuts: [(5, 2)].into(),
            liked_buckets: [7].into(),
        };
        let (row, early) = split_at_first_epoch(&written, 5);
        assert_eq!(row.total, delta(3, 0));
        assert_eq!(row.liked_buckets, written.liked_buckets);
        assert_eq!(row.by_epoch, [(5, delta(2, 0)), (6, delta(1, 0))].into());
        assert_eq!(row.near_cuts, written.near_cuts);
        let early = early.expect("epoch 4 is before the first");
        assert_eq!(early.total, delta(1, 1));
        assert_eq!(early.by_epoch, [(4, delta(1, 1))].into());
        assert!(early.near_cuts.is_empty());
        assert_eq!(split_at_first_epoch(&written, 4), (written.clone(), None));
        assert_eq!(split_at_first_epoch(&written, 3), (written, None));
    }

    #[test]
    fn a_correction_never_takes_the_live_count_below_zero() {
        // Applied before the cut: 5 likes; the export holds 0; but 3 unlikes of other likes
        // after the cut already took the live count to 2 - 0 ... the live total is 2.
        let rows = [row(delta(2, 0), &[(4, delta(5, 0)), (5, delta(-3, 0))])];
        assert_eq!(
            judge(counts(0, 0), &rows, 5),
            Verdict::Clamped(delta(-2, 0))
        );
    }
}
