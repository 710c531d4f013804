//! The aggregator's metrics, read as the reports it emits. The aggregator runs on a thread of
//! this process (the local mapping), so while the workload runs its reports are captured as
//! values instead of printed (and kept out of the printed figures).

use likes_store::metrics::{self, Report};

/// The values of the metrics the bench reports, over every report captured.
#[derive(Debug, Default)]
pub struct Metrics {
    pub lines: usize,
    pub staleness_ms: Vec<f64>,
}

pub struct Capture(metrics::Capture);

impl Capture {
    pub fn start() -> Self {
        Self(metrics::capture())
    }

    /// What the captured reports said. Call it when nothing more is being emitted (the
    /// mapping settled and paused).
    pub fn stop(self) -> Metrics {
        let reports = self.0.finish();
        Metrics {
            lines: reports.len(),
            staleness_ms: reports
                .iter()
                .flat_map(|r: &Report| r.values_of("StalenessMs"))
                .copied()
                .collect(),
        }
    }
}
