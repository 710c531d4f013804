//! What the aggregator wrote, rebuilt from the real items: every claim (one per committed
//! transaction, listing its records' eventIDs) joined with the stream log tells which count
//! rows that transaction updated (the items with a nonzero summed delta, on the chunk's slot:
//! row k of the item's base partition, or of overflow partition h when the item was hot in
//! its batch), and the items read back give every size the bill needs.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::Client;
use likes_core::pipeline::{overflow_partition, CountLayout};
use likes_core::{Delta, ItemId};
use likes_store::rows::{self, ClaimRow, CountKey};

use crate::capacity::{self, Item};
use crate::naive::StreamRecord;

/// One committed chunk, as its claim and the stream log tell it.
#[derive(Debug, Clone)]
pub struct Transaction {
    pub claim_bytes: usize,
    /// When the aggregator sent it (the claim's `created_at`, epoch millis).
    pub sent_ms: i64,
    pub records: Vec<StreamRecord>,
    /// The count rows it updated: (item, `D#k`).
    pub rows: Vec<(String, String)>,
}

/// Scans a table whole.
pub async fn scan(client: &Client, table: &str) -> Vec<Item> {
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let page = client
            .scan()
            .table_name(table)
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .unwrap_or_else(|e| panic!("Scan of {table}: {e:?}"));
        items.extend(page.items().iter().cloned());
        match page.last_evaluated_key {
            Some(key) => start = Some(key),
            None => return items,
        }
    }
}

/// Every committed transaction, rebuilt from the claims table and the stream log.
pub fn transactions(
    claims: &[Item],
    log: &[StreamRecord],
    layout: CountLayout,
    rows: &HashMap<(String, String), Item>,
) -> Vec<Transaction> {
    let by_event: HashMap<&str, &StreamRecord> =
        log.iter().map(|r| (r.event_id.as_str(), r)).collect();
    let mut all: Vec<Transaction> = claims
        .iter()
        .map(|item| {
            let claim: ClaimRow = rows::from_item(item.clone()).expect("a claim row");
            let records: Vec<StreamRecord> = claim
                .listed()
                .map(|event| {
                    (*by_event
                        .get(event)
                        .unwrap_or_else(|| panic!("claimed record {event} is in the stream log")))
                    .clone()
                })
                .collect();
            let mut deltas: BTreeMap<&str, Delta> = BTreeMap::new();
            for record in &records {
                *deltas.entry(record.item.as_str()).or_default() += record.delta;
            }
            let (k, h) = layout.slot(&claim.claim_id);
            let row = format!("D#{k}");
            let written = deltas
                .into_iter()
                .filter(|(_, delta)| !delta.is_zero())
                .map(|(item, _)| {
                    // Which partition depends on the item's changes in the whole batch, which
                    // the claim does not tell: the overflow row exists only if it was used.
                    let overflow = overflow_partition(&ItemId::parse(item).expect("item id"), h);
                    match rows.contains_key(&(overflow.clone(), row.clone())) {
                        true => (overflow, row.clone()),
                        false => (item.to_owned(), row.clone()),
                    }
                })
                .collect();
            Transaction {
                claim_bytes: capacity::item_size(item),
                sent_ms: claim.created_at,
                records,
                rows: written,
            }
        })
        .collect();
    all.sort_by_key(|t| t.sent_ms);
    all
}

/// Count rows and freshness rows as they are now, by (item, sort key).
pub fn rows_by_key(counts: &[Item]) -> HashMap<(String, String), Item> {
    counts
        .iter()
        .map(|row| {
            let key: CountKey = rows::from_item(row.clone()).expect("a Counts row key");
            ((key.item_id, key.shard), row.clone())
        })
        .collect()
}

/// Write units of one transaction: the claim and each count-row update, twice each.
pub fn transaction_units(
    transaction: &Transaction,
    rows: &HashMap<(String, String), Item>,
) -> (u64, u64) {
    let claim = capacity::transactional_write_units(transaction.claim_bytes);
    let updates = transaction
        .rows
        .iter()
        .map(|key| {
            let row = rows
                .get(key)
                .unwrap_or_else(|| panic!("count row {key:?} exists"));
            capacity::transactional_write_units(capacity::item_size(row))
        })
        .sum();
    (claim, updates)
}

/// The most events in any one-second window of `times` (epoch millis).
pub fn peak_per_second(times: &mut [i64]) -> usize {
    times.sort_unstable();
    let mut peak = 0;
    let mut from = 0;
    for to in 0..times.len() {
        while times[to] - times[from] >= 1000 {
            from += 1;
        }
        peak = peak.max(to - from + 1);
    }
    peak
}
