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

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use aws_sdk_dynamodb::Client;
use likes_core::live::{watch_bucket, watch_key, MAX_WATCHED};
use likes_core::pipeline::Counts;
use likes_core::ItemId;

use crate::batch;
use crate::error::condition_held;
use crate::rows::attr::{
    self, CLAIMED_AT, CONNECTION_ID, EXPIRES_AT, FINISHED, FINISHED_AT, ITEMS, ITEMS_VERSION,
    ITEM_ID, PUSHED_AS_OF, PUSHED_DISLIKE_COUNT, PUSHED_LIKE_COUNT, WATCH,
};
use crate::rows::{self, number, ConnectionRow, Item, PushRow, SubscriptionRow, WatchRow};
use crate::StoreError;

/// API Gateway closes a connection after two hours at most.
pub const MAX_CONNECTION_SECONDS: i64 = 2 * 3600;
/// A connection's rows live ten minutes past that.
pub const CONNECTION_TTL_SECONDS: i64 = MAX_CONNECTION_SECONDS + 600;
/// Buckets one container remembers watched (forgotten all at once when it is full).
const WATCHING_ITEMS: usize = 10_000;
/// An item is pushed at most once in this long.
pub const PUSH_INTERVAL_MS: i64 = 1000;
/// A push claim whose fan-out never finished (its invocation died) is taken over after this.
pub const PUSH_LEASE_MS: i64 = 10_000;
/// Push claims of items that stopped changing are dropped a day on.
const PUSH_TTL_SECONDS: i64 = 24 * 3600;

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

/// What taking a bucket's push claim came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushClaim {
    /// This caller pushes to the bucket now, then calls [`PushClaims::finish`]; `pushed` is
    /// what the bucket's last finished counts push sent (`None` after a stale push, or before
    /// any).
    Won { pushed: Option<Counts> },
    /// A finished push already carried counts honest up to the `as_of` asked for.
    Covered,
    /// The last push finished less than a second ago, or still runs: try again at `retry_at`
    /// (epoch millis).
    Busy { retry_at: i64 },
}

/// The items' watch rows and their buckets' push claims (LivePushes). Cheap to clone.
#[derive(Debug, Clone)]
pub struct PushClaims {
    client: Client,
    table: String,
}

impl PushClaims {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// The buckets of each of `items` that may hold an open subscription at `now_s`, read
    /// strongly consistent (a subscribe writes the row just before its subscriptions). Items
    /// nobody watches are absent.
    pub async fn watched(
        &self,
        items: &[ItemId],
        now_s: i64,
    ) -> Result<BTreeMap<ItemId, Vec<u32>>, StoreError> {
        let keys = items
            .iter()
            .map(|item| Item::from([(ITEM_ID.to_owned(), AttributeValue::S(item.to_string()))]))
            .collect();
        let found = batch::get_all(&self.client, &self.table, keys, |request| {
            request.consistent_read(true)
        })
        .await?;
        let mut watched = BTreeMap::new();
        for row in found {
            let row: WatchRow = rows::from_item(row)?;
            let buckets = row.watched(now_s);
            if !buckets.is_empty() {
                let item = ItemId::parse(&row.item_id)
                    .map_err(|err| StoreError::Corrupt(format!("watch row: {err}")))?;
                watched.insert(item, buckets);
            }
        }
        Ok(watched)
    }

    /// Records that a subscription in `bucket` of `item`'s watchers may be open until
    /// `until_s`, unless the row already covers `end_s` (when its connection closes at the
    /// latest). Returns until when the bucket is now known to be watched. The row expires
    /// (TTL) a connection's lifetime after its last write, when none of its buckets can
    /// still be watched.
    pub async fn watch(
        &self,
        item: &ItemId,
        bucket: u32,
        until_s: i64,
        end_s: i64,
        now_s: i64,
    ) -> Result<i64, StoreError> {
        let watched = attr::watched(bucket);
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(ITEM_ID, AttributeValue::S(item.to_string()))
            .update_expression("SET #watched = :until, #expires = :expires")
            .condition_expression("attribute_not_exists(#watched) OR #watched < :end")
            .expression_attribute_names("#watched", &watched)
            .expression_attribute_names("#expires", EXPIRES_AT)
            .expression_attribute_values(":until", number(until_s))
            .expression_attribute_values(":end", number(end_s))
            .expression_attribute_values(":expires", number(now_s + CONNECTION_TTL_SECONDS))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match update {
            Ok(_) => Ok(until_s),
            Err(err) => match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(refused)) => {
                    // Refused only when the bucket's cover exists and reaches `end_s`.
                    let row: WatchRow =
                        rows::from_item(refused.item().cloned().unwrap_or_default())?;
                    row.numbers.get(&watched).copied().ok_or_else(|| {
                        StoreError::Corrupt(format!("a refused watch row has no {watched}"))
                    })
                }
                _ => Err(StoreError::aws("UpdateItem", err)),
            },
        }
    }

    /// Takes the claim of `bucket` of `item`'s watchers at `now_ms`: on condition that its
    /// last push finished at least [`PUSH_INTERVAL_MS`] ago (or its lease ran out), so a
    /// watcher's messages of one item are a second apart however long a fan-out takes, and,
    /// with `needed_as_of`, that no finished push already covered it. One conditional write,
    /// whichever way it goes; a refusal returns the row, which tells the two apart.
    pub async fn claim(
        &self,
        item: &ItemId,
        bucket: u32,
        now_ms: i64,
        needed_as_of: Option<i64>,
    ) -> Result<PushClaim, StoreError> {
        let mut condition = "(attribute_not_exists(#at) OR #at < :abandoned OR \
             (#finished = #at AND #finished_at <= :interval))"
            .to_owned();
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(ITEM_ID, AttributeValue::S(watch_key(item, bucket)))
            .update_expression("SET #at = :now, #expires = :expires")
            .expression_attribute_names("#at", CLAIMED_AT)
            .expression_attribute_names("#finished", FINISHED)
            .expression_attribute_names("#finished_at", FINISHED_AT)
            .expression_attribute_names("#expires", EXPIRES_AT)
            .expression_attribute_values(":now", number(now_ms))
            .expression_attribute_values(":interval", number(now_ms - PUSH_INTERVAL_MS))
            .expression_attribute_values(":abandoned", number(now_ms - PUSH_LEASE_MS))
            .expression_attribute_values(":expires", number(now_ms / 1000 + PUSH_TTL_SECONDS))
            .return_values(ReturnValue::AllOld)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        if let Some(needed) = needed_as_of {
            condition.push_str(" AND (attribute_not_exists(#pushed) OR #pushed < :needed)");
            update = update
                .expression_attribute_names("#pushed", PUSHED_AS_OF)
                .expression_attribute_values(":needed", number(needed));
        }
        match update.condition_expression(condition).send().await {
            Ok(output) => {
                let row = match output.attributes {
                    Some(row) => rows::from_item::<PushRow>(row)?,
                    None => PushRow::default(),
                };
                let pushed = match (row.pushed_like_count, row.pushed_dislike_count) {
                    (Some(like_count), Some(dislike_count)) => Some(Counts {
                        like_count,
                        dislike_count,
                    }),
                    _ => None,
                };
                Ok(PushClaim::Won { pushed })
            }
            Err(err) => match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(refused)) => {
                    let row = match refused.item() {
                        Some(row) => rows::from_item::<PushRow>(row.clone())?,
                        None => PushRow::default(),
                    };
                    let covered =
                        matches!((row.pushed_as_of, needed_as_of), (Some(p), Some(n)) if p >= n);
                    let claimed_at = row.claimed_at.unwrap_or(now_ms);
                    let retry_at = match (row.finished, row.finished_at) {
                        (Some(finished), Some(at)) if finished == claimed_at => at,
                        _ => claimed_at,
                    } + PUSH_INTERVAL_MS;
                    Ok(if covered {
                        PushClaim::Covered
                    } else {
                        PushClaim::Busy { retry_at }
                    })
                }
                _ => Err(StoreError::aws("UpdateItem", err)),
            },
        }
    }

    /// Marks the bucket's push claimed at `claimed_at` finished at `now_ms`. A counts push
    /// (`Some`) records what it sent and its `as_of` (never lowering the newest one
    /// recorded); a stale push (`None`) forgets both, so the next event's counts are pushed
    /// whatever they hold.
    pub async fn finish(
        &self,
        item: &ItemId,
        bucket: u32,
        claimed_at: i64,
        now_ms: i64,
        pushed: Option<(Counts, Option<i64>)>,
    ) -> Result<(), StoreError> {
        let finish = |raise: bool| {
            let mut update = self
                .client
                .update_item()
                .table_name(&self.table)
                .key(ITEM_ID, AttributeValue::S(watch_key(item, bucket)))
                .expression_attribute_names("#at", CLAIMED_AT)
                .expression_attribute_names("#finished", FINISHED)
                .expression_attribute_names("#finished_at", FINISHED_AT)
                .expression_attribute_values(":now", number(now_ms))
                .expression_attribute_names("#likes", PUSHED_LIKE_COUNT)
                .expression_attribute_names("#dislikes", PUSHED_DISLIKE_COUNT)
                .expression_attribute_values(":claimed", number(claimed_at))
                .condition_expression("#at = :claimed");
            match pushed {
                Some((counts, as_of)) => {
                    update = update
                        .expression_attribute_values(":l", number(counts.like_count))
                        .expression_attribute_values(":d", number(counts.dislike_count));
                    match as_of.filter(|_| raise) {
                        Some(as_of) => update
                            .update_expression(
                                "SET #finished = :claimed, #finished_at = :now, #likes = :l, #dislikes = :d, #pushed = :a",
                            )
                            .condition_expression(
                                "#at = :claimed AND (attribute_not_exists(#pushed) OR #pushed <= :a)",
                            )
                            .expression_attribute_names("#pushed", PUSHED_AS_OF)
                            .expression_attribute_values(":a", number(as_of)),
                        None => update
                            .update_expression("SET #finished = :claimed, #finished_at = :now, #likes = :l, #dislikes = :d"),
                    }
                }
                None => update
                    .update_expression(
                        "SET #finished = :claimed, #finished_at = :now REMOVE #likes, #dislikes, #pushed",
                    )
                    .expression_attribute_names("#pushed", PUSHED_AS_OF),
            }
            .send()
        };
        let has_as_of = pushed.is_some_and(|(_, as_of)| as_of.is_some());
        if has_as_of && condition_held("UpdateItem", finish(true).await)? {
            return Ok(());
        }
        // Refused: a newer as_of is recorded already, or the lease ran out and another push
        // took the claim (then there is nothing of ours to finish).
        condition_held("UpdateItem", finish(false).await).map(drop)
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
