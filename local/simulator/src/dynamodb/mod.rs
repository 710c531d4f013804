//! DynamoDB and DynamoDB Streams: each request read into the embedded emulator's own
//! request type, run, and its answer (or its error, in DynamoDB's wire shape) written back.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use dynoxide::Database;
use serde::Deserialize;
use serde_json::json;

use crate::meter::Meter;
use crate::reply::{self, Reply};

mod billing;
mod touches;
mod transactions;

pub use billing::{index_resource, table_resource};
#[cfg(test)]
pub use transactions::IN_FLIGHT;

pub struct DynamoDb {
    database: Database,
    /// When point-in-time recovery was turned on, by table: the emulator has no backups,
    /// so their window is kept here.
    recovery: Mutex<BTreeMap<String, f64>>,
    /// Held across a request and the reads around it, so nothing writes between them.
    writing: Mutex<()>,
    /// Each table's key attributes, as billing reads them.
    schemas: Mutex<HashMap<String, touches::Schema>>,
    /// Until when each item a transaction wrote counts as in flight.
    held: Mutex<HashMap<String, std::time::Instant>>,
    meter: Arc<Meter>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct TableRequest {
    table_name: String,
}

impl std::fmt::Debug for DynamoDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DynamoDb")
    }
}

/// Runs `operation` with the request read from `body` as its own type.
macro_rules! operations {
    ($database:expr, $operation:expr, $body:expr, { $($name:literal => $method:ident,)* }) => {
        match $operation {
            $($name => match reply::read($body) {
                Ok(request) => answer($database.$method(request)),
                Err(reply) => reply,
            },)*
            other => Reply::unknown_operation(other),
        }
    };
}

impl DynamoDb {
    pub fn new(meter: Arc<Meter>) -> dynoxide::Result<Self> {
        Ok(Self {
            database: Database::memory()?,
            recovery: Mutex::default(),
            writing: Mutex::default(),
            schemas: Mutex::default(),
            held: Mutex::default(),
            meter,
        })
    }

    pub fn answer(&self, operation: &str, body: &[u8]) -> Reply {
        if let "UpdateContinuousBackups" | "DescribeContinuousBackups" = operation {
            return self.continuous_backups(operation, body);
        }
        let _writing = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        self.metered(operation, body)
    }

    /// The request run by the emulator, with its differences from DynamoDB made good.
    fn dispatch(&self, operation: &str, body: &[u8]) -> Reply {
        match operation {
            "UpdateItem" => return self.update_item(body),
            "DescribeStream" => return self.describe_stream(body),
            _ => {}
        }
        operations!(self.database, operation, body, {
            "CreateTable" => create_table,
            "DescribeTable" => describe_table,
            "UpdateTimeToLive" => update_time_to_live,
            "PutItem" => put_item,
            "GetItem" => get_item,
            "DeleteItem" => delete_item,
            "Query" => query,
            "Scan" => scan,
            "BatchGetItem" => batch_get_item,
            "BatchWriteItem" => batch_write_item,
            "TransactWriteItems" => transact_write_items,
            "TransactGetItems" => transact_get_items,
            "ListStreams" => list_streams,
            "GetShardIterator" => get_shard_iterator,
            "GetRecords" => get_records,
        })
    }
}

impl DynamoDb {
    /// UpdateItem, with one difference from the embedded emulator made good: an update
    /// that creates its item answers `ALL_OLD` with no attributes, as DynamoDB does (the
    /// emulator answers the new item's key).
    fn update_item(&self, body: &[u8]) -> Reply {
        let request: dynoxide::actions::update_item::UpdateItemRequest = match reply::read(body) {
            Ok(request) => request,
            Err(reply) => return reply,
        };
        let all_old = request
            .return_values
            .as_deref()
            .is_some_and(|r| r.eq_ignore_ascii_case("ALL_OLD"));
        let existed = if all_old {
            match self.stored(&request.table_name, &request.key) {
                Ok(stored) => stored.is_some(),
                Err(reply) => return reply,
            }
        } else {
            false
        };
        answer(self.database.update_item(request).map(|mut response| {
            if all_old && !existed {
                response.attributes = None;
            }
            response
        }))
    }

    /// DescribeStream, with its shard open: the emulator keeps one shard a table's whole
    /// life but names its last record as the shard's end, which on AWS marks a closed shard.
    fn describe_stream(&self, body: &[u8]) -> Reply {
        let request = match reply::read(body) {
            Ok(request) => request,
            Err(reply) => return reply,
        };
        answer(self.database.describe_stream(request).map(|mut response| {
            for shard in &mut response.stream_description.shards {
                shard.sequence_number_range.ending_sequence_number = None;
            }
            response
        }))
    }

    /// The item stored at `key` now, read without billing it; a failed read is answered as
    /// DynamoDB's error.
    fn stored(
        &self,
        table: &str,
        key: &impl serde::Serialize,
    ) -> Result<Option<dynoxide::Item>, Reply> {
        let request = reply::read(
            serde_json::json!({ "TableName": table, "Key": key, "ConsistentRead": true })
                .to_string()
                .as_bytes(),
        )?;
        match self.database.get_item(request) {
            Ok(found) => Ok(found.item),
            Err(error) => Err(failure(&error)),
        }
    }
}

fn answer<T: serde::Serialize>(result: dynoxide::Result<T>) -> Reply {
    match result {
        Ok(response) => Reply::json(&response),
        Err(error) => failure(&error),
    }
}

/// The emulator's error in DynamoDB's wire shape.
fn failure(error: &dynoxide::DynoxideError) -> Reply {
    Reply::error_body(error.status_code(), error.to_json())
}

impl DynamoDb {
    /// Point-in-time recovery: on from when it is turned on, restorable up to now.
    fn continuous_backups(&self, operation: &str, body: &[u8]) -> Reply {
        let table = match reply::read::<TableRequest>(body) {
            Ok(request) => request.table_name,
            Err(reply) => return reply,
        };
        let mut recovery = self.recovery.lock().unwrap_or_else(|e| e.into_inner());
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        if operation == "UpdateContinuousBackups" {
            recovery.entry(table.clone()).or_insert(now);
        }
        let pitr = match recovery.get(&table) {
            Some(since) => json!({
                "PointInTimeRecoveryStatus": "ENABLED",
                "EarliestRestorableDateTime": since,
                "LatestRestorableDateTime": now,
            }),
            None => json!({ "PointInTimeRecoveryStatus": "DISABLED" }),
        };
        Reply::json(&json!({
            "ContinuousBackupsDescription": {
                "ContinuousBackupsStatus": "ENABLED",
                "PointInTimeRecoveryDescription": pitr,
            }
        }))
    }
}
