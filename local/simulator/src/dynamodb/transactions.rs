//! Transactions as DynamoDB serves them side by side. The simulator answers one request at
//! a time, so a transaction's time in flight is modelled: the items a `TransactWriteItems`
//! wrote stay held for [`IN_FLIGHT`] after it, and another transaction on one of them in
//! that time is cancelled (`TransactionConflict`), as is one with an item at its key's
//! limit (`ThrottlingError`), each with its reasons in order, as DynamoDB lists them. A
//! conflict is billed as a cancellation is (the items' sizes); a throttle is not billed.
//! Single-item writes to a held item are not refused.

use std::time::Duration;

use serde_json::{json, Value};

use super::touches::{key_text, Touch};
use super::DynamoDb;
use crate::meter::Unit;
use crate::reply::Reply;

/// How long a committed transaction's items count as in flight.
pub const IN_FLIGHT: Duration = Duration::from_millis(10);

impl DynamoDb {
    /// The cancellation of a transaction that meets a held item or a key at its limit;
    /// `None` when it may run.
    pub(super) fn cancelled(&self, unit: Unit, touches: &[Touch]) -> Option<Reply> {
        let now = self.meter.now();
        let reasons: Vec<&str> = {
            let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            touches
                .iter()
                .map(|touch| {
                    if held
                        .get(&self.item_key(touch))
                        .is_some_and(|until| *until > now)
                    {
                        "TransactionConflict"
                    } else if self
                        .meter
                        .at_limit(&touch.resource(), &touch.partition, unit)
                    {
                        "ThrottlingError"
                    } else {
                        "None"
                    }
                })
                .collect()
        };
        if reasons.iter().all(|r| *r == "None") {
            return None;
        }
        for (touch, reason) in touches.iter().zip(&reasons) {
            if *reason == "TransactionConflict" && unit == Unit::Writes {
                match self.item(touch) {
                    Ok(item) => self.bill_refused(touch, item.as_ref()),
                    Err(reply) => return Some(reply),
                }
            }
        }
        let message = format!(
            "Transaction cancelled, please refer cancellation reasons for specific reasons [{}]",
            reasons.join(", ")
        );
        let listed: Vec<Value> = reasons
            .iter()
            .map(|code| match *code {
                "None" => json!({ "Code": "None" }),
                "TransactionConflict" => json!({
                    "Code": code,
                    "Message": "Transaction is ongoing for the item",
                }),
                _ => json!({
                    "Code": code,
                    "Message": "Throughput exceeds the current capacity for one or more \
                                global secondary indexes or the table",
                }),
            })
            .collect();
        Some(Reply::error_body(
            400,
            json!({
                "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                "message": message,
                "CancellationReasons": listed,
            })
            .to_string(),
        ))
    }

    /// Holds the items a committed transaction wrote for [`IN_FLIGHT`].
    pub(super) fn hold(&self, touches: &[Touch]) {
        let until = self.meter.now() + IN_FLIGHT;
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.meter.now();
        held.retain(|_, until| *until > now);
        for touch in touches {
            held.insert(self.item_key(touch), until);
        }
    }

    /// The item's table and whole primary key, as text.
    fn item_key(&self, touch: &Touch) -> String {
        let schema = self.schema(&touch.table).ok();
        let range = schema
            .as_ref()
            .and_then(|s| s.range.as_ref())
            .map(|range| key_text(touch.key.get(range)))
            .unwrap_or_default();
        format!("{}\n{}\n{range}", touch.table, touch.partition)
    }
}
