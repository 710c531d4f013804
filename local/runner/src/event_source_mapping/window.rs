//! Tumbling windows (`TumblingWindowInSeconds`): aligned windows over the records' creation
//! times, and the state Lambda carries from one invocation of a window to the next.

use std::collections::HashMap;
use std::time::Duration;

use aws_lambda_events::event::dynamodb::{Event, EventRecord, TimeWindowEvent};
use aws_lambda_events::time_window::{TimeWindowProperties, Window};
use serde_json::Value;

/// Lambda ends a window early once its state passes 1 MB.
const MAX_STATE_BYTES: usize = 1024 * 1024;

/// One aligned window: `[start, end)` in epoch seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Bounds {
    pub start: i64,
    pub end: i64,
}

impl Bounds {
    /// The window of the given length that holds `epoch_secs` (windows start at multiples
    /// of their length, as Lambda aligns them).
    pub fn holding(epoch_secs: f64, length: Duration) -> Self {
        let length = length.as_secs().max(1) as i64;
        let start = (epoch_secs.floor() as i64).div_euclid(length) * length;
        Self {
            start,
            end: start + length,
        }
    }

    fn window(self) -> Window {
        let mut window = Window::default();
        window.start = chrono::DateTime::from_timestamp(self.start, 0).unwrap_or_default();
        window.end = chrono::DateTime::from_timestamp(self.end, 0).unwrap_or_default();
        window
    }
}

/// The window a shard is in: its bounds and the state the last invocation returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenWindow {
    pub bounds: Bounds,
    pub state: HashMap<String, String>,
    /// The state grew past Lambda's limit: the window ends now, whatever the clock says.
    pub terminated_early: bool,
}

impl OpenWindow {
    pub fn new(bounds: Bounds) -> Self {
        Self {
            bounds,
            state: HashMap::new(),
            terminated_early: false,
        }
    }

    /// The final invocation is due once the window is over: its end has passed and the shard
    /// was read past it, or its records are done because the next one is of a later window,
    /// or its state grew too large.
    pub fn final_due(&self, read_through_secs: f64, head: Option<Bounds>) -> bool {
        self.terminated_early
            || head.is_some_and(|head| head != self.bounds)
            || (head.is_none() && read_through_secs >= self.bounds.end as f64)
    }

    /// The time window event for `records` of this window (none for the final invocation).
    pub fn event(
        &self,
        records: Vec<EventRecord>,
        shard_id: &str,
        stream_arn: &str,
        is_final: bool,
    ) -> TimeWindowEvent {
        let mut plain = Event::default();
        plain.records = records;
        let mut properties = TimeWindowProperties::default();
        properties.window = self.bounds.window();
        properties.state = self.state.clone();
        properties.shard_id = Some(shard_id.to_owned());
        properties.event_source_arn = Some(stream_arn.to_owned());
        properties.is_final_invoke_for_window = is_final;
        properties.is_window_terminated_early = is_final && self.terminated_early;
        let mut event = TimeWindowEvent::default();
        event.dynamo_db_event = plain;
        event.time_window_properties = properties;
        event
    }

    /// Keeps the state an invocation returned for the window's next invocation.
    pub fn carry(&mut self, state: HashMap<String, String>) {
        let bytes: usize = state.iter().map(|(k, v)| k.len() + v.len() + 6).sum();
        self.terminated_early = bytes > MAX_STATE_BYTES;
        self.state = state;
    }
}

/// The state in a time window function's answer. Lambda counts an answer without one as a
/// failed invocation.
pub fn returned_state(response: &Value) -> Result<HashMap<String, String>, String> {
    match response.get("state") {
        None | Some(Value::Null) => {
            Err("the time window response has no state: a failed invocation".into())
        }
        Some(state) => serde_json::from_value(state.clone())
            .map_err(|e| format!("the time window state is not a map of strings: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_aligned_to_their_length() {
        let length = Duration::from_secs(30);
        let expected = Bounds {
            start: 1_700_000_010,
            end: 1_700_000_040,
        };
        assert_eq!(Bounds::holding(1_700_000_014.9, length), expected);
        assert_eq!(Bounds::holding(1_700_000_010.0, length), expected);
        assert_eq!(Bounds::holding(1_700_000_039.99, length), expected);
        assert_eq!(
            Bounds::holding(1_700_000_040.0, length).start,
            1_700_000_040
        );
    }

    #[test]
    fn the_final_invocation_waits_for_the_window_to_be_read_through() {
        let bounds = Bounds {
            start: 100,
            end: 110,
        };
        let open = OpenWindow::new(bounds);
        assert!(!open.final_due(109.9, None), "the window is not over");
        assert!(
            !open.final_due(120.0, Some(bounds)),
            "its records are pending"
        );
        assert!(open.final_due(110.0, None));
        assert!(open.final_due(
            105.0,
            Some(Bounds {
                start: 110,
                end: 120
            })
        ));
    }

    #[test]
    fn events_carry_the_shard_the_window_and_the_state() {
        let mut open = OpenWindow::new(Bounds {
            start: 120,
            end: 180,
        });
        open.carry([("likes".to_owned(), "3".to_owned())].into());
        let event = open.event(Vec::new(), "shardId-1-v2", "arn:s", true);
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["shardId"], "shardId-1-v2");
        assert_eq!(json["eventSourceARN"], "arn:s");
        assert_eq!(json["window"]["start"], "1970-01-01T00:02:00Z");
        assert_eq!(json["window"]["end"], "1970-01-01T00:03:00Z");
        assert_eq!(json["state"]["likes"], "3");
        assert_eq!(json["isFinalInvokeForWindow"], true);
        assert_eq!(json["isWindowTerminatedEarly"], false);
        assert_eq!(json["Records"], serde_json::json!([]));
    }

    #[test]
    fn an_answer_without_state_is_a_failure() {
        let plain = serde_json::json!({ "batchItemFailures": [] });
        assert!(returned_state(&plain).is_err());
        let answered = serde_json::json!({ "state": { "n": "1" }, "batchItemFailures": [] });
        assert_eq!(returned_state(&answered).unwrap()["n"], "1");
    }

    #[test]
    fn a_state_past_one_megabyte_ends_the_window_early() {
        let mut open = OpenWindow::new(Bounds { start: 0, end: 60 });
        open.carry([("big".to_owned(), "x".repeat(MAX_STATE_BYTES))].into());
        assert!(open.terminated_early);
        assert!(open.final_due(1.0, Some(open.bounds)));
    }
}
