//! One column of the printed table (one counter in one phase) and how it is worked out from
//! the intents, stream records and rows read back.

use std::collections::HashMap;

use likes_local::faults::Counters;

use crate::capacity::{self, Item};
use crate::ledger::{self, Intent};
use crate::naive::StreamRecord;

/// One column of the table: one counter in one phase.
#[derive(Default)]
pub struct Column {
    /// The design's column (the naive counter writes no intents and no watermarks).
    pub design: bool,
    pub records: usize,
    pub flips: usize,
    pub count_writes: usize,
    pub intents: usize,
    pub heartbeats: u64,
    /// Write units, by what was written.
    pub intent_units: u64,
    pub row_units: u64,
    pub heartbeat_units: u64,
    /// Item sizes seen (min, max), bytes.
    pub intent_bytes: (usize, usize),
    pub row_bytes: (usize, usize),
    /// Read units of one count read and of a 40-id page, in half units.
    pub read_one: u64,
    pub read_page: u64,
    pub visible_ms: Vec<i64>,
    pub applied_ms: Vec<i64>,
    /// Most writes in one second on one count row, and (design) on all the item's rows.
    pub peak_row_writes: usize,
    pub peak_item_writes: usize,
}

impl Column {
    pub fn units(&self) -> u64 {
        self.intent_units + self.row_units + self.heartbeat_units
    }

    pub fn per_flip(&self, units: u64) -> String {
        format!("{:.3}", units as f64 / self.flips.max(1) as f64)
    }
}

pub fn design_column(
    intents: &[&Intent],
    log: &[&StreamRecord],
    rows: &HashMap<(String, String), Item>,
    counters: &Counters,
) -> Column {
    let mut column = Column {
        design: true,
        records: log.len(),
        flips: log.iter().filter(|r| r.is_flip()).count(),
        intents: intents.len(),
        // One chunk per invocation (a batch is never cut, see `figures`), and one watermark
        // write per chunk.
        heartbeats: counters.invocations,
        intent_bytes: (usize::MAX, 0),
        row_bytes: (usize::MAX, 0),
        ..Column::default()
    };
    // The mapping also delivers the pulse's probe records of the phase's window, which the
    // phase's records leave out; no record is delivered twice.
    assert_eq!(
        (counters.retries, counters.duplicate_deliveries),
        (0, 0),
        "the mapping delivered each record of the phase once"
    );
    assert!(
        counters.records_delivered as usize >= column.records,
        "the mapping delivered every record of the phase's items: {} of {}",
        counters.records_delivered,
        column.records
    );
    for intent in intents {
        let (put, updates) = ledger::intent_units(intent, rows);
        column.intent_units += put;
        column.row_units += updates;
        column.count_writes += intent.rows.len();
        column.intent_bytes = widen(column.intent_bytes, intent.bytes);
        for row in &intent.rows {
            column.row_bytes = widen(column.row_bytes, capacity::item_size(&rows[&row.key]));
        }
        column.applied_ms.extend(
            intent
                .flips
                .iter()
                .filter_map(|r| Some(intent.sent_ms - r.event_time_ms?)),
        );
    }
    column
}

pub fn naive_column(log: &[&StreamRecord], rows: &HashMap<String, Item>) -> Column {
    let mut column = Column {
        records: log.len(),
        row_bytes: (usize::MAX, 0),
        ..Column::default()
    };
    for record in log.iter().filter(|r| r.is_flip()) {
        let bytes = capacity::item_size(&rows[&record.item]);
        column.flips += 1;
        column.count_writes += 1;
        column.row_units += capacity::write_units(bytes);
        column.row_bytes = widen(column.row_bytes, bytes);
        column.applied_ms.extend(Some(
            record.applied_ms.expect("applied") - record.event_time_ms.expect("a flip"),
        ));
    }
    column
}

fn widen((min, max): (usize, usize), bytes: usize) -> (usize, usize) {
    (min.min(bytes), max.max(bytes))
}
