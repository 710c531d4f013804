//! Metrics in CloudWatch Embedded Metric Format: one JSON line on stdout per report, which
//! CloudWatch Logs turns into metrics. No dimensions (`[[]]`), so the template's alarms match
//! them; identifiers such as an item id ride along as properties, never as dimensions (one
//! metric per item would cost a fortune).

use serde_json::{json, Map, Value};

/// A set of metrics reported together.
#[derive(Debug)]
pub struct Report {
    namespace: &'static str,
    definitions: Vec<Value>,
    fields: Map<String, Value>,
}

impl Report {
    pub fn new(namespace: &'static str) -> Self {
        Self {
            namespace,
            definitions: Vec::new(),
            fields: Map::new(),
        }
    }

    /// A metric with one value (`unit`: `Count`, `Milliseconds`, …).
    pub fn value(self, name: &str, unit: &str, value: f64) -> Self {
        self.values(name, unit, &[value])
    }

    /// A metric with many values (EMF takes up to 100 per metric and line).
    pub fn values(mut self, name: &str, unit: &str, values: &[f64]) -> Self {
        if values.is_empty() {
            return self;
        }
        self.definitions.push(json!({ "Name": name, "Unit": unit }));
        let values: Vec<f64> = values.iter().copied().take(100).collect();
        let value = match values.as_slice() {
            [one] => json!(one),
            many => json!(many),
        };
        self.fields.insert(name.to_owned(), value);
        self
    }

    /// A searchable log field that is not a dimension.
    pub fn property(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.fields.insert(name.to_owned(), value.into());
        self
    }

    pub fn emit(self) {
        if self.definitions.is_empty() {
            return;
        }
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or_default();
        let mut line = self.fields;
        line.insert(
            "_aws".into(),
            json!({
                "Timestamp": now_ms,
                "CloudWatchMetrics": [{
                    "Namespace": self.namespace,
                    "Dimensions": [[]],
                    "Metrics": self.definitions,
                }],
            }),
        );
        println!("{}", Value::Object(line));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_reports_emit_nothing_and_values_are_capped() {
        let report = Report::new("Likes/Test").values("Empty", "Count", &[]);
        assert!(report.definitions.is_empty());
        let many: Vec<f64> = (0..150).map(f64::from).collect();
        let report = Report::new("Likes/Test").values("Lag", "Milliseconds", &many);
        assert_eq!(report.fields["Lag"].as_array().unwrap().len(), 100);
    }
}
