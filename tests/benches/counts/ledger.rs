//! What the aggregator wrote, rebuilt from the real items: every intent row read back from the
//! Counts table (`#wm#<shard>` / `N#<m>`, one per chunk that added anything) names the count
//! rows its chunk added to, and, joined with the stream log on its shard, the flips it
//! applied: those of the shard's records after the shard's previous intent, through the
//! intent's last record. The items read back give every size the bill needs.

use std::collections::{BTreeSet, HashMap};

use aws_sdk_dynamodb::Client;
use likes_core::pipeline::{sequence_after, REPLAY_HORIZON_MS};
use likes_core::Delta;
use likes_store::counts::{decode_intent, INTENT_PREFIX};
use likes_store::rows::{self, CountIntentRow, CountKey};

use crate::capacity::{self, Item};
use crate::naive::StreamRecord;

/// A stream shard's partition on the Counts table: its watermark row `W` and its intents.
pub const WATERMARK_PREFIX: &str = "#wm#";
/// The watermark (and progress) row's sort key.
pub const WATERMARK_ROW: &str = "W";
/// An intent's number is the aggregator's clock when it froze the chunk; its row's TTL says
/// when it was written, to the second: at most this much later.
const WRITTEN_WITHIN_S: i64 = 5;

/// One chunk, as its intent row and the stream log tell it.
#[derive(Debug, Clone)]
pub struct Intent {
    pub bytes: usize,
    /// When the aggregator froze it, just before its count-row writes: its number `n`, the
    /// clock then (epoch millis).
    pub sent_ms: i64,
    /// The items it adds to.
    pub items: BTreeSet<String>,
    /// The count rows it adds to, each by one UpdateItem.
    pub rows: Vec<RowWrite>,
    /// The flips it applied: the shard's flips in its range, of the items it adds to.
    pub flips: Vec<StreamRecord>,
}

/// One count row an intent adds to.
#[derive(Debug, Clone)]
pub struct RowWrite {
    pub item: String,
    /// (partition key, `D#<row>`): the item's base partition or one of its overflow ones.
    pub key: (String, String),
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

/// Every intent on the Counts table, in the order they were sent, with the flips of `log`
/// it applied; `shard_of` names the stream shard a record was delivered on.
pub fn intents(
    counts: &[Item],
    log: &[StreamRecord],
    shard_of: impl Fn(&StreamRecord) -> String,
) -> Vec<Intent> {
    let mut flips: HashMap<String, Vec<&StreamRecord>> = HashMap::new();
    for record in log.iter().filter(|r| r.is_flip()) {
        flips.entry(shard_of(record)).or_default().push(record);
    }
    for shard in flips.values_mut() {
        shard.sort_by_key(|r| (r.sequence_number.len(), r.sequence_number.clone()));
    }
    let mut read_back: Vec<(String, CountIntentRow, usize)> = counts
        .iter()
        .filter_map(|item| {
            let key: CountKey = rows::from_item(item.clone()).expect("a Counts row key");
            let shard = key.item_id.strip_prefix(WATERMARK_PREFIX)?.to_owned();
            key.shard.starts_with(INTENT_PREFIX).then(|| {
                let row: CountIntentRow = rows::from_item(item.clone()).expect("an intent row");
                let written_s = row.expires_at - REPLAY_HORIZON_MS / 1000;
                assert!(
                    (0..=WRITTEN_WITHIN_S).contains(&(written_s - row.n.div_euclid(1000))),
                    "intent {} of {shard} is numbered by the clock it was written at ({written_s} s)",
                    row.n
                );
                (shard, row, capacity::item_size(item))
            })
        })
        .collect();
    read_back.sort_by(|(a, x, _), (b, y, _)| (a, x.n).cmp(&(b, y.n)));
    let none = Vec::new();
    let mut all = Vec::with_capacity(read_back.len());
    let mut previous: Option<(String, String)> = None;
    for (shard, row, bytes) in read_back {
        let intent = decode_intent(row).expect("an intent row decodes");
        // The shard's flips after its previous intent, through this one's last record.
        let shard_flips = flips.get(&shard).unwrap_or(&none);
        let through =
            |seq: &str| shard_flips.partition_point(|r| !sequence_after(&r.sequence_number, seq));
        let from = match &previous {
            Some((last_shard, last_seq)) if *last_shard == shard => through(last_seq),
            _ => 0,
        };
        let to = through(&intent.last_seq);
        let items: BTreeSet<String> = intent
            .deltas
            .keys()
            .map(|target| target.item.as_str().to_owned())
            .collect();
        // A flip whose item the intent does not add to cancelled out in its chunk (or in an
        // earlier chunk that added nothing): no count row took it.
        let (applied, cancelled): (Vec<&StreamRecord>, Vec<&StreamRecord>) = shard_flips[from..to]
            .iter()
            .partition(|r| items.contains(&r.item));
        let mut net: HashMap<&str, Delta> = HashMap::new();
        for record in cancelled {
            *net.entry(&record.item).or_default() += record.delta;
        }
        assert!(
            net.values().all(|delta| delta.is_zero()),
            "flips of {shard} up to intent {} that it does not add to cancel out: {net:?}",
            intent.n
        );
        all.push(Intent {
            bytes,
            sent_ms: intent.n,
            flips: applied.into_iter().cloned().collect(),
            rows: intent
                .deltas
                .keys()
                .map(|target| RowWrite {
                    item: target.item.as_str().to_owned(),
                    key: (target.partition_key(), format!("D#{}", target.row)),
                })
                .collect(),
            items,
        });
        previous = Some((shard, intent.last_seq));
    }
    all.sort_by_key(|i| i.sent_ms);
    all
}

/// Count rows, freshness rows and intents as they are now, by (item, sort key).
pub fn rows_by_key(counts: &[Item]) -> HashMap<(String, String), Item> {
    counts
        .iter()
        .map(|row| {
            let key: CountKey = rows::from_item(row.clone()).expect("a Counts row key");
            ((key.item_id, key.shard), row.clone())
        })
        .collect()
}

/// Write units of one intent: its PutItem, and each count row's UpdateItem (billed once, on
/// the row as read back: the largest it has been).
pub fn intent_units(intent: &Intent, rows: &HashMap<(String, String), Item>) -> (u64, u64) {
    let put = capacity::write_units(intent.bytes);
    let updates = intent
        .rows
        .iter()
        .map(|row| {
            let read_back = rows
                .get(&row.key)
                .unwrap_or_else(|| panic!("count row {:?} exists", row.key));
            capacity::write_units(capacity::item_size(read_back))
        })
        .sum();
    (put, updates)
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
