//! The live counts tables.
//!
//! - LiveConnections, `connection_id`: the watcher (`user_id`) and the items it watches, so
//!   `$disconnect`, or a push that meets a gone connection, finds its subscriptions. TTL past
//!   API Gateway's two-hour limit drops the rows of connections whose `$disconnect` was lost.
//! - LiveSubscriptions, `watch` = `<item_id>#<bucket>` / `connection_id`: an item's watchers
//!   spread over `buckets` partition keys by a hash of the connection, so a viral item's
//!   watchers are no hot partition. Read one page at a time.
//! - LivePushes, `item_id`, two kinds of row:
//!   - the item's watch row, `<item_id>`: for each bucket that holds subscriptions, until
//!     when one of them may be open. The broadcaster reads it first, so an item nobody
//!     watches costs one read, and only the buckets that hold watchers are pushed to.
//!   - a bucket's push claim, `<item_id>#<bucket>`: a push of an item's counts to one bucket
//!     of its watchers happens at most once a second, and never while the previous one
//!     still runs, however many broadcaster invocations (one per event log shard) see the
//!     item: each takes the claim for the current second with one conditional write, and
//!     only the winner fans out. The buckets of a viral item are claimed by several
//!     invocations at once, so its fan-out is split among them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use aws_sdk_dynamodb::Client;
use likes_core::live::{watch_bucket, watch_key, MAX_WATCHED};
use likes_core::ItemId;

use crate::batch;
use crate::rows::attr::{CONNECTION_ID, ITEMS, ITEMS_VERSION, WATCH};
use crate::rows::{self, number, ConnectionRow, Item, SubscriptionRow};
use crate::StoreError;

mod pushes;

pub use pushes::{PushClaim, PushClaims, PUSH_INTERVAL_MS, PUSH_LEASE_MS};

/// API Gateway closes a connection after two hours at most.
pub const MAX_CONNECTION_SECONDS: i64 = 2 * 3600;
/// A connection's rows live ten minutes past that.
pub const CONNECTION_TTL_SECONDS: i64 = MAX_CONNECTION_SECONDS + 600;
/// Buckets one container remembers watched (forgotten all at once when it is full).
const WATCHING_ITEMS: usize = 10_000;

/// What a subscribe came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Watch {
    Subscribed,
    /// The connection would watch more than [`MAX_WATCHED`] items: nothing was written.
    TooMany,
    /// No such connection (it went, or its `$connect` never completed).
    NoConnection,
    /// Other messages of the connection kept changing what it watches: nothing was written.
    Busy,
}

/// Attempts of a subscribe or unsubscribe whose list another message of the connection
/// changed between the read and the write.
const LIST_ATTEMPTS: usize = 5;

/// What writing a connection's list came to.
enum Listed {
    Written,
    Gone,
    /// Another message changed the list since it was read.
    Changed,
}

/// One page of one bucket of an item's watchers.
#[derive(Debug, Clone)]
pub struct WatcherPage {
    pub connections: Vec<String>,
    /// Where the next page starts; `None` after the last.
    pub next: Option<Item>,
}

/// Connections and their subscriptions. Cheap to clone.
#[derive(Debug, Clone)]
pub struct LiveStore {
    client: Client,
    connections_table: String,
    subscriptions_table: String,
    buckets: u32,
}

impl LiveStore {
    pub fn new(
        client: Client,
        connections_table: impl Into<String>,
        subscriptions_table: impl Into<String>,
        buckets: u32,
    ) -> Self {
        Self {
            client,
            connections_table: connections_table.into(),
            subscriptions_table: subscriptions_table.into(),
            buckets: buckets.max(1),
        }
    }

    /// Records a connection that `$connect` let in.
    pub async fn connect(
        &self,
        connection_id: &str,
        user_id: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let row = ConnectionRow {
            connection_id: connection_id.to_owned(),
            user_id: user_id.to_owned(),
            items: Vec::new(),
            items_version: 0,
            connected_at: now_ms,
            expires_at: now_ms / 1000 + CONNECTION_TTL_SECONDS,
        };
        self.client
            .put_item()
            .table_name(&self.connections_table)
            .set_item(Some(rows::to_item(&row)?))
            .send()
            .await
            .map_err(|err| StoreError::aws("PutItem", err))?;
        Ok(())
    }

    /// The connection's row, strongly consistent (its messages come right after `$connect`).
    pub async fn connection(
        &self,
        connection_id: &str,
    ) -> Result<Option<ConnectionRow>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.connections_table)
            .key(CONNECTION_ID, AttributeValue::S(connection_id.to_owned()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| StoreError::aws("GetItem", err))?;
        output.item.map(rows::from_item).transpose()
    }

    /// Adds `items` to what the connection watches. The connection row lists them first, so
    /// whatever subscription rows exist are always listed there for `$disconnect` to find;
    /// then the items' watch rows cover the connection's bucket for as long as it can be
    /// open, so every subscription row is in a bucket the broadcaster pushes to.
    pub async fn subscribe(
        &self,
        connection_id: &str,
        items: &[ItemId],
        watching: &Watching,
    ) -> Result<Watch, StoreError> {
        let mut attempts = 0;
        let row = loop {
            let Some(row) = self.connection(connection_id).await? else {
                return Ok(Watch::NoConnection);
            };
            let mut watched = row.items.clone();
            for item in items {
                if !watched.iter().any(|w| w == item.as_str()) {
                    watched.push(item.as_str().to_owned());
                }
            }
            if watched.len() > MAX_WATCHED {
                return Ok(Watch::TooMany);
            }
            match self
                .list(connection_id, &watched, row.items_version)
                .await?
            {
                Listed::Written => break row,
                Listed::Gone => return Ok(Watch::NoConnection),
                Listed::Changed if attempts + 1 < LIST_ATTEMPTS => attempts += 1,
                Listed::Changed => return Ok(Watch::Busy),
            }
        };
        let bucket = watch_bucket(connection_id, self.buckets);
        watching.cover(items, bucket, &row).await?;
        let requests = items
            .iter()
            .map(|item| {
                batch::put(rows::to_item(&SubscriptionRow {
                    watch: watch_key(item, bucket),
                    connection_id: connection_id.to_owned(),
                    expires_at: row.expires_at,
                })?)
            })
            .collect::<Result<_, _>>()?;
        batch::write_all(&self.client, &self.subscriptions_table, requests).await?;
        Ok(Watch::Subscribed)
    }

    /// Stops the connection watching `items` (those it does not watch are ignored).
    pub async fn unsubscribe(
        &self,
        connection_id: &str,
        items: &[ItemId],
    ) -> Result<(), StoreError> {
        self.remove_subscriptions(connection_id, items).await?;
        // The list shrinks only after the rows are gone, so every row stays listed; a
        // subscribe racing with it is kept (the write is conditional on the list read).
        for _ in 0..LIST_ATTEMPTS {
            let Some(row) = self.connection(connection_id).await? else {
                return Ok(());
            };
            let watched: Vec<String> = row
                .items
                .into_iter()
                .filter(|w| !items.iter().any(|item| item.as_str() == w))
                .collect();
            match self
                .list(connection_id, &watched, row.items_version)
                .await?
            {
                Listed::Written | Listed::Gone => return Ok(()),
                Listed::Changed => {}
            }
        }
        // Still listed items whose rows are gone: harmless, `$disconnect` deletes nothing.
        Ok(())
    }

    /// Removes the connection and every subscription it lists: on `$disconnect`, or when a
    /// push found it gone.
    pub async fn disconnect(&self, connection_id: &str) -> Result<(), StoreError> {
        let Some(row) = self.connection(connection_id).await? else {
            return Ok(());
        };
        let items: Vec<ItemId> = row
            .items
            .iter()
            .filter_map(|item| ItemId::parse(item).ok())
            .collect();
        self.remove_subscriptions(connection_id, &items).await?;
        self.client
            .delete_item()
            .table_name(&self.connections_table)
            .key(CONNECTION_ID, AttributeValue::S(connection_id.to_owned()))
            .send()
            .await
            .map_err(|err| StoreError::aws("DeleteItem", err))?;
        Ok(())
    }

    /// One page of one bucket of `item`'s watchers, from `start` (a previous page's `next`).
    pub async fn watchers(
        &self,
        item: &ItemId,
        bucket: u32,
        start: Option<Item>,
    ) -> Result<WatcherPage, StoreError> {
        let output = self
            .client
            .query()
            .table_name(&self.subscriptions_table)
            .key_condition_expression("#watch = :watch")
            .expression_attribute_names("#watch", WATCH)
            .expression_attribute_values(":watch", AttributeValue::S(watch_key(item, bucket)))
            .projection_expression(CONNECTION_ID)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|err| StoreError::aws("Query", err))?;
        let connections = output
            .items
            .unwrap_or_default()
            .into_iter()
            .filter_map(|mut row| match row.remove(CONNECTION_ID) {
                Some(AttributeValue::S(id)) => Some(id),
                _ => None,
            })
            .collect();
        Ok(WatcherPage {
            connections,
            next: output.last_evaluated_key,
        })
    }

    /// Sets the items a connection watches, on condition that its list is still the one
    /// read at `version`.
    async fn list(
        &self,
        connection_id: &str,
        items: &[String],
        version: u64,
    ) -> Result<Listed, StoreError> {
        let items = AttributeValue::L(items.iter().cloned().map(AttributeValue::S).collect());
        let update = self
            .client
            .update_item()
            .table_name(&self.connections_table)
            .key(CONNECTION_ID, AttributeValue::S(connection_id.to_owned()))
            .update_expression("SET #items = :items, #version = :next")
            .condition_expression(
                "attribute_exists(#id) AND \
                 (attribute_not_exists(#version) OR #version = :version)",
            )
            .expression_attribute_names("#items", ITEMS)
            .expression_attribute_names("#id", CONNECTION_ID)
            .expression_attribute_names("#version", ITEMS_VERSION)
            .expression_attribute_values(":items", items)
            .expression_attribute_values(":version", number(version as i64))
            .expression_attribute_values(":next", number(version as i64 + 1))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match update {
            Ok(_) => Ok(Listed::Written),
            Err(err) => match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(refused)) => {
                    Ok(if refused.item().is_some() {
                        Listed::Changed
                    } else {
                        Listed::Gone
                    })
                }
                _ => Err(StoreError::aws("UpdateItem", err)),
            },
        }
    }

    async fn remove_subscriptions(
        &self,
        connection_id: &str,
        items: &[ItemId],
    ) -> Result<(), StoreError> {
        let bucket = watch_bucket(connection_id, self.buckets);
        let requests = items
            .iter()
            .map(|item| {
                let key: Item = [
                    (WATCH.to_owned(), AttributeValue::S(watch_key(item, bucket))),
                    (
                        CONNECTION_ID.to_owned(),
                        AttributeValue::S(connection_id.to_owned()),
                    ),
                ]
                .into();
                batch::delete(key)
            })
            .collect::<Result<_, _>>()?;
        batch::write_all(&self.client, &self.subscriptions_table, requests).await
    }
}

/// A container's memory of until when it knows items' buckets watched, so a viral item's
/// subscribers write its watch row about once per container and bucket every ten minutes
/// (a connection opened within ten minutes of another one ends within its row's cover), not
/// once each. Cheap to clone; clones share the memory.
#[derive(Debug, Clone)]
pub struct Watching {
    claims: PushClaims,
    known: Arc<Mutex<HashMap<String, i64>>>,
}

impl Watching {
    pub fn new(claims: PushClaims) -> Self {
        Self {
            claims,
            known: Arc::default(),
        }
    }

    /// Makes the watch rows of `items` cover `bucket` for as long as `connection` can be open.
    async fn cover(
        &self,
        items: &[ItemId],
        bucket: u32,
        connection: &ConnectionRow,
    ) -> Result<(), StoreError> {
        let until_s = connection.expires_at;
        let end_s = until_s - (CONNECTION_TTL_SECONDS - MAX_CONNECTION_SECONDS);
        let now_s = likes_core::clock::now_ms() / 1000;
        let due: Vec<&ItemId> = {
            let known = self.known.lock().expect("watching lock");
            items
                .iter()
                .filter(|item| {
                    known
                        .get(&watch_key(item, bucket))
                        .is_none_or(|k| *k < end_s)
                })
                .collect()
        };
        let writes = due.iter().map(|item| async move {
            let until = self
                .claims
                .watch(item, bucket, until_s, end_s, now_s)
                .await?;
            Ok::<_, StoreError>((watch_key(item, bucket), until))
        });
        let written = futures_util::future::try_join_all(writes).await?;
        let mut known = self.known.lock().expect("watching lock");
        if known.len() + written.len() > WATCHING_ITEMS {
            known.clear();
        }
        known.extend(written);
        Ok(())
    }
}
