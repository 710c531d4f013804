//! The figures: every number the bench prints, worked out from the items read back (the
//! table that prints them is in `table.rs`, a column's own arithmetic in `column.rs`).

use std::collections::{HashMap, HashSet};

use likes_core::pipeline::{CountLayout, MAX_CHUNK_RECORDS};
use likes_local::event_source_mapping::virtual_shard_id;
use likes_tests::TestStack;
use serde_json::json;

use crate::capacity::{self, Item};
use crate::column::{design_column, naive_column, Column};
use crate::ledger::{self, Intent, WATERMARK_PREFIX, WATERMARK_ROW};
use crate::naive::{Naive, StreamRecord};
use crate::workload::HotRead;
use crate::{emf, emulator, Phase, HOT};

/// Ids in the 40-id browse-page read.
pub const PAGE: usize = 40;

pub struct Report {
    pub design_hot: Column,
    pub naive_hot: Column,
    pub design_cold: Column,
    pub naive_cold: Column,
    pub hot: Phase,
    pub cold: Phase,
    pub emf: emf::Metrics,
    pub layout: CountLayout,
    /// Stream shards the aggregator read: their watermark rows.
    pub stream_shards: usize,
    /// Records per chunk at most: CHUNK_RECORDS, within MAX_CHUNK_RECORDS.
    pub chunk_records: usize,
    /// The most flips one intent applied, and the most count rows one added to.
    pub largest_intent: (usize, usize),
    /// The hot item's count rows written, and the partitions they are in.
    pub hot_rows: (usize, usize),
    pub heartbeat_bytes: usize,
    pub freshness_half_units: u64,
    pub as_of_held: (usize, usize),
    pub as_of_lag_ms: Vec<i64>,
    pub answers: String,
    pub emulator: emulator::Timings,
}

impl Report {
    /// Reads back what both counters wrote and works out every figure.
    pub async fn gather(
        stack: &TestStack,
        naive: &Naive,
        hot: Phase,
        cold: Phase,
        emf: emf::Metrics,
        naive_rows: HashMap<String, Item>,
        emulator: emulator::Timings,
    ) -> Self {
        let client = stack.dynamodb();
        let pipeline = stack.pipeline();
        let mapping = pipeline.config();
        let number = |name: &str| -> u32 {
            mapping.environment[name]
                .parse()
                .unwrap_or_else(|_| panic!("{name} is a number"))
        };
        let layout = CountLayout {
            rows: number("COUNT_SHARDS"),
            overflow_partitions: number("OVERFLOW_PARTITIONS"),
        };
        let chunk_records = (number("CHUNK_RECORDS") as usize).min(MAX_CHUNK_RECORDS);
        // Then the aggregator never cuts a batch: one chunk, so one watermark write, per
        // invocation (the heartbeats below).
        assert!(
            chunk_records >= mapping.batch_size,
            "a batch of {} records is one chunk of <= {chunk_records}",
            mapping.batch_size
        );
        let log = naive.log();
        let count_items = ledger::scan(&client, &stack.name("CountsTable")).await;
        let rows = ledger::rows_by_key(&count_items);
        // The aggregator's shard of a record: the local mapping's virtual shard of its key.
        let intents = ledger::intents(&count_items, &log, |record| {
            virtual_shard_id(
                &mapping.source,
                &record.stream_shard,
                pipeline.shard_index(&record.user),
            )
        });

        // The intents read back must be the ones the mapping counted, or no figure stands.
        let total = pipeline.counters();
        assert_eq!(
            intents.len() as u64,
            total.intents_written,
            "intents read back vs intents written"
        );
        // A row refuses an intent it took already; with no faults armed, each row takes it.
        assert_eq!(
            intents.iter().map(|i| i.rows.len() as u64).sum::<u64>(),
            total.count_row_writes,
            "count rows listed in the intents vs count-row writes that added"
        );
        assert_eq!(
            (total.retries, total.function_errors),
            (0, 0),
            "no faults were armed"
        );

        // One watermark row per stream shard the aggregator read.
        let watermarks: Vec<usize> = rows
            .iter()
            .filter(|((item, sort), _)| item.starts_with(WATERMARK_PREFIX) && sort == WATERMARK_ROW)
            .map(|(_, row)| capacity::item_size(row))
            .collect();
        let heartbeat_bytes = *watermarks
            .iter()
            .max()
            .expect("shard watermarks were written");
        let (hot_intents, cold_intents): (Vec<&Intent>, Vec<&Intent>) =
            intents.iter().partition(|i| i.items.contains(HOT));
        // The pulse's probe records belong to no phase's items: the phases' figures leave them
        // out (they are the per-second writes below).
        let (hot_log, cold_log): (Vec<&StreamRecord>, Vec<&StreamRecord>) = log
            .iter()
            .filter(|r| r.item != likes_store::freshness::PROBE_ITEM)
            .partition(|r| r.item == HOT);
        let mut design_hot = design_column(&hot_intents, &hot_log, &rows, &hot.counters);
        let mut design_cold = design_column(&cold_intents, &cold_log, &rows, &cold.counters);
        for column in [&mut design_hot, &mut design_cold] {
            column.heartbeat_units = column.heartbeats * capacity::write_units(heartbeat_bytes);
        }
        let mut report = Self {
            design_hot,
            naive_hot: naive_column(&hot_log, &naive_rows),
            design_cold,
            naive_cold: naive_column(&cold_log, &naive_rows),
            layout,
            stream_shards: watermarks.len(),
            chunk_records,
            largest_intent: (
                intents.iter().map(|i| i.flips.len()).max().unwrap_or(0),
                intents.iter().map(|i| i.rows.len()).max().unwrap_or(0),
            ),
            hot_rows: (0, 0),
            hot,
            cold,
            emf,
            heartbeat_bytes,
            freshness_half_units: 0,
            as_of_held: (0, 0),
            as_of_lag_ms: Vec::new(),
            answers: String::new(),
            emulator,
        };
        report.reads(stack, &rows, &naive_rows).await;
        report.staleness();
        report.exposure(&hot_intents, &hot_log);
        report
    }

    /// Section 3: what each count read returns, read back whole (read units bill the whole
    /// item, whatever the projection).
    async fn reads(
        &mut self,
        stack: &TestStack,
        rows: &HashMap<(String, String), Item>,
        naive_rows: &HashMap<String, Item>,
    ) {
        let cold_page: Vec<String> = (0..PAGE).map(|n| format!("cold:{n}")).collect();
        let hot_page: Vec<String> = std::iter::once(HOT.to_owned())
            .chain(cold_page.iter().take(PAGE - 1).cloned())
            .collect();
        // The cold item with the most count rows: the largest cold read.
        let mut cold_rows: HashMap<&str, usize> = HashMap::new();
        for (item, _) in rows.keys().filter(|(item, _)| item.starts_with("cold:")) {
            *cold_rows.entry(item).or_default() += 1;
        }
        let busiest_cold = cold_rows
            .into_iter()
            .max_by_key(|(_, n)| *n)
            .map(|(item, _)| item.to_owned())
            .expect("cold count rows");
        let query = |item: &String| design_query_half_units(rows, item);
        let get = |item: &String| {
            capacity::eventually_consistent_half_units(
                naive_rows.get(item).map_or(0, capacity::item_size),
            )
        };
        for (column, one, page) in [
            (&mut self.design_hot, HOT.to_owned(), &hot_page),
            (&mut self.design_cold, busiest_cold.clone(), &cold_page),
        ] {
            column.read_one = query(&one);
            column.read_page = page.iter().map(query).sum();
        }
        for (column, one, page) in [
            (&mut self.naive_hot, HOT.to_owned(), &hot_page),
            (&mut self.naive_cold, busiest_cold.clone(), &cold_page),
        ] {
            column.read_one = get(&one);
            column.read_page = page.iter().map(get).sum();
        }
        self.freshness_half_units = capacity::eventually_consistent_half_units(
            rows.iter()
                .filter(|((item, _), _)| item.starts_with("#asof#"))
                .map(|(_, row)| capacity::item_size(row))
                .max()
                .expect("the pulse published as_of"),
        );
        self.answers = endpoint_answers(stack, &hot_page).await;
    }

    /// Section 4: event time to the first count read that includes the flip.
    fn staleness(&mut self) {
        let mut hot_events: Vec<i64> = self
            .hot
            .written
            .iter()
            .filter_map(|w| w.event_time_ms)
            .collect();
        hot_events.sort_unstable();
        let series = &self.hot.hot_series;
        self.design_hot.visible_ms = visible_after(&hot_events, &series.design);
        self.naive_hot.visible_ms = visible_after(&hot_events, &series.naive);
        (self.as_of_held, self.as_of_lag_ms) = as_of_promise(&hot_events, &series.design);
        let samples = &self.cold.samples;
        self.design_cold.visible_ms = samples
            .iter()
            .filter_map(|(_, s)| Some(s.design_ms? - s.event_time_ms))
            .collect();
        self.naive_cold.visible_ms = samples
            .iter()
            .filter_map(|(_, s)| Some(s.naive_ms? - s.event_time_ms))
            .collect();
    }

    /// Section 5: writes per second on the hot item's rows, in its base partition and its
    /// overflow ones. A count row's write is timed by its intent's number: the aggregator's
    /// clock when it froze the chunk, just before it wrote the rows.
    fn exposure(&mut self, hot_intents: &[&Intent], hot_log: &[&StreamRecord]) {
        let mut naive_writes: Vec<i64> = hot_log.iter().filter_map(|r| r.applied_ms).collect();
        self.naive_hot.peak_row_writes = ledger::peak_per_second(&mut naive_writes);
        let mut by_row: HashMap<&(String, String), Vec<i64>> = HashMap::new();
        for intent in hot_intents {
            for row in intent.rows.iter().filter(|row| row.item == HOT) {
                by_row.entry(&row.key).or_default().push(intent.sent_ms);
            }
        }
        let partitions: HashSet<&str> = by_row.keys().map(|(p, _)| p.as_str()).collect();
        self.hot_rows = (by_row.len(), partitions.len());
        let mut all_rows: Vec<i64> = by_row.values().flatten().copied().collect();
        self.design_hot.peak_item_writes = ledger::peak_per_second(&mut all_rows);
        self.design_hot.peak_row_writes = by_row
            .values_mut()
            .map(|times| ledger::peak_per_second(times))
            .max()
            .unwrap_or(0);
    }
}

/// Half read units of the Query a count read makes: the item's count rows, summed.
fn design_query_half_units(rows: &HashMap<(String, String), Item>, item: &str) -> u64 {
    capacity::eventually_consistent_half_units(
        rows.iter()
            .filter(|((i, shard), _)| i == item && shard.starts_with("D#"))
            .map(|(_, row)| capacity::item_size(row))
            .sum(),
    )
}

/// For the n-th flip in event-time order: how long until a read showed at least n likes.
fn visible_after(events: &[i64], reads: &[HotRead]) -> Vec<i64> {
    let mut visible = Vec::with_capacity(events.len());
    let mut read = reads.iter();
    let mut current = read.next();
    for (n, event) in events.iter().enumerate() {
        while let Some(r) = current {
            if r.likes > n as u64 {
                break;
            }
            current = read.next();
        }
        match current {
            Some(r) => visible.push(r.at_ms - event),
            None => break,
        }
    }
    visible
}

/// Whether each hot read counted every like written up to its `as_of`, and how far
/// behind the read's time `as_of` was.
fn as_of_promise(events: &[i64], reads: &[HotRead]) -> ((usize, usize), Vec<i64>) {
    let mut held = 0;
    let mut lags = Vec::new();
    for read in reads {
        let Some(as_of) = read.as_of_ms else { continue };
        let promised = events.partition_point(|e| *e <= as_of) as u64;
        if read.likes >= promised {
            held += 1;
        }
        lags.push(read.at_ms - as_of);
    }
    ((held, lags.len()), lags)
}

/// The real endpoints answer what the figures are about.
async fn endpoint_answers(stack: &TestStack, page: &[String]) -> String {
    let one = stack
        .request(
            "GET",
            &format!("/v1/items/{HOT}/like-count"),
            Some("reader"),
        )
        .send()
        .await;
    assert_eq!(one.status, 200);
    let batch = stack
        .request("POST", "/v1/items/like-counts:batchGet", Some("reader"))
        .json(&json!({ "item_ids": page }))
        .send()
        .await;
    assert_eq!(batch.status, 200);
    let (one, batch) = (one.json(), batch.json());
    format!(
        "GET like-count of {HOT}: like_count {}, as_of {}; like-counts:batchGet of {} ids: {} counts",
        one["like_count"],
        one["as_of"],
        page.len(),
        batch["counts"].as_object().map_or(0, |c| c.len())
    )
}
