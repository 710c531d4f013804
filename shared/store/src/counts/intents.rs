//! The aggregator's exactly-once writes, per stream shard, without transactions.
//!
//! Beside a shard's watermark row `#wm#<shard>` / `W`, which also holds its progress (the last
//! record applied, `through_seq`, and the last intent completed, `intent`), each chunk is
//! frozen as an intent row before any count row is written. The intent row is the claim of
//! the shard's next step: its key `N#<m>` names the intent the progress completed when it was
//! frozen (`m`, 0 before any), and it is put on condition that key is new, so of two
//! consumers that read the same progress (a replaced mapping running beside the new one, a
//! batch delivered twice at once) one claims the step and the other is refused before it
//! writes anything; the refused one reads the shard again and finishes the winner's intent
//! instead. Every move of `through_seq` completes an intent, so a progress is never claimed
//! from twice. The intent is then applied, one plain conditional UpdateItem per count row that
//! ADDs the row's delta and notes `n` for the shard (`i#<shard>`) on condition the row noted
//! a lower one, and completed by moving the progress, on condition no other consumer moved
//! it. A crash anywhere leaves a pending intent (numbered above the progress) that the next
//! delivery finishes first; a row that took it already refuses it. Hundreds of shards adding
//! to a viral item's rows at once queue on them instead of cancelling each other, and every
//! row write is billed once.
//!
//! Intent rows are never deleted (a delete is billed as a write): their TTL drops them.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::update_item::{UpdateItemError, UpdateItemOutput};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use aws_sdk_dynamodb::Client;
use futures_util::stream::{self, StreamExt, TryStreamExt};
use likes_core::pipeline::{shard_tag, CountTarget, Lane, RowDelta, REPLAY_HORIZON_MS};
use likes_core::reconcile::{
    near_cut_attribute_of, split_at_first_epoch, subtotal_attributes, FIRST_EPOCH,
};
use likes_core::{Delta, ItemId};

use super::{count_key, COUNT_ROW_PREFIX, OVERFLOW_MARKER};
use crate::error::condition_held;
use crate::first_epochs::{FirstEpochs, Start, Subtotals, Written};
use crate::freshness::{watermark_partition, WATERMARK_ROW};
use crate::reconciliation::CORRECTION_ROW;
use crate::rows::attr::{
    DISLIKE_COUNT, INTENT, ITEM_ID, LIKED_BUCKETS, LIKE_COUNT, PARTITIONS, PROBE_KEY, SHARD,
    STREAM_TIME, THROUGH_SEQ, UPDATED_AT,
};
use crate::rows::{self, listed_buckets, number, CountIntentRow, Item, WatermarkRow};
use crate::StoreError;

/// Count row writes of one intent in flight at once.
const IN_FLIGHT: usize = 32;
/// Intent rows' sort keys start with this; the number of the intent they follow comes next,
/// in 20 digits, so they sort in the order they were claimed, just before `W`. (Intent rows
/// written before were keyed `I#<n>` by their own number: they sort before every `N#` row,
/// so a pending one is still read, and finished, until the first step is claimed.)
pub const INTENT_PREFIX: &str = "N#";
/// A count row's note of a shard's last intent: `i#<12 hex digits of the shard id's hash>`.
pub const INTENT_NOTE_PREFIX: &str = "i#";

/// Where a shard stands: its progress, and an intent begun and not completed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardCounting {
    pub progress: Option<ShardProgress>,
    pub pending: Option<CountIntent>,
}

/// The last record a shard applied, and its last intent completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardProgress {
    pub through_seq: String,
    pub intent: Option<i64>,
}

/// A chunk frozen before its count rows are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountIntent {
    pub n: i64,
    /// The chunk's last record, its stream time, and the last probe key in it.
    pub last_seq: String,
    pub stream_time_ms: i64,
    pub probe_key: Option<String>,
    pub deltas: BTreeMap<CountTarget, RowDelta>,
}

/// One count row's delta as an intent keeps it: item, lane (0 for the base partition),
/// row, like and dislike totals, `[epoch, like, dislike]` subtotals, `[cut, changes]`, the
/// likers buckets.
type IntentDelta = (
    String,
    u32,
    u32,
    i64,
    i64,
    Vec<(i64, i64, i64)>,
    Vec<(i64, u64)>,
    Vec<u32>,
);

/// Writes counts exactly once, a shard at a time.
#[derive(Debug, Clone)]
pub struct CountsWriter {
    client: Client,
    table: String,
    first_epochs: FirstEpochs,
}

impl CountsWriter {
    pub fn new(client: Client, counts_table: impl Into<String>) -> Self {
        Self {
            client,
            table: counts_table.into(),
            first_epochs: FirstEpochs::default(),
        }
    }

    /// The shard's progress and its pending intent, if any, read strongly consistent in one
    /// Query: the progress row sorts last, the newest intent just before it.
    pub async fn shard_state(&self, shard: &str) -> Result<ShardCounting, StoreError> {
        let found = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .key_condition_expression(format!("{ITEM_ID} = :partition"))
            .expression_attribute_values(
                ":partition",
                AttributeValue::S(watermark_partition(shard)),
            )
            .scan_index_forward(false)
            .limit(2)
            .send()
            .await
            .map_err(|err| StoreError::aws("Query", err))?;
        let mut state = ShardCounting::default();
        let mut newest: Option<CountIntent> = None;
        for row in found.items.unwrap_or_default() {
            let sort_key = row.get(SHARD).and_then(|v| v.as_s().ok());
            if sort_key.is_some_and(|k| k == WATERMARK_ROW) {
                let row: WatermarkRow = rows::from_item(row)?;
                state.progress = row.through_seq.map(|through_seq| ShardProgress {
                    through_seq,
                    intent: row.intent,
                });
            } else if newest.is_none() {
                newest = Some(decode_intent(rows::from_item(row)?)?);
            }
        }
        let done = state.progress.as_ref().and_then(|p| p.intent);
        state.pending = newest.filter(|intent| done.is_none_or(|done| intent.n > done));
        Ok(state)
    }

    /// Freezes `intent` as the shard's intent row, before any of its count rows is written:
    /// the claim of the step after `progress`. `false` when another consumer of the shard
    /// claimed that step first: nothing was written, and the shard is to be read again.
    pub async fn begin(
        &self,
        shard: &str,
        progress: Option<&ShardProgress>,
        intent: &CountIntent,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let row = encode_intent(shard, progress.and_then(|p| p.intent), intent, now_ms)?;
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(rows::to_item(&row)?))
            .condition_expression(format!("attribute_not_exists({ITEM_ID})"))
            .send()
            .await;
        condition_held("PutItem", result)
    }

    /// Adds each row's delta of `intent` to the rows that have not taken it yet; the number
    /// of rows that took it now. A delta's changes from before its row's first epoch go to
    /// the item's correction row instead, summed per item: a retry splits them the same
    /// way (a row's first epoch never changes), and the correction row's note of the intent
    /// refuses them a second time.
    pub async fn apply(
        &self,
        shard: &str,
        intent: &CountIntent,
        now_ms: i64,
    ) -> Result<usize, StoreError> {
        let note = intent_note(shard);
        let writes: Vec<_> = intent
            .deltas
            .iter()
            .map(|(target, delta)| async {
                let (took, early) = self.add(target, delta, &note, intent.n, now_ms).await?;
                Ok::<_, StoreError>((took, early.map(|early| (&target.item, early))))
            })
            .collect();
        let added: Vec<(bool, Option<(&ItemId, RowDelta)>)> = stream::iter(writes)
            .buffer_unordered(IN_FLIGHT)
            .try_collect()
            .await?;
        let mut early: BTreeMap<&ItemId, RowDelta> = BTreeMap::new();
        for (item, part) in added.iter().filter_map(|(_, early)| early.as_ref()) {
            let sum = early.entry(*item).or_default();
            sum.total += part.total;
            for (epoch, delta) in &part.by_epoch {
                *sum.by_epoch.entry(*epoch).or_default() += *delta;
            }
        }
        let corrections: Vec<_> = early
            .iter()
            .map(|(item, part)| {
                let key = count_key(item.as_str().to_owned(), CORRECTION_ROW.to_owned());
                self.write(key, part, Subtotals::Every, &note, intent.n, now_ms)
            })
            .collect();
        stream::iter(corrections)
            .buffer_unordered(IN_FLIGHT)
            .try_collect::<Vec<_>>()
            .await?;
        Ok(added.into_iter().filter(|(took, _)| *took).count())
    }

    /// Moves the shard's watermark to `stream_time_ms` and, after an intent, its progress to
    /// `through_seq` and to that intent; on condition the progress is still `was`. `false`
    /// when another consumer of the shard moved it first: nothing was written. Records that
    /// change nothing move the watermark only: they are no work to skip, and a progress that
    /// moves only with a completed intent is never claimed from twice ([`Self::begin`]).
    /// The watermark never goes back: stream times are approximate, so a record may be
    /// stamped before one the watermark already passed (and a retry may deliver fewer
    /// records than a watermark-only move covered); the watermark then stays where it is,
    /// and only the progress moves. Puts off the row's expiry to [`REPLAY_HORIZON_MS`] from
    /// `now_ms`.
    pub async fn advance(
        &self,
        shard: &str,
        was: Option<&ShardProgress>,
        to: Advance<'_>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let result = self.move_progress(shard, was, to, true, now_ms).await;
        let held = match result {
            Ok(_) => return Ok(true),
            Err(err) => match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(failed)) => failed
                    .item()
                    .and_then(|old| old.get(THROUGH_SEQ))
                    .and_then(|seq| seq.as_s().ok())
                    .cloned(),
                _ => return Err(StoreError::aws("UpdateItem", err)),
            },
        };
        if held.as_deref() != was.map(|was| was.through_seq.as_str()) {
            return Ok(false);
        }
        // Refused only for the watermark, already past these records: what else moves
        // (the progress, the probe key the shard saw last) moves without it.
        if to.completed.is_none() && to.probe_key.is_none() {
            return Ok(true);
        }
        let result = self.move_progress(shard, was, to, false, now_ms).await;
        condition_held("UpdateItem", result)
    }

    /// The UpdateItem of [`Self::advance`]: the progress and the probe key on condition the
    /// progress is still `was`, and with `watermark` the watermark too, on condition it is
    /// not past `to.stream_time_ms` (the row as it was comes back when refused).
    async fn move_progress(
        &self,
        shard: &str,
        was: Option<&ShardProgress>,
        to: Advance<'_>,
        watermark: bool,
        now_ms: i64,
    ) -> Result<UpdateItemOutput, SdkError<UpdateItemError, HttpResponse>> {
        let mut sets = vec![
            format!("{UPDATED_AT} = :now"),
            "expires_at = :expires".to_owned(),
        ];
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(count_key(
                watermark_partition(shard),
                WATERMARK_ROW.into(),
            )))
            .expression_attribute_values(":now", number(now_ms))
            .expression_attribute_values(":expires", number((now_ms + REPLAY_HORIZON_MS) / 1000))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        let mut condition = match was {
            None => format!("attribute_not_exists({THROUGH_SEQ})"),
            Some(was) => {
                update = update.expression_attribute_values(
                    ":was",
                    AttributeValue::S(was.through_seq.clone()),
                );
                format!("{THROUGH_SEQ} = :was")
            }
        };
        if watermark {
            sets.push(format!("{STREAM_TIME} = :t"));
            condition.push_str(&format!(
                " AND (attribute_not_exists({STREAM_TIME}) OR {STREAM_TIME} <= :t)"
            ));
            update = update.expression_attribute_values(":t", number(to.stream_time_ms));
        }
        if let Some(probe) = to.probe_key {
            sets.push(format!("{PROBE_KEY} = :p"));
            update = update.expression_attribute_values(":p", AttributeValue::S(probe.to_owned()));
        }
        if let Some((through_seq, n)) = to.completed {
            sets.push(format!("{THROUGH_SEQ} = :seq"));
            sets.push(format!("{INTENT} = :n"));
            update = update
                .expression_attribute_values(":seq", AttributeValue::S(through_seq.to_owned()))
                .expression_attribute_values(":n", number(n));
        }
        update
            .condition_expression(condition)
            .update_expression(format!("SET {}", sets.join(", ")))
            .send()
            .await
    }

    /// Tells readers of `item` to add its overflow partitions `1..=partitions`. Written before
    /// the first intent that writes one of them, so no overflow row is ever invisible to a
    /// reader; the marker only grows, so raising H later is safe.
    pub async fn mark_overflow(&self, item: &ItemId, partitions: u32) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(count_key(
                item.as_str().to_owned(),
                OVERFLOW_MARKER.to_owned(),
            )))
            .update_expression("SET #partitions = :h")
            .condition_expression("attribute_not_exists(#partitions) OR #partitions < :h")
            .expression_attribute_names("#partitions", PARTITIONS)
            .expression_attribute_values(":h", AttributeValue::N(partitions.to_string()))
            .send()
            .await;
        // Refused: the marker already names as many partitions or more.
        condition_held("UpdateItem", result).map(drop)
    }

    /// One count row's ADD of intent `n` unless the row took it already (`false` then), with
    /// the part of `written` from before the row's first epoch, which the row never takes.
    async fn add(
        &self,
        target: &CountTarget,
        written: &RowDelta,
        note: &str,
        n: i64,
        now_ms: i64,
    ) -> Result<(bool, Option<RowDelta>), StoreError> {
        let partition = target.partition_key();
        let sort_key = format!("{COUNT_ROW_PREFIX}{}", target.row);
        let key = count_key(partition.clone(), sort_key.clone());
        let earliest = written.by_epoch.keys().next().copied();
        let begin = |first| {
            self.write(
                key.clone(),
                written,
                Subtotals::Begin(first),
                note,
                n,
                now_ms,
            )
        };
        let (first, noted) = match self
            .first_epochs
            .start((partition, sort_key), earliest, begin)
            .await?
        {
            Start::Took => return Ok((true, None)),
            Start::Known { first, noted } => (first, noted),
        };
        let (row, early, subtotals) = match first {
            Some(first) => {
                let (row, early) = split_at_first_epoch(written, first);
                (row, early, Subtotals::After(first))
            }
            None => (written.clone(), None, Subtotals::Every),
        };
        if noted {
            return Ok((false, early));
        }
        let took = self.write(key, &row, subtotals, note, n, now_ms).await?;
        Ok((took == Written::Took, early))
    }

    /// One conditional UpdateItem of a count row: ADDs `written` (its totals, the subtotals
    /// `subtotals` says, its near-cut counts, its likers buckets) and notes intent `n` for
    /// the shard, on condition the row noted a lower one.
    async fn write(
        &self,
        key: Item,
        written: &RowDelta,
        subtotals: Subtotals,
        note: &str,
        n: i64,
        now_ms: i64,
    ) -> Result<Written, StoreError> {
        let mut adds = vec![
            (LIKE_COUNT.to_owned(), written.total.like),
            (DISLIKE_COUNT.to_owned(), written.total.dislike),
        ];
        let implicit = subtotals.implicit();
        for (epoch, delta) in written
            .by_epoch
            .iter()
            .filter(|(e, _)| Some(**e) != implicit)
        {
            let (like, dislike) = subtotal_attributes(*epoch);
            adds.push((like, delta.like));
            adds.push((dislike, delta.dislike));
        }
        for (cut, changes) in &written.near_cuts {
            adds.push((near_cut_attribute_of(*cut, implicit), *changes as i64));
        }
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .expression_attribute_names("#note", note)
            .expression_attribute_values(":n", number(n))
            .expression_attribute_values(":now", number(now_ms))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        let noted = "(attribute_not_exists(#note) OR #note < :n)";
        let mut sets = format!("{UPDATED_AT} = :now, #note = :n");
        update = match subtotals {
            Subtotals::Begin(first) => {
                sets.push_str(", #first = :first");
                update
                    .condition_expression(format!(
                        "{noted} AND {}",
                        Subtotals::begin_condition(LIKE_COUNT)
                    ))
                    .expression_attribute_names("#first", FIRST_EPOCH)
                    .expression_attribute_values(":first", number(first))
            }
            _ => update.condition_expression(noted),
        };
        let mut clauses = Vec::with_capacity(adds.len());
        for (i, (name, value)) in adds.into_iter().enumerate() {
            clauses.push(format!("#a{i} :a{i}"));
            update = update
                .expression_attribute_names(format!("#a{i}"), name)
                .expression_attribute_values(format!(":a{i}"), number(value));
        }
        if !written.liked_buckets.is_empty() {
            clauses.push("#lb :lb".to_owned());
            update = update
                .expression_attribute_names("#lb", LIKED_BUCKETS)
                .expression_attribute_values(":lb", listed_buckets(&written.liked_buckets));
        }
        let result = update
            .update_expression(format!("ADD {} SET {sets}", clauses.join(", ")))
            .send()
            .await;
        Written::of(result, note, n)
    }
}

/// Where [`CountsWriter::advance`] moves a shard's watermark and progress.
#[derive(Debug, Clone, Copy)]
pub struct Advance<'a> {
    pub stream_time_ms: i64,
    pub probe_key: Option<&'a str>,
    /// The intent just completed and its last record; `None` when the records added nothing.
    pub completed: Option<(&'a str, i64)>,
}

/// The attribute a count row notes a stream shard's last intent in: short, since a row
/// carries one for each shard that wrote it lately.
pub fn intent_note(shard: &str) -> String {
    format!("{INTENT_NOTE_PREFIX}{}", shard_tag(shard))
}

/// The row [`CountsWriter::begin`] puts for `intent` of `shard`, which follows intent `after`
/// (the last one the shard's progress completed), written at `now_ms`.
pub fn encode_intent(
    shard: &str,
    after: Option<i64>,
    intent: &CountIntent,
    now_ms: i64,
) -> Result<CountIntentRow, StoreError> {
    let deltas: Vec<IntentDelta> = intent
        .deltas
        .iter()
        .map(|(target, delta)| {
            let lane = match target.lane {
                Lane::Base => 0,
                Lane::Overflow(h) => h,
            };
            (
                target.item.as_str().to_owned(),
                lane,
                target.row,
                delta.total.like,
                delta.total.dislike,
                delta
                    .by_epoch
                    .iter()
                    .map(|(e, d)| (*e, d.like, d.dislike))
                    .collect(),
                delta.near_cuts.iter().map(|(k, n)| (*k, *n)).collect(),
                delta.liked_buckets.iter().copied().collect(),
            )
        })
        .collect();
    Ok(CountIntentRow {
        item_id: watermark_partition(shard),
        shard: format!("{INTENT_PREFIX}{:020}", after.unwrap_or(0)),
        n: intent.n,
        last_seq: intent.last_seq.clone(),
        stream_time: intent.stream_time_ms,
        probe_key: intent.probe_key.clone(),
        packed: Some(serde_bytes::ByteBuf::from(pack(&deltas)?)),
        rows: None,
        expires_at: (now_ms + REPLAY_HORIZON_MS) / 1000,
    })
}

/// An intent's deltas as compact JSON, deflated: a cold item's delta is its own item id and
/// a few numbers in a shape every delta repeats, so a chunk of cold likes packs into about a
/// third of the write units the JSON alone would take (an intent is written once, and read
/// back only to finish it after a crash).
fn pack(deltas: &[IntentDelta]) -> Result<Vec<u8>, StoreError> {
    use std::io::Write;
    let corrupt = |err: String| StoreError::Corrupt(format!("an intent's rows: {err}"));
    let json = serde_json::to_vec(deltas).map_err(|err| corrupt(err.to_string()))?;
    let mut packer = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    packer
        .write_all(&json)
        .and_then(|()| packer.finish())
        .map_err(|err| corrupt(err.to_string()))
}

/// The deltas [`pack`] packed.
fn unpack(packed: &[u8]) -> Result<Vec<IntentDelta>, String> {
    use std::io::Read;
    let mut json = Vec::new();
    flate2::read::DeflateDecoder::new(packed)
        .read_to_end(&mut json)
        .map_err(|err| err.to_string())?;
    serde_json::from_slice(&json).map_err(|err| err.to_string())
}

/// An intent row read back: what the chunk adds to which count row.
pub fn decode_intent(row: CountIntentRow) -> Result<CountIntent, StoreError> {
    let corrupt = |what: String| StoreError::Corrupt(format!("intent {}: {what}", row.n));
    let listed: Vec<IntentDelta> = match (&row.packed, &row.rows) {
        (Some(packed), _) => unpack(packed),
        (None, Some(rows)) => serde_json::from_str(rows).map_err(|err| err.to_string()),
        (None, None) => Err("no rows".to_owned()),
    }
    .map_err(corrupt)?;
    let mut deltas = BTreeMap::new();
    for (item, lane, row_index, like, dislike, epochs, cuts, buckets) in listed {
        let item = ItemId::parse(&item).map_err(|err| corrupt(err.to_string()))?;
        let target = CountTarget {
            item,
            lane: if lane == 0 {
                Lane::Base
            } else {
                Lane::Overflow(lane)
            },
            row: row_index,
        };
        let delta = RowDelta {
            total: Delta { like, dislike },
            by_epoch: epochs
                .into_iter()
                .map(|(e, like, dislike)| (e, Delta { like, dislike }))
                .collect(),
            near_cuts: cuts.into_iter().collect(),
            liked_buckets: buckets.into_iter().collect(),
        };
        deltas.insert(target, delta);
    }
    Ok(CountIntent {
        n: row.n,
        last_seq: row.last_seq,
        stream_time_ms: row.stream_time,
        probe_key: row.probe_key,
        deltas,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_intent_reads_back_as_it_was_frozen() {
        let mut deltas = BTreeMap::new();
        deltas.insert(
            CountTarget {
                item: ItemId::parse("game:1").unwrap(),
                lane: Lane::Overflow(3),
                row: 5,
            },
            RowDelta {
                total: Delta {
                    like: 2,
                    dislike: -1,
                },
                by_epoch: BTreeMap::from([(
                    7,
                    Delta {
                        like: 2,
                        dislike: -1,
                    },
                )]),
                near_cuts: BTreeMap::from([(8, 1)]),
                liked_buckets: [4, 90].into(),
            },
        );
        deltas.insert(
            CountTarget {
                item: ItemId::parse("cold").unwrap(),
                lane: Lane::Base,
                row: 0,
            },
            RowDelta::default(),
        );
        let intent = CountIntent {
            n: 1_796_000_000_000,
            last_seq: "4200".into(),
            stream_time_ms: 9,
            probe_key: Some("#probe#3".into()),
            deltas,
        };
        let row = encode_intent("shardId-1", Some(1_795_000_000_000), &intent, 0).unwrap();
        assert_eq!(row.shard, "N#00000001795000000000");
        assert!(row.rows.is_none());
        // An intent written before intents were deflated, its deltas as plain JSON, reads
        // back the same.
        let packed = row.packed.clone().expect("the deltas, deflated");
        let mut plain = row.clone();
        plain.packed = None;
        plain.rows = Some(String::from_utf8(unpack_to_json(&packed)).unwrap());
        assert_eq!(decode_intent(row).unwrap(), intent);
        assert_eq!(decode_intent(plain).unwrap(), intent);
    }

    fn unpack_to_json(packed: &[u8]) -> Vec<u8> {
        serde_json::to_vec(&unpack(packed).unwrap()).unwrap()
    }

    #[test]
    fn a_chunk_of_cold_likes_packs_into_a_third_of_its_json() {
        let deltas: Vec<IntentDelta> = (0..200)
            .map(|n| {
                let item = format!("game:{}", 1_000_003 * n % 9_999_991);
                (
                    item,
                    0,
                    n % 7,
                    1,
                    0,
                    vec![(5_987_654, 1, 0)],
                    vec![],
                    vec![n % 128],
                )
            })
            .collect();
        let json = serde_json::to_vec(&deltas).unwrap();
        let packed = pack(&deltas).unwrap();
        assert!(
            packed.len() * 3 < json.len(),
            "{} of {}",
            packed.len(),
            json.len()
        );
        assert_eq!(unpack(&packed).unwrap(), deltas);
    }

    #[test]
    fn a_row_notes_each_shard_under_a_short_name_of_its_own() {
        let a = intent_note("shardId-00000001536019433613-c6a8f3e4");
        let b = intent_note("shardId-00000001536019433613-c6a8f3e5");
        assert_eq!(a.len(), 14);
        assert!(a.starts_with(INTENT_NOTE_PREFIX));
        assert_ne!(a, b);
        assert_eq!(a, intent_note("shardId-00000001536019433613-c6a8f3e4"));
    }
}
