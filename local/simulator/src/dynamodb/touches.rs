//! Which items a request touches, and in which partition: each table's key attributes
//! (read once from the emulator), the keys or items a request names, and the partition a
//! query reads.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::billing::{index_resource, table_resource};
use super::DynamoDb;
use crate::reply::{self, Reply};

/// The key attributes of a table and of each of its global secondary indexes.
#[derive(Debug, Clone)]
pub(super) struct Schema {
    pub(super) hash: String,
    pub(super) range: Option<String>,
    /// Each index's name and hash key attribute.
    pub(super) indexes: Vec<(String, String)>,
}

/// One item a request touches: its table, the index it reads through (a query's), and its
/// key (the request's key, or a put's whole item).
#[derive(Debug)]
pub(super) struct Touch {
    pub(super) table: String,
    pub(super) index: Option<String>,
    pub(super) key: Value,
    pub(super) partition: String,
}

/// A key attribute's value as text: `{"S": "a"}` is `a`.
pub(super) fn key_text(value: Option<&Value>) -> String {
    value
        .and_then(Value::as_object)
        .and_then(|typed| typed.values().next())
        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
        .unwrap_or_default()
}

impl DynamoDb {
    /// The table's key attributes, read once from the emulator.
    pub(super) fn schema(&self, table: &str) -> Result<Schema, Reply> {
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
    pub(super) fn touches(&self, operation: &str, request: &Value) -> Result<Vec<Touch>, Reply> {
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
}

impl Touch {
    pub(super) fn resource(&self) -> String {
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
