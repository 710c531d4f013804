//! What reconciliation keeps on the Counts table: its run state, the count rows it reads back
//! per item, and the corrections it writes.
//!
//! - `#reconcile` / `S`: the one run in progress or last finished (cut, phase, export ARN,
//!   a lease, and a paused compare's checkpoint). Every step is a conditional write on it,
//!   so two overlapping invocations never both start, or both compare, the same cut.
//! - `<item>` / `D#C`: the item's correction row, a count row like the others (readers sum
//!   it), whose `last_cut` names the last cut that corrected it (runs go forward in cut
//!   order), so a correction is added once.

mod count_rows;
mod state;

pub(crate) use count_rows::row_state;
pub use count_rows::{reconciled_attributes, stale_intent_notes};
use state::parse_state;
pub use state::{ComparePause, DerivedExports, GivenUpCut, Phase, RunState, GIVEN_UP_KEPT};

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use likes_core::reconcile::CountRowState;
use likes_core::ItemId;

use crate::error::condition_held;
use crate::rows::{attr, to_attribute, RunPhase};
use crate::StoreError;

const STATE_KEY: &str = "#reconcile";
const STATE_SORT_KEY: &str = "S";
/// The correction row's sort key: under the `D#` prefix, so every count read adds it.
pub const CORRECTION_ROW: &str = "D#C";
/// Scan segments read in parallel.
pub const SCAN_SEGMENTS: i32 = 4;
/// Attributes one cleanup update removes: `REMOVE #r0, …, #r99` is some 600 B of expression,
/// far inside DynamoDB's 4 KB and 300 operators.
pub const REMOVED_PER_UPDATE: usize = 100;

/// Where a count row is: its partition key (the item, or one of its overflow partitions) and
/// sort key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowKey {
    pub partition: String,
    pub sort_key: String,
}

/// An item's count rows as reconciliation reads them, with what its readers go by besides:
/// the overflow partitions its marker names and the likers buckets its rows list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ItemCountRows {
    /// Its count rows: base, overflow and correction rows.
    pub rows: Vec<(RowKey, CountRowState)>,
    /// The overflow partitions its marker names (0 without a marker): a reader adds
    /// `1..=marked` to its base partition.
    pub marked: u32,
    /// The highest overflow partition that holds a row of it (0 for none). Above `marked`,
    /// its rows are there but no reader adds them: the marker was lost.
    pub overflow: u32,
    /// The likers buckets its rows list: a likers page reads these alone.
    pub liked_buckets: BTreeSet<u32>,
}

impl ItemCountRows {
    /// The rows' states, for [`likes_core::reconcile::judge`].
    pub fn states(&self) -> Vec<CountRowState> {
        self.rows.iter().map(|(_, row)| row.clone()).collect()
    }
}

/// Every item's count rows as reconciliation reads them.
pub type ItemRows = BTreeMap<ItemId, ItemCountRows>;

#[derive(Debug, Clone)]
pub struct ReconciliationStore {
    client: Client,
    counts_table: String,
}

/// What [`ReconciliationStore::derive`] and [`ReconciliationStore::derived_export`] record,
/// for an update's REMOVE when a cut starts (again).
fn derived_attributes() -> String {
    [
        attr::DERIVED_AT,
        attr::DERIVED_TABLES,
        attr::DERIVED_EXPORTS,
    ]
    .join(", ")
}

fn s(value: &str) -> AttributeValue {
    AttributeValue::S(value.to_owned())
}

/// Why a run failed or was given up, as the run state keeps it: at most [`REASON_BYTES`], so
/// the row stays small whatever an error says.
fn reason(text: &str) -> AttributeValue {
    let mut end = text.len().min(REASON_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    s(&text[..end])
}

const REASON_BYTES: usize = 1024;

fn n(value: i64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

impl ReconciliationStore {
    pub fn new(client: Client, counts_table: impl Into<String>) -> Self {
        Self {
            client,
            counts_table: counts_table.into(),
        }
    }

    /// An UpdateItem of the run state row.
    fn state_update(
        &self,
    ) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
        self.client
            .update_item()
            .table_name(&self.counts_table)
            .key(attr::ITEM_ID, s(STATE_KEY))
            .key(attr::SHARD, s(STATE_SORT_KEY))
    }

    /// The current run state (strongly consistent), `None` before the first run.
    pub async fn state(&self) -> Result<Option<RunState>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.counts_table)
            .key(attr::ITEM_ID, s(STATE_KEY))
            .key(attr::SHARD, s(STATE_SORT_KEY))
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| StoreError::aws("GetItem", err))?;
        output.item.map(parse_state).transpose()
    }

    /// Starts the run for `cut`, unless a run for it (or a later cut) exists or one is still
    /// going; a cut that was given up may be started again (an operator's rerun). `false`
    /// when another invocation got there first.
    pub async fn begin(&self, cut_ms: i64, now_ms: i64) -> Result<bool, StoreError> {
        let result = self
            .state_update()
            .update_expression(format!(
                "SET {cut} = :cut, {phase} = :exporting, {started} = :now, {lease} = :zero, \
                 {attempts} = :zero, {leases} = :zero \
                 REMOVE {arn}, {abandoned}, {report}, {error}, {through}, {tally}, {derived}",
                derived = derived_attributes(),
                through = attr::COMPARED_THROUGH,
                tally = attr::COMPARE_TALLY,
                cut = attr::CUT,
                phase = attr::PHASE,
                started = attr::STARTED_AT,
                lease = attr::LEASE_UNTIL,
                attempts = attr::ATTEMPTS,
                leases = attr::LEASES,
                arn = attr::EXPORT_ARN,
                abandoned = attr::ABANDONED,
                report = attr::REPORT,
                error = attr::LAST_ERROR,
            ))
            .condition_expression(format!(
                "attribute_not_exists({cut}) OR ({phase} = :done AND ({cut} < :cut OR \
                 ({cut} = :cut AND attribute_exists({abandoned}))))",
                cut = attr::CUT,
                phase = attr::PHASE,
                abandoned = attr::ABANDONED,
            ))
            .expression_attribute_values(":cut", n(cut_ms))
            .expression_attribute_values(":exporting", s(RunPhase::Exporting.as_str()))
            .expression_attribute_values(":done", s(RunPhase::Done.as_str()))
            .expression_attribute_values(":now", n(now_ms))
            .expression_attribute_values(":zero", n(0))
            .send()
            .await;
        condition_held("UpdateItem", result)
    }

    /// Records the export DynamoDB started for the run's cut.
    pub async fn exporting(&self, cut_ms: i64, export_arn: &str) -> Result<bool, StoreError> {
        self.step(
            cut_ms,
            RunPhase::Exporting,
            &format!("SET {} = :arn", attr::EXPORT_ARN),
            &[(":arn", s(export_arn))],
        )
        .await
    }

    /// The export completed: the run may compare.
    pub async fn comparing(&self, cut_ms: i64) -> Result<bool, StoreError> {
        self.step(
            cut_ms,
            RunPhase::Exporting,
            &format!("SET {} = :next", attr::PHASE),
            &[(":next", s(RunPhase::Comparing.as_str()))],
        )
        .await
    }

    /// Records that the pipeline passed the cut at `at_ms` and which read models' tables
    /// are exported at that time; `false` when another invocation recorded it first.
    pub async fn derive(
        &self,
        cut_ms: i64,
        at_ms: i64,
        tables: &[String],
    ) -> Result<bool, StoreError> {
        let result = self
            .state_update()
            .update_expression(format!(
                "SET {} = :at, {} = :tables",
                attr::DERIVED_AT,
                attr::DERIVED_TABLES
            ))
            .condition_expression(format!(
                "{} = :cut AND {} = :comparing AND attribute_not_exists({})",
                attr::CUT,
                attr::PHASE,
                attr::DERIVED_AT
            ))
            .expression_attribute_values(":cut", n(cut_ms))
            .expression_attribute_values(":comparing", s(RunPhase::Comparing.as_str()))
            .expression_attribute_values(":at", n(at_ms))
            .expression_attribute_values(":tables", to_attribute(&tables)?)
            .send()
            .await;
        condition_held("UpdateItem", result)
    }

    /// Records a read model's export the run asked for; `false` when it is recorded already.
    pub async fn derived_export(&self, cut_ms: i64, export_arn: &str) -> Result<bool, StoreError> {
        let result = self
            .state_update()
            .update_expression(format!(
                "SET {exports} = list_append(if_not_exists({exports}, :none), :arn)",
                exports = attr::DERIVED_EXPORTS
            ))
            .condition_expression(format!(
                "{} = :cut AND {} = :comparing AND NOT contains({}, :one)",
                attr::CUT,
                attr::PHASE,
                attr::DERIVED_EXPORTS
            ))
            .expression_attribute_values(":cut", n(cut_ms))
            .expression_attribute_values(":comparing", s(RunPhase::Comparing.as_str()))
            .expression_attribute_values(":none", AttributeValue::L(Vec::new()))
            .expression_attribute_values(":arn", AttributeValue::L(vec![s(export_arn)]))
            .expression_attribute_values(":one", s(export_arn))
            .send()
            .await;
        condition_held("UpdateItem", result)
    }

    /// Takes the compare step's lease until `until_ms`, if no other invocation holds it.
    pub async fn lease(&self, cut_ms: i64, now_ms: i64, until_ms: i64) -> Result<bool, StoreError> {
        let result = self
            .state_update()
            .update_expression(format!(
                "SET {} = :until ADD {} :one",
                attr::LEASE_UNTIL,
                attr::LEASES
            ))
            .expression_attribute_values(":one", n(1))
            .condition_expression(format!(
                "{} = :cut AND {} = :comparing AND {} < :now",
                attr::CUT,
                attr::PHASE,
                attr::LEASE_UNTIL
            ))
            .expression_attribute_values(":cut", n(cut_ms))
            .expression_attribute_values(":comparing", s(RunPhase::Comparing.as_str()))
            .expression_attribute_values(":now", n(now_ms))
            .expression_attribute_values(":until", n(until_ms))
            .send()
            .await;
        condition_held("UpdateItem", result)
    }

    /// The compare ran out of its invocation's time after judging `through`: records where it
    /// stopped and its tally, and returns the lease. The lease count starts over, since this
    /// invocation made progress: only invocations that die without pausing use the run up.
    pub async fn pause(
        &self,
        cut_ms: i64,
        through: &ItemId,
        tally: &str,
    ) -> Result<bool, StoreError> {
        self.step(
            cut_ms,
            RunPhase::Comparing,
            &format!(
                "SET {} = :through, {} = :tally, {} = :zero, {} = :zero",
                attr::COMPARED_THROUGH,
                attr::COMPARE_TALLY,
                attr::LEASE_UNTIL,
                attr::LEASES
            ),
            &[
                (":through", s(through.as_str())),
                (":tally", s(tally)),
                (":zero", n(0)),
            ],
        )
        .await
    }

    /// Opens a finished run's compare step again (an operator's rerun): its corrections are
    /// conditional on the item's last correcting cut, so it adds nothing already added.
    /// A run given up has no export to compare: [`Self::begin`] starts it again instead.
    pub async fn reopen(&self, cut_ms: i64, now_ms: i64) -> Result<bool, StoreError> {
        let result = self
            .state_update()
            .update_expression(format!(
                "SET {} = :next, {} = :zero, {} = :now, {} = :zero REMOVE {}, {}",
                attr::PHASE,
                attr::LEASE_UNTIL,
                attr::STARTED_AT,
                attr::LEASES,
                attr::COMPARED_THROUGH,
                attr::COMPARE_TALLY
            ))
            .expression_attribute_values(":now", n(now_ms))
            .condition_expression(format!(
                "{} = :cut AND {} = :from AND attribute_exists({}) AND attribute_exists({})",
                attr::CUT,
                attr::PHASE,
                attr::EXPORT_ARN,
                attr::REPORT
            ))
            .expression_attribute_values(":cut", n(cut_ms))
            .expression_attribute_values(":from", s(RunPhase::Done.as_str()))
            .expression_attribute_values(":next", s(RunPhase::Comparing.as_str()))
            .expression_attribute_values(":zero", n(0))
            .send()
            .await;
        condition_held("UpdateItem", result)
    }

    /// An attempt of the run failed (`why`): it starts again from a new export, and the
    /// attempts so far are counted. The new attempt count, `None` when the run moved on
    /// meanwhile.
    pub async fn retry(&self, cut_ms: i64, why: &str) -> Result<Option<u32>, StoreError> {
        let result = self
            .state_update()
            .update_expression(format!(
                "SET {phase} = :exporting, {lease} = :zero, {error} = :reason \
                 ADD {attempts} :one REMOVE {arn}, {through}, {tally}, {derived}",
                derived = derived_attributes(),
                through = attr::COMPARED_THROUGH,
                tally = attr::COMPARE_TALLY,
                phase = attr::PHASE,
                lease = attr::LEASE_UNTIL,
                error = attr::LAST_ERROR,
                attempts = attr::ATTEMPTS,
                arn = attr::EXPORT_ARN,
            ))
            .condition_expression(format!("{} = :cut AND {} <> :done", attr::CUT, attr::PHASE))
            .expression_attribute_values(":cut", n(cut_ms))
            .expression_attribute_values(":done", s(RunPhase::Done.as_str()))
            .expression_attribute_values(":exporting", s(RunPhase::Exporting.as_str()))
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":reason", reason(why))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::UpdatedNew)
            .send()
            .await;
        match result {
            Ok(output) => {
                let attempts = output
                    .attributes
                    .and_then(|a| a.get(attr::ATTEMPTS).cloned())
                    .and_then(|v| v.as_n().ok().and_then(|n| n.parse().ok()))
                    .ok_or_else(|| StoreError::Corrupt("no attempt count after ADD".into()))?;
                Ok(Some(attempts))
            }
            Err(err) => condition_held::<(), _>("UpdateItem", Err(err)).map(|_| None),
        }
    }

    /// Gives a run up (the cut cannot be exported, or failed every attempt): the run is done,
    /// with why, and the next cut may start. The cut joins `state`'s list of cuts given up
    /// since the last completed run (its oldest dropped past [`GIVEN_UP_KEPT`]); the list is
    /// written whole, on condition the run is still `state`'s.
    pub async fn abandon(&self, state: &RunState, why: &str) -> Result<bool, StoreError> {
        let mut given_up = state.given_up.clone();
        given_up.push(GivenUpCut {
            cut: state.cut_ms,
            reason: why.chars().take(REASON_BYTES / 4).collect(),
        });
        let dropped = given_up.len().saturating_sub(GIVEN_UP_KEPT);
        given_up.drain(..dropped);
        let listed = to_attribute(&given_up)?;
        let result = self
            .state_update()
            .update_expression(format!(
                "SET {} = :next, {} = :reason, {} = :given_up, {} = :dropped REMOVE {}",
                attr::PHASE,
                attr::ABANDONED,
                attr::GIVEN_UP,
                attr::GIVEN_UP_DROPPED,
                attr::REPORT
            ))
            .condition_expression(format!("{} = :cut AND {} <> :next", attr::CUT, attr::PHASE))
            .expression_attribute_values(":cut", n(state.cut_ms))
            .expression_attribute_values(":next", s(RunPhase::Done.as_str()))
            .expression_attribute_values(":reason", reason(why))
            .expression_attribute_values(":given_up", listed)
            .expression_attribute_values(
                ":dropped",
                n(state.given_up_dropped as i64 + dropped as i64),
            )
            .send()
            .await;
        condition_held("UpdateItem", result)
    }

    /// The run is over; `report_key` is where its drift report went.
    pub async fn done(&self, cut_ms: i64, report_key: &str) -> Result<bool, StoreError> {
        self.step(
            cut_ms,
            RunPhase::Comparing,
            &format!(
                "SET {} = :next, {} = :report REMOVE {}, {}, {}, {}",
                attr::PHASE,
                attr::REPORT,
                attr::COMPARED_THROUGH,
                attr::COMPARE_TALLY,
                attr::GIVEN_UP,
                attr::GIVEN_UP_DROPPED
            ),
            &[
                (":next", s(RunPhase::Done.as_str())),
                (":report", s(report_key)),
            ],
        )
        .await
    }

    async fn step(
        &self,
        cut_ms: i64,
        from: RunPhase,
        update: &str,
        values: &[(&str, AttributeValue)],
    ) -> Result<bool, StoreError> {
        let mut request = self
            .state_update()
            .update_expression(update)
            .condition_expression(format!("{} = :cut AND {} = :from", attr::CUT, attr::PHASE))
            .expression_attribute_values(":cut", n(cut_ms))
            .expression_attribute_values(":from", s(from.as_str()));
        for (name, value) in values {
            request = request.expression_attribute_values(*name, value.clone());
        }
        condition_held("UpdateItem", request.send().await)
    }
}

/// Removes `attributes` from the row at `key`, and the `guarded` ones (numbers) only while
/// they are still below `before` (a writer may have set one anew since the row was read),
/// [`REMOVED_PER_UPDATE`] per update.
pub(crate) async fn remove_attributes(
    client: &Client,
    table: &str,
    key: &[(String, AttributeValue)],
    attributes: &[String],
    (guarded, before): (&[String], i64),
) -> Result<(), StoreError> {
    let all: Vec<(&String, bool)> = attributes
        .iter()
        .map(|a| (a, false))
        .chain(guarded.iter().map(|a| (a, true)))
        .collect();
    for chunk in all.chunks(REMOVED_PER_UPDATE) {
        let guarded_in_chunk = chunk.iter().any(|(_, guarded)| *guarded);
        if remove(client, table, key, chunk, before).await? || !guarded_in_chunk {
            continue;
        }
        // A guarded attribute was set anew: remove the rest, keep the guarded ones.
        let unguarded: Vec<(&String, bool)> = chunk
            .iter()
            .filter(|(_, guarded)| !guarded)
            .copied()
            .collect();
        if !unguarded.is_empty() {
            remove(client, table, key, &unguarded, before).await?;
        }
    }
    Ok(())
}

/// One REMOVE of `attributes`, on condition each guarded one is absent or below `before`;
/// `false` when that condition failed.
async fn remove(
    client: &Client,
    table: &str,
    key: &[(String, AttributeValue)],
    attributes: &[(&String, bool)],
    before: i64,
) -> Result<bool, StoreError> {
    let mut request = client
        .update_item()
        .table_name(table)
        .set_key(Some(key.iter().cloned().collect()));
    let mut names = Vec::new();
    let mut conditions = Vec::new();
    for (i, (attribute, guarded)) in attributes.iter().enumerate() {
        names.push(format!("#r{i}"));
        request = request.expression_attribute_names(format!("#r{i}"), *attribute);
        if *guarded {
            conditions.push(format!("(attribute_not_exists(#r{i}) OR #r{i} < :before)"));
        }
    }
    if !conditions.is_empty() {
        request = request
            .condition_expression(conditions.join(" AND "))
            .expression_attribute_values(":before", n(before));
    }
    let result = request
        .update_expression(format!("REMOVE {}", names.join(", ")))
        .send()
        .await;
    condition_held("UpdateItem", result)
}
