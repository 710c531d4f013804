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
//! unprocessed. A batch's units are split evenly over the items it touched.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::DynamoDb;
use crate::meter::Unit;
use crate::reply::{self, Reply};

/// The key attributes of a table and of each of its global secondary indexes.
#[derive(Debug, Clone)]
pub(super) struct Schema {
    hash: String,
    range: Option<String>,
    /// Each index's name and hash key attribute.
    indexes: Vec<(String, String)>,
}

/// One item a request touches: its table, the index it reads through (a query's), and its
/// key (the request's key, or a put's whole item).
#[derive(Debug)]
struct Touch {
    table: String,
    index: Option<String>,
    key: Value,
    partition: String,
}

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

/// A key attribute's value as text: `{"S": "a"}` is `a`.
fn key_text(value: Option<&Value>) -> String {
    value
        .and_then(Value::as_object)
        .and_then(|typed| typed.values().next())
        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
        .unwrap_or_default()
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
        let (touches, held_back) = match self.admit(operation, unit, &mut request, touches) {
            Ok(admitted) => admitted,
            Err(reply) => return reply,
        };
        let before: Vec<Option<dynoxide::Item>> = match unit {
            Unit::Writes => touches.iter().map(|t| self.item(t)).collect(),
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
        let after: Vec<Option<dynoxide::Item>> = match unit {
            Unit::Writes => touches.iter().map(|t| self.item(t)).collect(),
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
        if let Some(held_back) = held_back {
            answer[held_back.0] = held_back.1;
        }
        Reply::json(&answer)
    }

    /// The table's key attributes, read once from the emulator.
    fn schema(&self, table: &str) -> Result<Schema, Reply> {
        let mut schemas = self.schemas.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(schema) = schemas.get(table) {
            return Ok(schema.clone());
        }
        let request = reply::read(json!({ "TableName": table }).to_string().as_bytes())?;
        let described = self
            .database
            .describe_table(request)
            .map_err(|e| super::failure(&e))?;
        let described = serde_json::to_value(described).unwrap_or_default();
        let table_description = &described["Table"];
        let key = |schema: &Value, kind: &str| {
            schema
                .as_array()
                .into_iter()
                .flatten()
                .find(|k| k["KeyType"] == kind)
                .and_then(|k| k["AttributeName"].as_str())
                .map(str::to_owned)
        };
        let schema = Schema {
            hash: key(&table_description["KeySchema"], "HASH").unwrap_or_default(),
            range: key(&table_description["KeySchema"], "RANGE"),
            indexes: table_description["GlobalSecondaryIndexes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|index| {
                    Some((
                        index["IndexName"].as_str()?.to_owned(),
                        key(&index["KeySchema"], "HASH")?,
                    ))
                })
                .collect(),
        };
        schemas.insert(table.to_owned(), schema.clone());
        Ok(schema)
    }

    /// Every item the request names, with its partition key.
    fn touches(&self, operation: &str, request: &Value) -> Result<Vec<Touch>, Reply> {
        let mut named: Vec<(String, Option<String>, Value)> = Vec::new();
        let table = || request["TableName"].as_str().unwrap_or_default().to_owned();
        match operation {
            "PutItem" => named.push((table(), None, request["Item"].clone())),
            "UpdateItem" | "DeleteItem" | "GetItem" => {
                named.push((table(), None, request["Key"].clone()))
            }
            "BatchWriteItem" => {
                for (table, writes) in request["RequestItems"].as_object().into_iter().flatten() {
                    for write in writes.as_array().into_iter().flatten() {
                        let key = if write["PutRequest"].is_object() {
                            write["PutRequest"]["Item"].clone()
                        } else {
                            write["DeleteRequest"]["Key"].clone()
                        };
                        named.push((table.clone(), None, key));
                    }
                }
            }
            "BatchGetItem" => {
                for (table, reads) in request["RequestItems"].as_object().into_iter().flatten() {
                    for key in reads["Keys"].as_array().into_iter().flatten() {
                        named.push((table.clone(), None, key.clone()));
                    }
                }
            }
            "TransactWriteItems" | "TransactGetItems" => {
                for action in request["TransactItems"].as_array().into_iter().flatten() {
                    let Some((kind, action)) = action.as_object().and_then(|a| a.iter().next())
                    else {
                        continue;
                    };
                    let key = if kind == "Put" {
                        action["Item"].clone()
                    } else {
                        action["Key"].clone()
                    };
                    let table = action["TableName"].as_str().unwrap_or_default().to_owned();
                    named.push((table, None, key));
                }
            }
            "Query" | "Scan" => {
                let index = request["IndexName"].as_str().map(str::to_owned);
                named.push((table(), index, Value::Null));
            }
            _ => {}
        }
        named
            .into_iter()
            .map(|(table, index, key)| {
                let schema = self.schema(&table)?;
                let partition = match (operation, &index) {
                    ("Scan", _) => "(scan)".to_owned(),
                    ("Query", None) => queried_partition(request, &schema.hash),
                    ("Query", Some(index)) => {
                        let hash = schema
                            .indexes
                            .iter()
                            .find(|(name, _)| name == index)
                            .map(|(_, hash)| hash.as_str())
                            .unwrap_or_default();
                        queried_partition(request, hash)
                    }
                    _ => key_text(key.get(&schema.hash)),
                };
                Ok(Touch {
                    table,
                    index,
                    key,
                    partition,
                })
            })
            .collect()
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

    /// The item a write touches as it is now (`None` for a query's or scan's touch).
    fn item(&self, touch: &Touch) -> Option<dynoxide::Item> {
        let schema = self.schema(&touch.table).ok()?;
        let mut key = Map::new();
        for name in std::iter::once(&schema.hash).chain(schema.range.as_ref()) {
            key.insert(name.clone(), touch.key.get(name)?.clone());
        }
        let request = reply::read(
            json!({ "TableName": touch.table, "Key": key, "ConsistentRead": true })
                .to_string()
                .as_bytes(),
        )
        .ok()?;
        self.database.get_item(request).ok()?.item
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
            let size = item.as_ref().map_or(0, dynoxide::types::item_size);
            let units = dynoxide::types::write_capacity_units(size);
            self.meter
                .take(&touch.resource(), &touch.partition, Unit::Writes, units);
        }
    }
}

impl Touch {
    fn resource(&self) -> String {
        match &self.index {
            Some(index) => index_resource(&self.table, index),
            None => table_resource(&self.table),
        }
    }
}

/// The partition a query reads: the value its key condition sets `hash` equal to.
fn queried_partition(request: &Value, hash: &str) -> String {
    let names: HashMap<&str, &str> = request["ExpressionAttributeNames"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(alias, name)| Some((alias.as_str(), name.as_str()?)))
        .collect();
    let condition = request["KeyConditionExpression"]
        .as_str()
        .unwrap_or_default();
    condition
        .split(" AND ")
        .chain(condition.split(" and "))
        .filter_map(|clause| clause.split_once('='))
        .find(|(name, _)| {
            let name = name.trim().trim_start_matches('(');
            names.get(name).copied().unwrap_or(name) == hash
        })
        .map(|(_, value)| {
            let placeholder = value.trim().trim_end_matches(')');
            key_text(request["ExpressionAttributeValues"].get(placeholder))
        })
        .unwrap_or_default()
}
