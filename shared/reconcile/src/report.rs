//! The drift report of one run: what was checked and what was done, as JSON in the export
//! bucket and as metrics.

use likes_core::reconcile::Verdict;
use likes_core::{Delta, ItemId};
use likes_store::metrics::Report;
use serde::{Deserialize, Serialize};

/// How many of the largest drifts a report lists.
const LARGEST: usize = 10;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Drift {
    pub item_id: String,
    pub like_drift: i64,
    pub dislike_drift: i64,
}

/// A cut given up since the last run that completed: its report (if it could be written)
/// says so too, and this run's names it, so none goes unseen.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct GivenUp {
    pub cut_ms: i64,
    pub cut: String,
    pub reason: String,
}

/// Also the tally a paused compare keeps in the run state, so it deserializes too.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct DriftReport {
    pub run_id: String,
    /// The cut, epoch millis and RFC 3339.
    pub cut_ms: i64,
    pub cut: String,
    pub export_arn: String,
    /// Where the export was recounted: `function` or `athena`.
    pub recounted_by: String,
    pub rows_read: u64,
    pub probe_rows: u64,
    pub foreign_rows: u64,
    /// Reaction rows in a state the service never writes: counted as no change.
    pub unknown_state_rows: u64,
    /// The first of them, with their keys.
    pub unknown_states: Vec<crate::UnknownStateRow>,
    pub items_checked: u64,
    pub items_in_sync: u64,
    pub items_drifted: u64,
    pub items_corrected: u64,
    /// Drifted items an earlier attempt of this run already corrected (a rerun).
    pub items_already_corrected: u64,
    pub items_deferred: u64,
    pub items_clamped: u64,
    /// Σ |like drift| + |dislike drift| over the corrections written.
    pub correction_abs_sum: u64,
    pub largest_drifts: Vec<Drift>,
    /// Likers entries the export's likes added (lost like events) and removed (lost unlike
    /// or erasure events), and likes whose order could not be read, so repaired nothing.
    #[serde(default)]
    pub likers_added: u64,
    #[serde(default)]
    pub likers_removed: u64,
    #[serde(default)]
    pub likers_unreadable: u64,
    /// The repair ran out of the invocation's time before it read or wrote everything.
    #[serde(default)]
    pub likers_incomplete: bool,
    /// The all-time leaderboard: items whose score was checked against the recount,
    /// corrected now, and deferred (likes near the cut). When the board's `as_of` had not
    /// passed the cut, nothing was checked (`leaderboard_behind`); when the invocation ran
    /// out of time, not everything was (`leaderboard_incomplete`). The next run repairs.
    #[serde(default)]
    pub leaderboard_checked: u64,
    #[serde(default)]
    pub leaderboard_corrected: u64,
    #[serde(default)]
    pub leaderboard_deferred: u64,
    #[serde(default)]
    pub leaderboard_behind: bool,
    #[serde(default)]
    pub leaderboard_incomplete: bool,
    /// Overflow markers named again: a hot item's overflow rows no marker named, so no
    /// reader added them.
    #[serde(default)]
    pub overflow_markers_restored: u64,
    /// Likers buckets holding a like of the export that no count row of its item listed, so
    /// no likers page read them, listed now.
    #[serde(default)]
    pub likers_buckets_listed: u64,
    /// Reactions to removed items the export held (the removal's job never saw them),
    /// turned to NONE now.
    #[serde(default)]
    pub removed_reactions_retracted: u64,
    /// The cuts given up since the last run that completed (the last 168), and how many
    /// more were.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cuts_given_up: Vec<GivenUp>,
    #[serde(default)]
    pub cuts_given_up_dropped: u64,
    pub duration_ms: i64,
    /// Why the cut was given up, when it was: nothing was compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub given_up: Option<String>,
}

impl DriftReport {
    /// Tallies one item's verdict; `written` says whether its correction was added now.
    pub fn record(&mut self, item: &ItemId, verdict: Verdict, written: bool) {
        self.items_checked += 1;
        let correction = match verdict {
            Verdict::InSync => {
                self.items_in_sync += 1;
                return;
            }
            Verdict::Deferred => {
                self.items_deferred += 1;
                return;
            }
            Verdict::Correct(delta) => delta,
            Verdict::Clamped(delta) => {
                self.items_clamped += 1;
                delta
            }
        };
        self.items_drifted += 1;
        if written {
            self.items_corrected += 1;
            self.correction_abs_sum += abs(correction);
        } else {
            self.items_already_corrected += 1;
        }
        self.largest_drifts.push(Drift {
            item_id: item.as_str().to_owned(),
            like_drift: correction.like,
            dislike_drift: correction.dislike,
        });
        self.largest_drifts.sort_by(|a, b| {
            let size = |d: &Drift| d.like_drift.unsigned_abs() + d.dislike_drift.unsigned_abs();
            size(b)
                .cmp(&size(a))
                .then_with(|| a.item_id.cmp(&b.item_id))
        });
        self.largest_drifts.truncate(LARGEST);
    }

    /// Tallies one of Athena's totals (`kind` as `infra/athena/judge_counts.sql` names it):
    /// items in sync or deferred, and the export's census. Drifted items are tallied one by
    /// one, by [`Self::record`], as they are judged again.
    pub fn tally(&mut self, kind: &str, n: u64) {
        match kind {
            "in_sync" => {
                self.items_checked += n;
                self.items_in_sync += n;
            }
            "deferred" => {
                self.items_checked += n;
                self.items_deferred += n;
            }
            "rows" => self.rows_read = n,
            "probes" => self.probe_rows = n,
            "foreign" => self.foreign_rows = n,
            _ => {}
        }
    }

    /// The report's metrics, for the drift alarm and the dashboards.
    pub fn emit(&self) {
        Report::new("Likes/Reconcile")
            .value("RowsRead", "Count", self.rows_read as f64)
            .value("UnknownStateRows", "Count", self.unknown_state_rows as f64)
            .value("ItemsChecked", "Count", self.items_checked as f64)
            .value("ItemsDrifted", "Count", self.items_drifted as f64)
            .value("ItemsCorrected", "Count", self.items_corrected as f64)
            .value("ItemsDeferred", "Count", self.items_deferred as f64)
            .value("ItemsClamped", "Count", self.items_clamped as f64)
            .value("CorrectionAbsSum", "Count", self.correction_abs_sum as f64)
            .value("LikersAdded", "Count", self.likers_added as f64)
            .value("LikersRemoved", "Count", self.likers_removed as f64)
            .value(
                "OverflowMarkersRestored",
                "Count",
                self.overflow_markers_restored as f64,
            )
            .value(
                "LikersBucketsListed",
                "Count",
                self.likers_buckets_listed as f64,
            )
            .value(
                "RemovedReactionsRetracted",
                "Count",
                self.removed_reactions_retracted as f64,
            )
            .value(
                "LeaderboardCorrected",
                "Count",
                self.leaderboard_corrected as f64,
            )
            .value(
                "CutsGivenUp",
                "Count",
                u8::from(self.given_up.is_some()) as f64,
            )
            .value(
                "ReconcileDurationMs",
                "Milliseconds",
                self.duration_ms as f64,
            )
            .property("run_id", self.run_id.clone())
            .emit();
    }

    fn leaderboard_summary(&self) -> String {
        if self.leaderboard_behind {
            return "not checked, its as_of is behind the cut".to_owned();
        }
        let mut text = format!(
            "{} items checked, {} corrected, {} deferred",
            self.leaderboard_checked, self.leaderboard_corrected, self.leaderboard_deferred
        );
        if self.leaderboard_incomplete {
            text.push_str(" (out of time: the next run goes on)");
        }
        text
    }

    /// A one-screen summary for an operator.
    pub fn summary(&self) -> String {
        let mut text = format!(
            "run {} (cut {}): {} rows read, {} items checked: {} in sync, {} drifted \
             ({} corrected now, {} already corrected, {} clamped), {} deferred; \
             correction |sum| {}; likers lists: {} added, {} removed; all-time leaderboard: \
             {}; {} ms",
            self.run_id,
            self.cut,
            self.rows_read,
            self.items_checked,
            self.items_in_sync,
            self.items_drifted,
            self.items_corrected,
            self.items_already_corrected,
            self.items_clamped,
            self.items_deferred,
            self.correction_abs_sum,
            self.likers_added,
            self.likers_removed,
            self.leaderboard_summary(),
            self.duration_ms,
        );
        for drift in &self.largest_drifts {
            text.push_str(&format!(
                "\n  {}: likes {:+}, dislikes {:+}",
                drift.item_id, drift.like_drift, drift.dislike_drift
            ));
        }
        let repaired = self.overflow_markers_restored
            + self.likers_buckets_listed
            + self.removed_reactions_retracted;
        if repaired > 0 {
            text.push_str(&format!(
                "\n{} overflow markers restored, {} likers buckets listed, {} reactions to \
                 removed items retracted",
                self.overflow_markers_restored,
                self.likers_buckets_listed,
                self.removed_reactions_retracted
            ));
        }
        if self.unknown_state_rows > 0 {
            text.push_str(&format!(
                "\n{} reaction rows in an unknown state, counted as no change:",
                self.unknown_state_rows
            ));
            for row in &self.unknown_states {
                text.push_str(&format!(
                    "\n  item {} user {} state {}",
                    row.item_id,
                    row.user_id.as_deref().unwrap_or("?"),
                    row.state.as_deref().unwrap_or("(none)")
                ));
            }
        }
        let given_up = self.cuts_given_up.len() as u64 + self.cuts_given_up_dropped;
        if given_up > 0 {
            text.push_str(&format!(
                "\n{given_up} cuts were given up since the last completed run:"
            ));
            if self.cuts_given_up_dropped > 0 {
                text.push_str(&format!(
                    "\n  ({} older ones not listed)",
                    self.cuts_given_up_dropped
                ));
            }
            for cut in &self.cuts_given_up {
                text.push_str(&format!("\n  {}: {}", cut.cut, cut.reason));
            }
        }
        text
    }
}

fn abs(delta: Delta) -> u64 {
    delta.like.unsigned_abs() + delta.dislike.unsigned_abs()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str) -> ItemId {
        ItemId::parse(id).unwrap()
    }

    #[test]
    fn verdicts_are_tallied_and_the_largest_drifts_kept_in_order() {
        let mut report = DriftReport::default();
        report.record(&item("a"), Verdict::InSync, false);
        report.record(&item("b"), Verdict::Deferred, false);
        report.record(
            &item("c"),
            Verdict::Correct(Delta {
                like: 2,
                dislike: 0,
            }),
            true,
        );
        report.record(
            &item("d"),
            Verdict::Clamped(Delta {
                like: -5,
                dislike: 1,
            }),
            true,
        );
        report.record(
            &item("e"),
            Verdict::Correct(Delta {
                like: 1,
                dislike: 0,
            }),
            false,
        );
        assert_eq!(
            (
                report.items_checked,
                report.items_in_sync,
                report.items_deferred,
                report.items_drifted,
                report.items_corrected,
                report.items_already_corrected,
                report.items_clamped,
                report.correction_abs_sum
            ),
            (5, 1, 1, 3, 2, 1, 1, 8)
        );
        let order: Vec<&str> = report
            .largest_drifts
            .iter()
            .map(|d| d.item_id.as_str())
            .collect();
        assert_eq!(order, ["d", "c", "e"]);
    }
}
