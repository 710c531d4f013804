//! The figures, side by side: a column per design, each row a per-second worst or a
//! distribution over the run, with the limit it is measured against.

use likes_tests::say;

use crate::kinesis::RECORDS_PER_SHARD_SECOND;
use crate::mapping::MappingRun;
use crate::meter::{percentile, Histogram, PerSecondWorst};

/// DynamoDB accepts at most this many write units a second on one partition.
pub const WCU_PER_PARTITION_SECOND: u64 = 1000;

/// One design's run, reduced to what the table shows.
pub struct Column {
    pub name: &'static str,
    pub counts_wcu: PerSecondWorst<String>,
    pub kinesis: PerSecondWorst<usize>,
    /// Chunks applied, and intents put (a chunk that adds nothing puts none); `None` for a
    /// design without them.
    pub chunks: Option<(u64, u64)>,
    pub staleness: Histogram,
    pub as_of_lag: Option<Histogram>,
    /// Event time to on the Kinesis log.
    pub event_lag: Histogram,
    pub count_row_writes: u64,
    /// Overflow markers and progress (watermark) writes, beside the count rows and intents.
    pub other_counts_writes: Option<u64>,
    /// The `#wm#<shard>` keys alone (intents and progress), also in `counts_wcu`.
    pub progress_wcu: Option<PerSecondWorst<String>>,
    pub mapping: MappingRun,
}

impl Column {
    /// The run's worst second on one count partition key and on one Kinesis shard.
    pub fn worst(&self) -> (u64, u64) {
        (self.counts_wcu.peak().0, self.kinesis.peak().0)
    }
}

/// The share of a limit past which a key has too little headroom for the next burst.
const HEADROOM: f64 = 0.8;

/// `OVER` past `limit`, `HOT` past [`HEADROOM`] of it.
fn over(value: u64, limit: u64) -> &'static str {
    if value > limit {
        " OVER"
    } else if value as f64 > HEADROOM * limit as f64 {
        " HOT"
    } else {
        ""
    }
}

fn ms(h: &Histogram, p: f64) -> String {
    h.percentile(p).map_or("-".into(), |v| format!("{v} ms"))
}

fn mean(values: &[u64]) -> f64 {
    values.iter().sum::<u64>() as f64 / values.len().max(1) as f64
}

fn print_row(label: &str, cells: impl IntoIterator<Item = String>) {
    let cells: String = cells
        .into_iter()
        .map(|cell| format!(" {cell:>28}"))
        .collect();
    say!("  {label:<46}{cells}");
}

fn offered(values: &[u64], offered_seconds: usize) -> Vec<u64> {
    values[..offered_seconds.min(values.len())].to_vec()
}

/// Prints the table. `offered_seconds` bounds the p50s and means to the seconds traffic was
/// offered in (the drain after it would pull them down).
pub fn print(columns: &[Column], offered_seconds: usize, flips: u64) {
    let row = |label: &str, cell: &dyn Fn(&Column) -> String| {
        print_row(label, columns.iter().map(cell));
    };
    let offered = |values: &[u64]| offered(values, offered_seconds);
    row("", &|c| c.name.to_owned());
    row("worst count partition key, WCU/s: max", &|c| {
        let (wcu, _, _) = c.counts_wcu.peak();
        format!("{wcu}{}", over(wcu, WCU_PER_PARTITION_SECOND))
    });
    row("  that key (second)", &|c| {
        let (_, key, second) = c.counts_wcu.peak();
        format!("{} (s {second})", key.map_or("-", String::as_str))
    });
    row("  p50 over the offered seconds", &|c| {
        percentile(&offered(&c.counts_wcu.worst_units()), 50.0).to_string()
    });
    row("worst Kinesis shard, records/s: max", &|c| {
        let (records, _, _) = c.kinesis.peak();
        format!("{records}{}", over(records, RECORDS_PER_SHARD_SECOND))
    });
    row("  p50 over the offered seconds", &|c| {
        percentile(&offered(&c.kinesis.worst_units()), 50.0).to_string()
    });
    row("chunks applied; intents put", &|c| {
        c.chunks.map_or("-".into(), |(chunks, intents)| {
            format!("{chunks}; {intents}")
        })
    });
    row("staleness, event -> count row written: p50 / p99", &|c| {
        format!("{} / {}", ms(&c.staleness, 50.0), ms(&c.staleness, 99.0))
    });
    row("count as_of lag (sampled each 100 ms): p50 / p99", &|c| {
        c.as_of_lag
            .as_ref()
            .map_or("-".into(), |h| format!("{} / {}", ms(h, 50.0), ms(h, 99.0)))
    });
    row("event on the log: p50 / p99", &|c| {
        format!("{} / {}", ms(&c.event_lag, 50.0), ms(&c.event_lag, 99.0))
    });
    row("count-row writes per flip", &|c| {
        format!("{:.3}", c.count_row_writes as f64 / flips.max(1) as f64)
    });
    row("marker + progress writes/s (mean)", &|c| {
        c.other_counts_writes.map_or("-".into(), |n| {
            format!("{:.0}", n as f64 / offered_seconds.max(1) as f64)
        })
    });
    row("Counts table WCU/s, all keys (mean)", &|c| {
        format!("{:.0}", mean(&offered(&c.counts_wcu.total)))
    });
    row("  of which #wm#<shard> (intents, progress)", &|c| {
        c.progress_wcu.as_ref().map_or("-".into(), |progress| {
            format!("{:.0}", mean(&offered(&progress.total)))
        })
    });
    row("  #wm#<shard>, worst key, WCU/s: max", &|c| {
        c.progress_wcu.as_ref().map_or("-".into(), |progress| {
            let (wcu, _, _) = progress.peak();
            format!("{wcu}{}", over(wcu, WCU_PER_PARTITION_SECOND))
        })
    });
    row("Counts table WCU per flip (whole run)", &|c| {
        let units: u64 = c.counts_wcu.total.iter().sum();
        format!("{:.3}", units as f64 / flips.max(1) as f64)
    });
    row("invocations; worst iterator age", &|c| {
        format!(
            "{}; {} ms",
            c.mapping.invocations, c.mapping.max_iterator_age_ms
        )
    });
}

/// A meter of one read model per design (`None` where the design has no such writes).
pub struct KeyMeter<'m> {
    pub label: &'static str,
    pub by_design: Vec<Option<&'m PerSecondWorst<String>>>,
}

/// A read model's table: a column per design; per meter the run's worst second on one key
/// against the partition limit, that key, and the worst key's p50 over the offered seconds.
pub fn print_worst_keys(designs: &[&str], meters: &[KeyMeter], offered_seconds: usize) {
    print_row("", designs.iter().map(|d| (*d).to_owned()));
    for meter in meters {
        let cells = |cell: &dyn Fn(&PerSecondWorst<String>) -> String| {
            meter
                .by_design
                .iter()
                .map(|m| m.map_or("-".into(), cell))
                .collect::<Vec<_>>()
        };
        print_row(
            meter.label,
            cells(&|m| {
                let (wcu, _, _) = m.peak();
                format!("{wcu}{}", over(wcu, WCU_PER_PARTITION_SECOND))
            }),
        );
        print_row(
            "  that key (second)",
            cells(&|m| {
                let (_, key, second) = m.peak();
                format!("{} (s {second})", key.map_or("-".into(), |k| shortened(k)))
            }),
        );
        print_row(
            "  p50 over the offered seconds",
            cells(&|m| percentile(&offered(&m.worst_units(), offered_seconds), 50.0).to_string()),
        );
    }
}

/// A key to fit its column beside the second: its last 20 characters, marked when cut.
fn shortened(key: &str) -> String {
    match key.char_indices().rev().nth(19) {
        Some((at, _)) if at > 0 => format!("…{}", &key[at..]),
        _ => key.to_owned(),
    }
}
