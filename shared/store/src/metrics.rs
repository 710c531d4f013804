//! Metrics in CloudWatch Embedded Metric Format. A [`Report`] is a value: it renders to one
//! EMF JSON line, which [`Report::emit`] writes to the process's sink. The sink is stdout
//! (in Lambda, the log stream CloudWatch Logs turns into metrics) unless [`capture`] took
//! it, so a bench or test reads reports as values, never by redirecting file descriptors.
//!
//! No dimensions (`[[]]`), so the template's alarms match them; identifiers such as an item
//! id ride along as properties, never as dimensions (one metric per item would cost a
//! fortune).
//!
//! Why not the `metrics_cloudwatch_embedded` crate: it is a backend of the `metrics` facade,
//! one global recorder per process with one namespace, aggregating until a flush at the end
//! of an invocation. Here one process (the local stack, a bench) hosts the API, the
//! aggregator, the pulse and reconciliation, each with its own namespace; reports carry
//! per-line properties (the keys of an unreadable record) and up to 100 raw values per
//! metric (staleness samples, not a histogram's buckets); and alarms need the empty
//! dimension set. Those are a few dozen lines here, with no facade, recorder or extra build.

use std::sync::Mutex;

use serde_json::{json, Map, Value};

/// EMF takes up to 100 values per metric and line.
const MAX_VALUES: usize = 100;

/// A set of metrics reported together.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    namespace: &'static str,
    metrics: Vec<Metric>,
    properties: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq)]
struct Metric {
    name: String,
    unit: &'static str,
    values: Vec<f64>,
}

/// Where emitted reports go: stdout, or a reader's buffer while it holds a [`Capture`].
static CAPTURED: Mutex<Option<Vec<Report>>> = Mutex::new(None);

impl Report {
    pub fn new(namespace: &'static str) -> Self {
        Self {
            namespace,
            metrics: Vec::new(),
            properties: Map::new(),
        }
    }

    /// A metric with one value (`unit`: `Count`, `Milliseconds`, …).
    pub fn value(self, name: &str, unit: &'static str, value: f64) -> Self {
        self.values(name, unit, &[value])
    }

    /// A metric with many values (the first 100: EMF's limit per metric and line).
    pub fn values(mut self, name: &str, unit: &'static str, values: &[f64]) -> Self {
        if values.is_empty() {
            return self;
        }
        self.metrics.push(Metric {
            name: name.to_owned(),
            unit,
            values: values.iter().copied().take(MAX_VALUES).collect(),
        });
        self
    }

    /// A searchable log field that is not a dimension.
    pub fn property(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.properties.insert(name.to_owned(), value.into());
        self
    }

    pub fn namespace(&self) -> &str {
        self.namespace
    }

    /// The values reported for metric `name` (empty when it is not in this report).
    pub fn values_of(&self, name: &str) -> &[f64] {
        self.metrics
            .iter()
            .find(|metric| metric.name == name)
            .map_or(&[], |metric| &metric.values)
    }

    /// The EMF line, stamped `timestamp_ms`; `None` for a report without metrics.
    pub fn render(&self, timestamp_ms: i64) -> Option<String> {
        if self.metrics.is_empty() {
            return None;
        }
        let mut line = self.properties.clone();
        let definitions: Vec<Value> = self
            .metrics
            .iter()
            .map(|metric| json!({ "Name": metric.name, "Unit": metric.unit }))
            .collect();
        for metric in &self.metrics {
            let value = match metric.values.as_slice() {
                [one] => json!(one),
                many => json!(many),
            };
            line.insert(metric.name.clone(), value);
        }
        line.insert(
            "_aws".into(),
            json!({
                "Timestamp": timestamp_ms,
                "CloudWatchMetrics": [{
                    "Namespace": self.namespace,
                    "Dimensions": [[]],
                    "Metrics": definitions,
                }],
            }),
        );
        Some(Value::Object(line).to_string())
    }

    /// Writes the report to the sink: stdout, or the buffer of a [`Capture`].
    pub fn emit(self) {
        if self.metrics.is_empty() {
            return;
        }
        let mut captured = CAPTURED.lock().unwrap_or_else(|e| e.into_inner());
        match captured.as_mut() {
            Some(reports) => reports.push(self),
            None => {
                if let Some(line) = self.render(likes_core::clock::now_ms()) {
                    println!("{line}");
                }
            }
        }
    }
}

/// Reports emitted while this is held, kept as values instead of printed.
#[derive(Debug)]
pub struct Capture(());

/// Starts keeping every report this process emits, until [`Capture::finish`].
pub fn capture() -> Capture {
    *CAPTURED.lock().unwrap_or_else(|e| e.into_inner()) = Some(Vec::new());
    Capture(())
}

impl Capture {
    /// The reports emitted since [`capture`] so far, kept on being captured: for a reader
    /// that waits for a report.
    pub fn so_far(&self) -> Vec<Report> {
        CAPTURED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_default()
    }

    /// The reports emitted since [`capture`]; later ones go to stdout again.
    pub fn finish(self) -> Vec<Report> {
        CAPTURED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_renders_to_one_emf_line() {
        let report = Report::new("Likes/Test")
            .value("RecordsReceived", "Count", 3.0)
            .values("StalenessMs", "Milliseconds", &[10.0, 20.0])
            .property("shard", "s-1");
        let line: Value = serde_json::from_str(&report.render(1_700_000_000_123).unwrap()).unwrap();
        assert_eq!(
            line,
            json!({
                "_aws": {
                    "Timestamp": 1_700_000_000_123_i64,
                    "CloudWatchMetrics": [{
                        "Namespace": "Likes/Test",
                        "Dimensions": [[]],
                        "Metrics": [
                            {"Name": "RecordsReceived", "Unit": "Count"},
                            {"Name": "StalenessMs", "Unit": "Milliseconds"},
                        ],
                    }],
                },
                "RecordsReceived": 3.0,
                "StalenessMs": [10.0, 20.0],
                "shard": "s-1",
            })
        );
    }

    #[test]
    fn empty_reports_render_nothing_and_values_are_capped() {
        let report = Report::new("Likes/Test").values("Empty", "Count", &[]);
        assert_eq!(report.render(0), None);
        assert!(report.values_of("Empty").is_empty());
        let many: Vec<f64> = (0..150).map(f64::from).collect();
        let report = Report::new("Likes/Test").values("Lag", "Milliseconds", &many);
        assert_eq!(report.values_of("Lag"), &many[..100]);
        let line: Value = serde_json::from_str(&report.render(0).unwrap()).unwrap();
        assert_eq!(line["Lag"].as_array().unwrap().len(), 100);
    }

    #[test]
    fn a_capture_keeps_emitted_reports_as_values() {
        let capture = capture();
        Report::new("Likes/Test").value("Seen", "Count", 1.0).emit();
        Report::new("Likes/Test")
            .values("Unseen", "Count", &[])
            .emit();
        let reports = capture.finish();
        assert_eq!(reports.len(), 1, "{reports:?}");
        assert_eq!(reports[0].namespace(), "Likes/Test");
        assert_eq!(reports[0].values_of("Seen"), [1.0]);
    }
}
