//! What the simulator billed, by the part of the service that spent it. A bench that runs
//! the production functions on the simulator ([`Aws::Simulator`](crate::Aws)) reads the
//! stack's usage before and after a phase and divides by what the phase did (likes,
//! retracted reactions).

use std::collections::BTreeMap;

use likes_simulator::{Unit, Usage};

use crate::TestStack;

/// The parts of the service, by the template resources they write.
pub const PARTS: [(&str, &[&str]); 8] = [
    ("write path", &["ReactionsTable", "RateLimitsTable"]),
    ("moderation", &["ModerationTable"]),
    ("catalog", &["CatalogTable"]),
    ("counts", &["CountsTable"]),
    ("leaderboard", &["LeaderboardTable"]),
    ("likers", &["LikersTable"]),
    (
        "live counts",
        &[
            "LivePushesTable",
            "LiveSubscriptionsTable",
            "LiveConnectionsTable",
        ],
    ),
    ("event log", &["EventsStream"]),
];

/// A phase's units per thing it did, by (part, resource, unit).
pub type Billed = BTreeMap<(String, String, Unit), f64>;

/// Every physical table and stream name of a stack, with its part and logical id.
pub struct Resources(BTreeMap<String, (&'static str, &'static str)>);

impl Resources {
    pub fn of(stack: &TestStack) -> Self {
        Self(
            PARTS
                .iter()
                .flat_map(|(part, ids)| ids.iter().map(move |id| (*part, *id)))
                .map(|(part, id)| (stack.name(id), (part, id)))
                .collect(),
        )
    }

    /// The units billed between two readings, divided by `each` (what the phase did), by
    /// part and resource.
    pub fn per(&self, before: &Usage, after: &Usage, each: usize) -> Billed {
        let mut units = Billed::new();
        for ((resource, unit), total) in &after.billed {
            let spent = total - before.billed(resource, *unit);
            if spent <= 0.0 {
                continue;
            }
            let (part, label) = self.label(resource);
            *units.entry((part.to_owned(), label, *unit)).or_default() += spent / each as f64;
        }
        units
    }

    /// A resource's part of the service and its name in the template (an index after its
    /// table's).
    pub fn label(&self, resource: &str) -> (&'static str, String) {
        let rest = resource.split_once('/').map_or(resource, |(_, rest)| rest);
        let (name, index) = match rest.split_once("/index/") {
            Some((name, index)) => (name, Some(index)),
            None => (rest, None),
        };
        let (part, id) = self.0.get(name).copied().unwrap_or(("other", "?"));
        match index {
            Some(index) => (part, format!("{id} `{index}`")),
            None => (part, id.to_owned()),
        }
    }
}

/// Where `part` goes in a table: in [`PARTS`]' order, any other last.
pub fn order(part: &str) -> usize {
    PARTS
        .iter()
        .position(|(p, _)| *p == part)
        .unwrap_or(PARTS.len())
}

/// Units as the tables print them: two decimals, a dash for none.
/// Two phases' bills side by side, a row per (part, resource) in the parts' order: write,
/// read and record units of the first phase, then of the second, in the columns
/// `[first WCU, second WCU, first RCU, second RCU, first records, second records]`.
pub fn side_by_side(first: &Billed, second: &Billed) -> Vec<((String, String), [f64; 6])> {
    let mut rows = BTreeMap::<(String, String), [f64; 6]>::new();
    for (phase, billed) in [(0, first), (1, second)] {
        for ((part, label, unit), value) in billed {
            let column = match unit {
                Unit::Writes => 0,
                Unit::Reads => 2,
                Unit::RecordsIn => 4,
                Unit::BytesIn | Unit::BytesOut => continue,
            };
            rows.entry((part.clone(), label.clone())).or_default()[column + phase] += value;
        }
    }
    let mut rows: Vec<_> = rows.into_iter().collect();
    rows.sort_by_key(|((part, label), _)| (order(part), label.clone()));
    rows
}

pub fn units(value: f64) -> String {
    if value == 0.0 {
        "–".to_owned()
    } else {
        format!("{value:.2}")
    }
}

impl TestStack {
    /// What the simulator billed, metered and throttled so far (panics on the emulator,
    /// which meters no keys).
    pub fn usage(&self) -> Usage {
        self.stack
            .aws
            .usage()
            .expect("the stack runs on the simulator (`Aws::Simulator`)")
    }

    /// What the stack's AWS billed so far: the simulator's usage, or the emulator's bill
    /// (`LikesEmulator.Usage`: it prices every request by the same rules, in its own code,
    /// and meters no keys, so only `billed` is filled). Panics if the emulator could not
    /// price a request: its bill would be short.
    pub async fn billed(&self) -> Usage {
        if let Some(usage) = self.stack.aws.usage() {
            return usage;
        }
        let answer = self
            .emulator_operation("Usage", serde_json::json!({}))
            .await;
        assert_eq!(
            answer["Unbilled"],
            serde_json::json!([]),
            "requests the emulator could not price"
        );
        let billed = answer["Billed"]
            .as_array()
            .expect("the emulator's bill")
            .iter()
            .map(|entry| {
                let resource = entry["Resource"].as_str().expect("a resource");
                let unit = match entry["Unit"].as_str().expect("a unit") {
                    "Writes" => Unit::Writes,
                    "Reads" => Unit::Reads,
                    "RecordsIn" => Unit::RecordsIn,
                    other => panic!("the emulator bills no unit {other}"),
                };
                let units = entry["Units"].as_f64().expect("units");
                ((resource.to_owned(), unit), units)
            })
            .collect();
        Usage {
            billed,
            ..Usage::default()
        }
    }
}
