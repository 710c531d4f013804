//! What reconciliation keeps on the Counts table: its run state, the count rows it reads back
//! per item, and the corrections it writes.
//!
//! - `#reconcile` / `S`: the one run in progress or last finished (cut, phase, export ARN,
//!   a lease, and a paused compare's checkpoint). Every step is a conditional write on it,
//!   so two overlapping invocations never both start, or both compare, the same cut.
//! - `<item>` / `D#C`: the item's correction row, a count row like the others (readers sum
//!   it), whose `runs` set names every run that corrected it, so a correction is added once.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use likes_core::pipeline::overflow_partition;
use likes_core::reconcile::{near_cut_attribute, subtotal_attributes, CountRowState};
use likes_core::{Delta, ItemId};

use crate::counts::OVERFLOW_MARKER;
use crate::error::condition_held;
use crate::pages::query_all;
use crate::rows::{
    attr, from_item, to_attribute, Attribute, CountRow, Item, ReconciledRow, RunPhase, RunStateRow,
};
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

/// Where a count row is: its partition key (the item, or one of its overflow partitions) and
/// sort key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowKey {
    pub partition: String,
    pub sort_key: String,
}

/// An item's count rows as reconciliation reads them.
pub type ItemRows = BTreeMap<ItemId, Vec<(RowKey, CountRowState)>>;

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

    /// Every item's count rows (base, overflow and correction rows), by item. A full Scan in
    /// parallel segments.
    pub async fn count_rows(&self) -> Result<ItemRows, StoreError> {
        let mut segments = tokio::task::JoinSet::new();
        for segment in 0..SCAN_SEGMENTS {
            let store = self.clone();
            segments.spawn(async move { store.scan_segment(segment).await });
        }
        let mut rows = ItemRows::new();
        while let Some(joined) = segments.join_next().await {
            let found = joined.map_err(StoreError::Task)??;
            for (item, key, row) in found {
                rows.entry(item).or_default().push((key, row));
            }
        }
        Ok(rows)
    }

    /// One item's count rows (base, overflow and correction rows) with their subtotals,
    /// strongly consistent: the base partition, then every overflow partition its marker
    /// names, each read page by page.
    pub async fn item_rows(&self, item: &ItemId) -> Result<Vec<CountRowState>, StoreError> {
        let mut rows = Vec::new();
        let mut partitions = 0;
        let mut partition = item.as_str().to_owned();
        let mut h = 0;
        loop {
            let query = self
                .client
                .query()
                .table_name(&self.counts_table)
                .consistent_read(true)
                .key_condition_expression(format!("{} = :partition", attr::ITEM_ID))
                .expression_attribute_values(":partition", s(&partition));
            for row in query_all(query).await? {
                let shard = row.get(attr::SHARD).and_then(|v| v.as_s().ok());
                if h == 0 && shard.is_some_and(|shard| shard == OVERFLOW_MARKER) {
                    partitions = from_item::<CountRow>(row)?.partitions.unwrap_or(0);
                } else if let Some((_, _, state)) = parse_count_row(row)? {
                    rows.push(state);
                }
            }
            h += 1;
            if h > partitions {
                return Ok(rows);
            }
            partition = overflow_partition(item, h);
        }
    }

    async fn scan_segment(
        &self,
        segment: i32,
    ) -> Result<Vec<(ItemId, RowKey, CountRowState)>, StoreError> {
        let mut found = Vec::new();
        let mut start = None;
        loop {
            let (rows, next) = self.scan_page(segment, start).await?;
            found.extend(rows);
            match next {
                Some(key) => start = Some(key),
                None => return Ok(found),
            }
        }
    }

    /// One page of Scan segment `segment` of [`SCAN_SEGMENTS`] from `start`: its count rows,
    /// and where the next page starts (`None` after the last).
    pub async fn scan_page(
        &self,
        segment: i32,
        start: Option<Item>,
    ) -> Result<(Vec<(ItemId, RowKey, CountRowState)>, Option<Item>), StoreError> {
        let page = self
            .client
            .scan()
            .table_name(&self.counts_table)
            .segment(segment)
            .total_segments(SCAN_SEGMENTS)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|err| StoreError::aws("Scan", err))?;
        let mut found = Vec::new();
        for row in page.items.unwrap_or_default() {
            if let Some(parsed) = parse_count_row(row)? {
                found.push(parsed);
            }
        }
        Ok((found, page.last_evaluated_key.filter(|key| !key.is_empty())))
    }

    /// Adds `delta` to the item's correction row, attributed to the epoch before the cut, once
    /// per run: `false` when this run already corrected the item (a rerun writes nothing).
    /// Runs go forward in cut order, so the row keeps only the last cut that corrected it
    /// (`last_cut`), one number however many runs there are; a row of the older layout, which
    /// named every run in a set `runs`, is still checked against it and moved to the number.
    pub async fn correct(
        &self,
        item: &ItemId,
        delta: Delta,
        cut_epoch: i64,
        run_id: &str,
    ) -> Result<bool, StoreError> {
        let (like, dislike) = subtotal_attributes(cut_epoch - 1);
        let result = self
            .client
            .update_item()
            .table_name(&self.counts_table)
            .key(attr::ITEM_ID, s(item.as_str()))
            .key(attr::SHARD, s(CORRECTION_ROW))
            .update_expression(format!(
                "SET {last} = :cut ADD {} :like, {} :dislike, #el :like, #ed :dislike \
                 REMOVE {runs}",
                attr::LIKE_COUNT,
                attr::DISLIKE_COUNT,
                last = attr::LAST_CUT,
                runs = attr::RUNS
            ))
            .condition_expression(format!(
                "(attribute_not_exists({last}) OR {last} < :cut) AND \
                 (attribute_not_exists({runs}) OR NOT contains({runs}, :id))",
                last = attr::LAST_CUT,
                runs = attr::RUNS
            ))
            .expression_attribute_names("#el", like)
            .expression_attribute_names("#ed", dislike)
            .expression_attribute_values(":like", n(delta.like))
            .expression_attribute_values(":dislike", n(delta.dislike))
            .expression_attribute_values(":cut", n(cut_epoch))
            .expression_attribute_values(":id", s(run_id))
            .send()
            .await;
        condition_held("UpdateItem", result)
    }

    /// Drops subtotals of epochs before the cut, and near-cut counts before it, from one row:
    /// no later cut needs them, and rows stay small. However many there are, each update
    /// removes at most [`REMOVED_PER_UPDATE`], so no expression nears DynamoDB's 4 KB.
    pub async fn drop_reconciled(
        &self,
        key: &RowKey,
        attributes: &[String],
    ) -> Result<(), StoreError> {
        let key = [
            (attr::ITEM_ID.to_owned(), s(&key.partition)),
            (attr::SHARD.to_owned(), s(&key.sort_key)),
        ];
        remove_attributes(&self.client, &self.counts_table, &key, attributes).await
    }
}

/// Removes `attributes` from the row at `key`, [`REMOVED_PER_UPDATE`] per update.
pub(crate) async fn remove_attributes(
    client: &Client,
    table: &str,
    key: &[(String, AttributeValue)],
    attributes: &[String],
) -> Result<(), StoreError> {
    for chunk in attributes.chunks(REMOVED_PER_UPDATE) {
        let mut request = client
            .update_item()
            .table_name(table)
            .set_key(Some(key.iter().cloned().collect()));
        let mut names = Vec::new();
        for (i, attribute) in chunk.iter().enumerate() {
            names.push(format!("#r{i}"));
            request = request.expression_attribute_names(format!("#r{i}"), attribute);
        }
        request
            .update_expression(format!("REMOVE {}", names.join(", ")))
            .send()
            .await
            .map_err(|err| StoreError::aws("UpdateItem", err))?;
    }
    Ok(())
}

/// The attributes of a row that neither a later cut nor a rerun of `cut` needs: a rerun must
/// still see the changes near its own cut, or it would correct the items it deferred.
pub fn reconciled_attributes(row: &CountRowState, cut: i64) -> Vec<String> {
    let mut names = Vec::new();
    for epoch in row.subtotals.keys().filter(|e| **e < cut) {
        let (like, dislike) = subtotal_attributes(*epoch);
        names.push(like);
        names.push(dislike);
    }
    for k in row.near_cuts.keys().filter(|k| **k < cut) {
        names.push(near_cut_attribute(*k));
    }
    names
}

fn parse_state(row: Item) -> Result<RunState, StoreError> {
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

/// A row's totals with the epoch subtotals (`e<j>l`, `e<j>d`) and near-cut counts (`n<k>`)
/// among its other attributes; an attribute of another name is left out.
pub(crate) fn row_state(total: Delta, others: &BTreeMap<String, Attribute>) -> CountRowState {
    let mut state = CountRowState {
        total,
        ..CountRowState::default()
    };
    for (name, value) in others {
        let Attribute::Number(number) = *value else {
            continue;
        };
        let (kind, tail) = name.split_at(1.min(name.len()));
        let epoch = |suffix: char| {
            tail.strip_suffix(suffix)
                .and_then(|e| e.parse::<i64>().ok())
        };
        match kind {
            "e" => {
                if let Some(epoch) = epoch('l') {
                    state.subtotals.entry(epoch).or_default().like = number;
                } else if let Some(epoch) = epoch('d') {
                    state.subtotals.entry(epoch).or_default().dislike = number;
                }
            }
            "n" => {
                if let Ok(cut) = tail.parse::<i64>() {
                    state.near_cuts.insert(cut, number.max(0) as u64);
                }
            }
            _ => {}
        }
    }
    state
}

/// A count row as (item, state), with its key kept for cleanup; `None` for rows that are not
/// count rows (freshness rows, the run state, overflow markers).
fn parse_count_row(row: Item) -> Result<Option<(ItemId, RowKey, CountRowState)>, StoreError> {
    let row: ReconciledRow = from_item(row)?;
    if row.item_id.starts_with('#') || !row.shard.starts_with("D#") {
        return Ok(None);
    }
    // An overflow partition is `<item>#<h>`; `#` never appears in an item id.
    let item = row.item_id.split('#').next().unwrap_or_default();
    let item = ItemId::parse(item)
        .map_err(|err| StoreError::Corrupt(format!("count row {}: {err}", row.item_id)))?;
    let state = row_state(
        Delta {
            like: row.like_count,
            dislike: row.dislike_count,
        },
        &row.others,
    );
    let key = RowKey {
        partition: row.item_id,
        sort_key: row.shard,
    };
    Ok(Some((item, key, state)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_rows_are_read_with_their_subtotals_and_near_cut_counts() {
        let row: Item = [
            (attr::ITEM_ID, s("game:1#3")),
            (attr::SHARD, s("D#4")),
            ("like_count", n(7)),
            ("dislike_count", n(-1)),
            ("e12l", n(5)),
            ("e12d", n(-1)),
            ("e13l", n(2)),
            ("n13", n(1)),
            ("updated_at", n(99)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let (item, key, state) = parse_count_row(row).unwrap().unwrap();
        assert_eq!(
            (key.partition.as_str(), key.sort_key.as_str()),
            ("game:1#3", "D#4")
        );
        assert_eq!(
            item.as_str(),
            "game:1",
            "an overflow partition belongs to its item"
        );
        assert_eq!(
            state.total,
            Delta {
                like: 7,
                dislike: -1
            }
        );
        assert_eq!(
            state.subtotals[&12],
            Delta {
                like: 5,
                dislike: -1
            }
        );
        assert_eq!(
            state.subtotals[&13],
            Delta {
                like: 2,
                dislike: 0
            }
        );
        assert_eq!(state.near_cuts[&13], 1);
        assert_eq!(reconciled_attributes(&state, 13), ["e12l", "e12d"]);
        assert_eq!(
            reconciled_attributes(&state, 14),
            ["e12l", "e12d", "e13l", "e13d", "n13"]
        );
    }

    #[test]
    fn rows_that_are_not_count_rows_are_skipped() {
        for (pk, sk) in [("#wm#s1", "W"), ("#reconcile", "S"), ("game:1", "H")] {
            let row: Item = [(attr::ITEM_ID, s(pk)), (attr::SHARD, s(sk))]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect();
            assert_eq!(parse_count_row(row).unwrap(), None, "{pk} {sk}");
        }
    }
}
