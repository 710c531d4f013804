//! The run state row, `#reconcile` / `S`, as the run reads it: where the run is, its
//! attempts and leases, a paused compare's checkpoint and the cuts given up.

use likes_core::ItemId;

use crate::rows::{from_item, Item, RunPhase, RunStateRow};
use crate::StoreError;

/// Where a run is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// The export was asked for (its ARN once DynamoDB answered).
    Exporting {
        export_arn: Option<String>,
    },
    /// The export is complete: compare and correct, under a lease.
    Comparing {
        export_arn: String,
        /// Athena mode: the read models' exports, once the pipeline passed the cut.
        derived: Option<DerivedExports>,
    },
    Done,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunState {
    /// The cut T (epoch millis, a multiple of the period).
    pub cut_ms: i64,
    pub phase: Phase,
    pub started_at_ms: i64,
    pub lease_until_ms: i64,
    /// Failed attempts of this cut so far.
    pub attempts: u32,
    /// Compare leases taken for this cut so far.
    pub leases: u32,
    /// Why a done run was given up (it has no drift report).
    pub abandoned: Option<String>,
    /// Where a compare that ran out of time stopped, for the next invocation to go on from.
    pub paused: Option<ComparePause>,
    /// The cuts given up since the last run that completed, oldest first (the last
    /// [`GIVEN_UP_KEPT`]), and how many older ones were dropped from the list.
    pub given_up: Vec<GivenUpCut>,
    pub given_up_dropped: u64,
}

/// How many given-up cuts the run state lists until a run completes: a week of hourly cuts.
pub const GIVEN_UP_KEPT: usize = 168;

/// The exports of the read models a run judges in Athena: taken at `at_ms`, a moment the
/// pipeline had applied every flip before the cut and its uncertainty, of `tables` (ARNs);
/// `exports` are the ones asked for so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DerivedExports {
    pub at_ms: i64,
    pub tables: Vec<String>,
    pub exports: Vec<String>,
}

/// A cut that was given up, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GivenUpCut {
    pub cut: i64,
    pub reason: String,
}

/// A compare stopped at its invocation's deadline: the last item it judged (items are judged
/// in order) and its report so far, as the caller serialized it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComparePause {
    pub through: ItemId,
    pub tally: String,
}

impl RunState {
    /// `cut-<T>`: the id corrections are written under.
    pub fn run_id(&self) -> String {
        format!("cut-{}", self.cut_ms)
    }
}

pub(super) fn parse_state(row: Item) -> Result<RunState, StoreError> {
    let row: RunStateRow = from_item(row)?;
    let phase = match row.phase {
        RunPhase::Exporting => Phase::Exporting {
            export_arn: row.export_arn,
        },
        RunPhase::Comparing => Phase::Comparing {
            export_arn: row
                .export_arn
                .ok_or_else(|| StoreError::Corrupt("comparing without an export".into()))?,
            derived: row.derived_at.map(|at_ms| DerivedExports {
                at_ms,
                tables: row.derived_tables,
                exports: row.derived_exports,
            }),
        },
        RunPhase::Done => Phase::Done,
    };
    Ok(RunState {
        cut_ms: row.cut,
        phase,
        started_at_ms: row.started_at,
        lease_until_ms: row.lease_until,
        attempts: row.attempts,
        leases: row.leases,
        abandoned: row.abandoned,
        given_up: row.given_up,
        given_up_dropped: row.given_up_dropped,
        paused: match (row.compared_through, row.compare_tally) {
            (Some(through), Some(tally)) => Some(ComparePause {
                through: ItemId::parse(&through).map_err(|err| {
                    StoreError::Corrupt(format!("a compare paused at {through:?}: {err}"))
                })?,
                tally,
            }),
            _ => None,
        },
    })
}
