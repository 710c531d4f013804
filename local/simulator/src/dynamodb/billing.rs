//! DynamoDB's bill and its partition limits. The embedded emulator prices each request
//! as DynamoDB does (item sizes rounded to 1 KB written or 4 KB read, halved for an
//! eventually consistent read, doubled in a transaction, an index charged for what its
//! entry changed): every request is asked for its `INDEXES` capacity, which is billed and
//! taken off the answer unless the caller asked for it. What the emulator leaves out is
//! billed here: a write refused by its condition costs the existing item's size (at least
//! one unit), and so does each item of a cancelled transaction.
//!
//! Each request's units go to the partition keys it touched, base table and index alike,
//! and a key already at its limit in the last second is throttled: a single-item request
//! with `ProvisionedThroughputExceededException`, a batch's items at such keys handed back
//! unprocessed, a transaction cancelled (see `transactions.rs`). A batch's units are split
//! evenly over the items it touched.

use serde_json::{json, Map, Value};

use super::touches::{key_text, Touch};
use super::DynamoDb;
use crate::meter::Unit;
use crate::reply::{self, Reply};

/// A batch's items throttled at their keys: the answer's field that hands them back
/// unprocessed, and the items.
type HeldBack = (&'static str, Value);

/// What a request is billed in, `None` for requests DynamoDB does not bill per item.
fn unit(operation: &str) -> Option<Unit> {
    match operation {
        "PutItem" | "UpdateItem" | "DeleteItem" | "BatchWriteItem" | "TransactWriteItems" => {
            Some(Unit::Writes)
        }
        "GetItem" | "BatchGetItem" | "Query" | "Scan" | "TransactGetItems" => Some(Unit::Reads),
        _ => None,
    }
}

pub fn table_resource(table: &str) -> String {
    format!("table/{table}")
}

pub fn index_resource(table: &str, index: &str) -> String {
    format!("table/{table}/index/{index}")
}

impl DynamoDb {
    /// Runs a request as DynamoDB would serve it: throttled at a key at its limit, billed
    /// for what it did, answered with capacity only if it asked.
    pub(super) fn metered(&self, operation: &str, body: &[u8]) -> Reply {
        let Some(unit) = unit(operation) else {
            return self.dispatch(operation, body);
        };
        let mut request: Value = match reply::read(body) {
            Ok(request) => request,
            Err(reply) => return reply,
        };
        let asked = request["ReturnConsumedCapacity"]
            .as_str()
            .is_some_and(|mode| mode != "NONE");
        if !asked {
            request["ReturnConsumedCapacity"] = json!("INDEXES");
        }
        let touches = match self.touches(operation, &request) {
            Ok(touches) => touches,
            Err(reply) => return reply,
        };
        let transaction = matches!(operation, "TransactWriteItems" | "TransactGetItems");
        if let Some(cancelled) = transaction
            .then(|| self.cancelled(unit, &touches))
            .flatten()
        {
            return cancelled;
        }
        let (touches, held_back) = if transaction {
            (touches, None)
        } else {
            match self.admit(operation, unit, &mut request, touches) {
                Ok(admitted) => admitted,
                Err(reply) => return reply,
            }
        };
        let before = match unit {
            Unit::Writes => match self.items(&touches, false) {
                Ok(items) => items,
                Err(reply) => return reply,
            },
            _ => Vec::new(),
        };
        let body = serde_json::to_vec(&request).unwrap_or_default();
        let reply = self.dispatch(operation, &body);
        if reply.status() != 200 {
            self.bill_refusal(&reply, &touches, &before);
            return reply;
        }
        let mut answer: Value = match serde_json::from_slice(reply.body()) {
            Ok(answer) => answer,
            Err(_) => return reply,
        };
        // Written already: a failed read now is answered as DynamoDB answers a 500 after a
        // write, and the caller's retry meets what it wrote.
        let after = match unit {
            Unit::Writes => match self.items(&touches, true) {
                Ok(items) => items,
                Err(reply) => return reply,
            },
            _ => Vec::new(),
        };
        let capacity = if asked {
            answer["ConsumedCapacity"].clone()
        } else {
            answer
                .as_object_mut()
                .and_then(|a| a.remove("ConsumedCapacity"))
                .unwrap_or(Value::Null)
        };
        self.bill(unit, &capacity, &touches, &before, &after);
        if operation == "TransactWriteItems" {
            self.hold(&touches);
        }
        if let Some(held_back) = held_back {
            answer[held_back.0] = held_back.1;
        }
        Reply::json(&answer)
    }

    /// Throttles what reaches a key already at its limit: a batch's items at such keys are
    /// taken out of the request and handed back unprocessed (`Some((field, items))`), and
    /// any other request at one is refused.
    fn admit(
        &self,
        operation: &str,
        unit: Unit,
        request: &mut Value,
        touches: Vec<Touch>,
    ) -> Result<(Vec<Touch>, Option<HeldBack>), Reply> {
        let full: Vec<bool> = touches
            .iter()
            .map(|t| self.meter.at_limit(&t.resource(), &t.partition, unit))
            .collect();
        if !full.contains(&true) {
            return Ok((touches, None));
        }
        let batch = match operation {
            "BatchWriteItem" => Some(("UnprocessedItems", None)),
            "BatchGetItem" => Some(("UnprocessedKeys", Some("Keys"))),
            _ => None,
        };
        let Some((field, list)) = batch.filter(|_| full.contains(&false)) else {
            return Err(Reply::error(
                400,
                "ProvisionedThroughputExceededException",
                "The level of configured provisioned throughput for the table was exceeded",
            ));
        };
        let mut held: Map<String, Value> = Map::new();
        let mut flags = full.iter();
        for (table, entries) in request["RequestItems"]
            .as_object_mut()
            .into_iter()
            .flatten()
        {
            let entries = match list {
                Some(list) => &mut entries[list],
                None => entries,
            };
            let Some(array) = entries.as_array_mut() else {
                continue;
            };
            let (kept, refused): (Vec<_>, Vec<_>) = std::mem::take(array)
                .into_iter()
                .partition(|_| !flags.next().copied().unwrap_or(false));
            *array = kept;
            if !refused.is_empty() {
                let refused = Value::Array(refused);
                held.insert(
                    table.clone(),
                    match list {
                        Some(list) => json!({ list: refused }),
                        None => refused,
                    },
                );
            }
        }
        let admitted = touches
            .into_iter()
            .zip(full)
            .filter(|(_, full)| !full)
            .map(|(touch, _)| touch)
            .collect();
        Ok((admitted, Some((field, Value::Object(held)))))
    }

    /// The item a write touches as it is now (`None` for a query's or scan's touch, which
    /// names no key).
    pub(super) fn item(&self, touch: &Touch) -> Result<Option<dynoxide::Item>, Reply> {
        let schema = self.schema(&touch.table)?;
        let mut key = Map::new();
        for name in std::iter::once(&schema.hash).chain(schema.range.as_ref()) {
            let Some(value) = touch.key.get(name) else {
                return Ok(None);
            };
            key.insert(name.clone(), value.clone());
        }
        self.stored(&touch.table, &key)
    }

    /// The items a write's touches name, read where billing needs them: before a write, to
    /// price a refusal and find an index entry it takes out; after it, only on a table with
    /// a global index, to find the entry it wrote.
    fn items(&self, touches: &[Touch], after: bool) -> Result<Vec<Option<dynoxide::Item>>, Reply> {
        touches
            .iter()
            .map(|touch| {
                let indexed = !self.schema(&touch.table)?.indexes.is_empty();
                if after && !indexed {
                    return Ok(None);
                }
                self.item(touch)
            })
            .collect()
    }

    /// What a refused write costs the item it names: its size, at least one write unit.
    pub(super) fn bill_refused(&self, touch: &Touch, item: Option<&dynoxide::Item>) {
        let size = item.map_or(0, dynoxide::types::item_size);
        self.meter.take(
            &touch.resource(),
            &touch.partition,
            Unit::Writes,
            dynoxide::types::write_capacity_units(size),
        );
    }

    /// Bills the capacity a request consumed to the keys it touched.
    fn bill(
        &self,
        unit: Unit,
        capacity: &Value,
        touches: &[Touch],
        before: &[Option<dynoxide::Item>],
        after: &[Option<dynoxide::Item>],
    ) {
        let entries = match capacity {
            Value::Array(entries) => entries.clone(),
            Value::Object(_) => vec![capacity.clone()],
            _ => Vec::new(),
        };
        for entry in entries {
            let table = entry["TableName"].as_str().unwrap_or_default();
            let on_table: Vec<usize> = (0..touches.len())
                .filter(|&i| touches[i].table == table)
                .collect();
            let table_units = entry["Table"]["CapacityUnits"]
                .as_f64()
                .or_else(|| entry["CapacityUnits"].as_f64())
                .unwrap_or(0.0);
            let share = |n: usize| if n == 0 { 0.0 } else { 1.0 / n as f64 };
            for &i in &on_table {
                let touch = &touches[i];
                self.meter.take(
                    &touch.resource(),
                    &touch.partition,
                    unit,
                    table_units * share(on_table.len()),
                );
            }
            // A local index lives in its item's partition: its units go to the item's key.
            for (index, detail) in entry["LocalSecondaryIndexes"]
                .as_object()
                .into_iter()
                .flatten()
            {
                let units = detail["CapacityUnits"].as_f64().unwrap_or(0.0);
                for &i in &on_table {
                    self.meter.take(
                        &index_resource(table, index),
                        &touches[i].partition,
                        unit,
                        units * share(on_table.len()),
                    );
                }
            }
            let Ok(schema) = self.schema(table) else {
                continue;
            };
            for (index, detail) in entry["GlobalSecondaryIndexes"]
                .as_object()
                .into_iter()
                .flatten()
            {
                let units = detail["CapacityUnits"].as_f64().unwrap_or(0.0);
                let Some(hash) = schema
                    .indexes
                    .iter()
                    .find(|(name, _)| name == index)
                    .map(|(_, hash)| hash)
                else {
                    continue;
                };
                // A query's partition; for a write, the entry each item wrote or left,
                // keyed by the item after the write (before it, if the write took it out).
                let queried: Vec<String> = on_table
                    .iter()
                    .filter(|&&i| touches[i].index.as_deref() == Some(index.as_str()))
                    .map(|&i| touches[i].partition.clone())
                    .collect();
                let written = on_table.iter().filter_map(|&i| {
                    let now = after.get(i).and_then(Option::as_ref);
                    let old = before.get(i).and_then(Option::as_ref);
                    let value = now
                        .and_then(|item| item.get(hash))
                        .or_else(|| old.and_then(|old| old.get(hash)))?;
                    Some(key_text(serde_json::to_value(value).ok().as_ref()))
                });
                let keys: Vec<String> = if queried.is_empty() {
                    written.collect()
                } else {
                    queried
                };
                let resource = index_resource(table, index);
                if keys.is_empty() {
                    self.meter.take(&resource, "", unit, units);
                }
                for key in &keys {
                    self.meter
                        .take(&resource, key, unit, units * share(keys.len()));
                }
            }
        }
    }

    /// A write refused by its condition, or a cancelled transaction, still costs each item
    /// it touched the size of the item there (at least one write unit).
    fn bill_refusal(&self, reply: &Reply, touches: &[Touch], before: &[Option<dynoxide::Item>]) {
        let error: Value = serde_json::from_slice(reply.body()).unwrap_or_default();
        let kind = error["__type"].as_str().unwrap_or_default();
        if !kind.ends_with("ConditionalCheckFailedException")
            && !kind.ends_with("TransactionCanceledException")
        {
            return;
        }
        for (touch, item) in touches.iter().zip(before) {
            self.bill_refused(touch, item.as_ref());
        }
    }
}
