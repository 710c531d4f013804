//! The aggregator's exactly-once writes, per stream shard, without transactions.
//!
//! Beside a shard's watermark row `#wm#<shard>` / `W`, which also holds its progress (the last
//! record applied, `through_seq`, and the last intent completed, `intent`), each chunk is
//! frozen as an intent row `I#<n>` before any count row is written. The intent is then
//! applied, one plain conditional UpdateItem per count row that ADDs the row's delta and notes
//! `n` for the shard (`i#<shard>`) on condition the row noted a lower one, and completed by
//! moving the progress, on condition no other consumer moved it. A crash anywhere leaves a
//! pending intent (numbered above the progress) that the next delivery finishes first; a
//! row that took it already refuses it. Hundreds of shards adding to a viral item's rows at
//! once queue on them instead of cancelling each other, and every row write is billed once.
//!
//! Intent rows are never deleted (a delete is billed as a write): their TTL drops them.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use futures_util::stream::{self, StreamExt, TryStreamExt};
use likes_core::pipeline::{shard_tag, CountTarget, Lane, RowDelta, REPLAY_HORIZON_MS};
use likes_core::reconcile::{near_cut_attribute, subtotal_attributes};
use likes_core::{Delta, ItemId};

use super::{count_key, COUNT_ROW_PREFIX, OVERFLOW_MARKER};
use crate::error::{condition_held, progress_moved};
use crate::freshness::{watermark_partition, WATERMARK_ROW};
use crate::rows::attr::{
    INTENT, ITEM_ID, PARTITIONS, PROBE_KEY, SHARD, STREAM_TIME, THROUGH_SEQ, UPDATED_AT,
};
use crate::rows::{self, number, CountIntentRow, WatermarkRow};
use crate::StoreError;

/// Count row writes of one intent in flight at once.
const IN_FLIGHT: usize = 32;
/// Intent rows' sort keys start with this; the number follows in 20 digits.
const INTENT_PREFIX: &str = "I#";
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
/// row, like and dislike totals, `[epoch, like, dislike]` subtotals, `[cut, changes]`.
type IntentDelta = (
    String,
    u32,
    u32,
    i64,
    i64,
    Vec<(i64, i64, i64)>,
    Vec<(i64, u64)>,
);

/// Writes counts exactly once, a shard at a time.
#[derive(Debug, Clone)]
pub struct CountsWriter {
    client: Client,
    table: String,
}

impl CountsWriter {
    pub fn new(client: Client, counts_table: impl Into<String>) -> Self {
        Self {
            client,
            table: counts_table.into(),
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

    /// Freezes `intent` as the shard's intent row, before any of its count rows is written.
    pub async fn begin(
        &self,
        shard: &str,
        intent: &CountIntent,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let row = encode_intent(shard, intent, now_ms)?;
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(rows::to_item(&row)?))
            .condition_expression(format!("attribute_not_exists({ITEM_ID})"))
            .send()
            .await;
        if condition_held("PutItem", result)? {
            Ok(())
        } else {
            Err(StoreError::Corrupt(format!(
                "shard {shard} already has intent {}",
                intent.n
            )))
        }
    }

    /// Adds each row's delta of `intent` to the rows that have not taken it yet; the number
    /// of rows that took it now.
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
            .map(|(target, delta)| self.add(target, delta, &note, intent.n, now_ms))
            .collect();
        let took: Vec<bool> = stream::iter(writes)
            .buffer_unordered(IN_FLIGHT)
            .try_collect()
            .await?;
        Ok(took.into_iter().filter(|took| *took).count())
    }

    /// Moves the shard's progress to `through_seq` (its watermark to `stream_time_ms`) and,
    /// after an intent, to that intent; on condition the progress is still `was`, since a
    /// shard has one consumer at a time and a retry reads the progress afresh. Puts off the
    /// row's expiry to [`REPLAY_HORIZON_MS`] from `now_ms`.
    pub async fn advance(
        &self,
        shard: &str,
        was: Option<&ShardProgress>,
        to: Advance<'_>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let mut sets = vec![
            format!("{THROUGH_SEQ} = :seq"),
            format!("{STREAM_TIME} = :t"),
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
            .expression_attribute_values(":seq", AttributeValue::S(to.through_seq.to_owned()))
            .expression_attribute_values(":t", number(to.stream_time_ms))
            .expression_attribute_values(":now", number(now_ms))
            .expression_attribute_values(":expires", number((now_ms + REPLAY_HORIZON_MS) / 1000));
        if let Some(probe) = to.probe_key {
            sets.push(format!("{PROBE_KEY} = :p"));
            update = update.expression_attribute_values(":p", AttributeValue::S(probe.to_owned()));
        }
        if let Some(n) = to.intent {
            sets.push(format!("{INTENT} = :n"));
            update = update.expression_attribute_values(":n", number(n));
        }
        update = match was {
            None => update.condition_expression(format!("attribute_not_exists({THROUGH_SEQ})")),
            Some(was) => update
                .condition_expression(format!("{THROUGH_SEQ} = :was"))
                .expression_attribute_values(":was", AttributeValue::S(was.through_seq.clone())),
        };
        let result = update
            .update_expression(format!("SET {}", sets.join(", ")))
            .send()
            .await;
        progress_moved(shard, result)
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

    /// One count row's ADD of intent `n` (to its totals, to the subtotal of each epoch its
    /// changes were committed in, and to its count of changes near each cut), unless the row
    /// took it already: `false` then.
    async fn add(
        &self,
        target: &CountTarget,
        written: &RowDelta,
        note: &str,
        n: i64,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let mut adds = vec![
            ("like_count".to_owned(), written.total.like),
            ("dislike_count".to_owned(), written.total.dislike),
        ];
        for (epoch, delta) in &written.by_epoch {
            let (like, dislike) = subtotal_attributes(*epoch);
            adds.push((like, delta.like));
            adds.push((dislike, delta.dislike));
        }
        for (cut, changes) in &written.near_cuts {
            adds.push((near_cut_attribute(*cut), *changes as i64));
        }
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(count_key(
                target.partition_key(),
                format!("{COUNT_ROW_PREFIX}{}", target.row),
            )))
            .condition_expression("attribute_not_exists(#note) OR #note < :n")
            .expression_attribute_names("#note", note)
            .expression_attribute_values(":n", number(n))
            .expression_attribute_values(":now", number(now_ms));
        let mut clauses = Vec::with_capacity(adds.len());
        for (i, (name, value)) in adds.into_iter().enumerate() {
            clauses.push(format!("#a{i} :a{i}"));
            update = update
                .expression_attribute_names(format!("#a{i}"), name)
                .expression_attribute_values(format!(":a{i}"), number(value));
        }
        let result = update
            .update_expression(format!(
                "ADD {} SET {UPDATED_AT} = :now, #note = :n",
                clauses.join(", ")
            ))
            .send()
            .await;
        condition_held("UpdateItem", result)
    }
}

/// Where [`CountsWriter::advance`] moves a shard's progress.
#[derive(Debug, Clone, Copy)]
pub struct Advance<'a> {
    pub through_seq: &'a str,
    pub stream_time_ms: i64,
    pub probe_key: Option<&'a str>,
    /// The intent just completed; `None` when the records added nothing.
    pub intent: Option<i64>,
}

/// The attribute a count row notes a stream shard's last intent in: short, since a row
/// carries one for each shard that wrote it lately.
pub fn intent_note(shard: &str) -> String {
    format!("{INTENT_NOTE_PREFIX}{}", shard_tag(shard))
}

/// The row [`CountsWriter::begin`] puts for `intent` of `shard`, written at `now_ms`.
pub fn encode_intent(
    shard: &str,
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
            )
        })
        .collect();
    Ok(CountIntentRow {
        item_id: watermark_partition(shard),
        shard: format!("{INTENT_PREFIX}{:020}", intent.n),
        n: intent.n,
        last_seq: intent.last_seq.clone(),
        stream_time: intent.stream_time_ms,
        probe_key: intent.probe_key.clone(),
        rows: serde_json::to_string(&deltas)
            .map_err(|err| StoreError::Corrupt(format!("an intent's rows: {err}")))?,
        expires_at: (now_ms + REPLAY_HORIZON_MS) / 1000,
    })
}

/// An intent row read back: what the chunk adds to which count row.
pub fn decode_intent(row: CountIntentRow) -> Result<CountIntent, StoreError> {
    let corrupt = |what: String| StoreError::Corrupt(format!("intent {}: {what}", row.n));
    let listed: Vec<IntentDelta> =
        serde_json::from_str(&row.rows).map_err(|err| corrupt(err.to_string()))?;
    let mut deltas = BTreeMap::new();
    for (item, lane, row_index, like, dislike, epochs, cuts) in listed {
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
        let row = encode_intent("shardId-1", &intent, 0).unwrap();
        assert_eq!(row.shard, "I#00000001796000000000");
        assert_eq!(decode_intent(row).unwrap(), intent);
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
