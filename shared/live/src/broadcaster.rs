//! The broadcaster: the Kinesis event log's consumer that pushes live counts.
//!
//! A batch is coalesced per item (its newest event time). One read of the items' watch rows
//! drops the items nobody watches and names the buckets that hold watchers of the rest. For
//! each of those buckets the broadcaster takes its push claim for the current second
//! ([`PushClaims`]); for the buckets it won, it reads the item's exact counts once (not once
//! per watcher) and posts them to their watchers, page by page, with bounded concurrency. A
//! viral item's buckets are won by several invocations (one per event log shard sees it), so
//! its fan-out is split among them. The Counts table is written by another consumer, so a
//! count read right after an event may not hold it yet: a bucket is pushed again each second
//! until a push's `as_of` covers the item's newest event, so the last message equals the
//! exact count. If that takes longer than `catch_up`, or the events are older than
//! `max_event_age` when read, the watchers are sent `stale` instead: they poll the public
//! count route. Nothing here is on the write path: reactions never wait for it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aws_config::SdkConfig;
use aws_lambda_events::event::kinesis::KinesisEvent;
use aws_lambda_events::event::streams::{KinesisBatchItemFailure, KinesisEventResponse};
use lambda_runtime::LambdaEvent;
use likes_core::clock::now_ms;
use likes_core::live::{covers, ServerMessage, COVER_MARGIN_MS};
use likes_core::pipeline::LogRecord;
use likes_core::ItemId;
use likes_store::live::PUSH_INTERVAL_MS;
use likes_store::metrics::Report;
use likes_store::{
    CatalogCache, CatalogStore, CountsStore, LiveStore, PushClaim, PushClaims, StoreError,
};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::config::BroadcastConfig;
use crate::connections::{Connections, Posted};

/// What one invocation did, for its metrics.
#[derive(Debug, Default)]
struct Tally {
    items_watched: AtomicU64,
    pushes: AtomicU64,
    bucket_pushes: AtomicU64,
    stale_pushes: AtomicU64,
    count_reads: AtomicU64,
    sent: AtomicU64,
    gone: AtomicU64,
    throttled: AtomicU64,
    failed: AtomicU64,
    claims_refused: AtomicU64,
}

impl Tally {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    fn get(counter: &AtomicU64) -> f64 {
        counter.load(Ordering::Relaxed) as f64
    }
}

#[derive(Debug, Clone)]
pub struct Broadcaster {
    config: BroadcastConfig,
    store: LiveStore,
    claims: PushClaims,
    counts: CountsStore,
    /// What the counts pushed show, as the items' rules and owners say.
    catalog: CatalogCache,
    connections: Connections,
}

impl Broadcaster {
    pub fn new(
        config: BroadcastConfig,
        sdk: &SdkConfig,
        dynamodb: aws_sdk_dynamodb::Client,
    ) -> Self {
        Self {
            store: LiveStore::new(
                dynamodb.clone(),
                &config.tables.connections_table,
                &config.tables.subscriptions_table,
                config.tables.buckets,
            ),
            claims: PushClaims::new(dynamodb.clone(), &config.pushes_table),
            counts: CountsStore::new(dynamodb.clone(), &config.counts_table),
            catalog: CatalogCache::new(CatalogStore::new(dynamodb, &config.catalog_table)),
            connections: Connections::new(sdk, &config.connections_endpoint),
            config,
        }
    }

    /// Pushes the batch's items. A claim or a watcher read DynamoDB failed is a
    /// `batchItemFailures` entry at the batch's first record: Lambda retries it, and the
    /// claims keep the retry's pushes at most once a second. A failed post never fails it.
    pub async fn handle(
        &self,
        event: LambdaEvent<KinesisEvent>,
    ) -> Result<KinesisEventResponse, lambda_runtime::Error> {
        let records = event.payload.records;
        let mut newest: BTreeMap<ItemId, i64> = BTreeMap::new();
        let mut unreadable = 0;
        for record in &records {
            let parsed = LogRecord::parse(&record.kinesis.data)
                .map_err(|err| err.to_string())
                .and_then(|read| match read {
                    LogRecord::Event(event) => {
                        let item = ItemId::parse(&event.item_id).map_err(|err| err.to_string())?;
                        Ok(Some((item, event.event_time_ms)))
                    }
                    LogRecord::Heartbeat { .. } | LogRecord::Moderation(_) => Ok(None),
                });
            match parsed {
                Ok(None) => {}
                Ok(Some((item, at))) => {
                    let seen = newest.entry(item).or_insert(at);
                    *seen = (*seen).max(at);
                }
                Err(err) => {
                    // Pushes are best effort: the item's next event pushes its exact count.
                    unreadable += 1;
                    tracing::error!(sequence_number = %record.kinesis.sequence_number, error = %err, "unreadable event; no push for it");
                }
            }
        }
        let now = now_ms();
        let ages: Vec<f64> = newest.values().map(|at| (now - at) as f64).collect();
        let tally = Arc::new(Tally::default());
        let posts = Arc::new(Semaphore::new(self.config.push_concurrency));
        let changed: Vec<ItemId> = newest.keys().cloned().collect();
        let (watched, mut failed) = match self.claims.watched(&changed, now / 1000).await {
            Ok(watched) => (watched, false),
            Err(err) => {
                tracing::error!(error = %err, "watch rows unread; Lambda retries the batch");
                (BTreeMap::new(), true)
            }
        };
        Tally::add(&tally.items_watched, watched.len() as u64);
        let mut items = JoinSet::new();
        for (item, buckets) in watched {
            let newest_event_ms = newest[&item];
            let (broadcaster, tally, posts) = (self.clone(), tally.clone(), posts.clone());
            items.spawn(async move {
                let result = broadcaster
                    .push_item(&item, buckets, newest_event_ms, &tally, &posts)
                    .await;
                (item, result)
            });
        }
        while let Some(joined) = items.join_next().await {
            let (item, result) = joined.map_err(|err| format!("push task: {err}"))?;
            if let Err(err) = result {
                tracing::error!(item_id = %item, error = %err, "push failed; Lambda retries the batch");
                failed = true;
            }
        }
        let mut response = KinesisEventResponse::default();
        if let (true, Some(first)) = (failed, records.first()) {
            let mut failure = KinesisBatchItemFailure::default();
            failure.item_identifier = Some(first.kinesis.sequence_number.clone());
            response.batch_item_failures.push(failure);
        }
        Report::new("Likes/Live")
            .value("EventsReceived", "Count", records.len() as f64)
            .value("UnreadableEvents", "Count", unreadable as f64)
            .value("ItemsChanged", "Count", newest.len() as f64)
            .value("ItemsWatched", "Count", Tally::get(&tally.items_watched))
            .value("Pushes", "Count", Tally::get(&tally.pushes))
            .value("BucketPushes", "Count", Tally::get(&tally.bucket_pushes))
            .value("StalePushes", "Count", Tally::get(&tally.stale_pushes))
            .value("CountReads", "Count", Tally::get(&tally.count_reads))
            .value("MessagesSent", "Count", Tally::get(&tally.sent))
            .value("ConnectionsGone", "Count", Tally::get(&tally.gone))
            .value("PostsThrottled", "Count", Tally::get(&tally.throttled))
            .value("PostsFailed", "Count", Tally::get(&tally.failed))
            .value("ClaimsRefused", "Count", Tally::get(&tally.claims_refused))
            .value("BatchFailures", "Count", failed as u64 as f64)
            .values("EventAgeMs", "Milliseconds", &ages)
            .emit();
        Ok(response)
    }

    /// Pushes one item's watched `buckets` until a push of each covers `newest_event_ms`, or
    /// their watchers are told it is stale. Each round takes the claims of the buckets due
    /// (a bucket is tried again when its refused claim said, or a second after this
    /// invocation's own push to it), reads the counts once for those it won, and fans out to
    /// them.
    async fn push_item(
        &self,
        item: &ItemId,
        buckets: Vec<u32>,
        newest_event_ms: i64,
        tally: &Tally,
        posts: &Arc<Semaphore>,
    ) -> Result<(), StoreError> {
        let started = now_ms();
        let catch_up = self.config.catch_up.as_millis() as i64;
        let mut stale = started - newest_event_ms > self.config.max_event_age.as_millis() as i64;
        let needed = newest_event_ms + COVER_MARGIN_MS;
        // Each bucket still to push, and when to try its claim.
        let mut pending: Vec<(u32, i64)> = buckets.into_iter().map(|b| (b, started)).collect();
        loop {
            let now = now_ms();
            if !stale && now - started > catch_up {
                stale = true;
            }
            let (due, mut later): (Vec<_>, Vec<_>) =
                pending.into_iter().partition(|(_, at)| *at <= now);
            // A stale push has nothing to cover; another invocation's fresh push may still win.
            let needed = (!stale).then_some(needed);
            let claims = futures_util::future::try_join_all(
                due.iter()
                    .map(|&(bucket, _)| self.claims.claim(item, bucket, now, needed)),
            )
            .await?;
            let mut won = Vec::new();
            for (&(bucket, _), claim) in due.iter().zip(claims) {
                match claim {
                    PushClaim::Covered => {}
                    PushClaim::Busy { retry_at } => {
                        Tally::add(&tally.claims_refused, 1);
                        later.push((bucket, retry_at));
                    }
                    PushClaim::Won { pushed } => won.push((bucket, pushed)),
                }
            }
            if stale && !won.is_empty() {
                let message = ServerMessage::Stale {
                    item_id: item.as_str().to_owned(),
                };
                let to: Vec<u32> = won.iter().map(|(bucket, _)| *bucket).collect();
                self.fan_out(item, &to, message, tally, posts).await?;
                Tally::add(&tally.stale_pushes, 1);
                let finished = now_ms();
                futures_util::future::try_join_all(
                    to.iter()
                        .map(|&bucket| self.claims.finish(item, bucket, now, finished, None)),
                )
                .await?;
            } else if !won.is_empty() {
                // `as_of` first: rows read after it hold every flip it promises.
                let as_of = self.counts.as_of().await;
                let counts = self.counts.read(item).await?;
                Tally::add(&tally.count_reads, 1);
                // Watchers are sent counts while they change: the same counts again (a newer
                // as_of only) would tell them nothing.
                let to: Vec<u32> = won
                    .iter()
                    .filter(|(_, pushed)| *pushed != Some(counts))
                    .map(|(bucket, _)| *bucket)
                    .collect();
                if !to.is_empty() {
                    let shown = self
                        .catalog
                        .item_rules(std::slice::from_ref(item), now_ms())
                        .await?
                        .remove(item)
                        .unwrap_or_default()
                        .shown(counts);
                    let message = ServerMessage::counts(item, shown, as_of);
                    self.fan_out(item, &to, message, tally, posts).await?;
                    Tally::add(&tally.pushes, 1);
                    Tally::add(&tally.bucket_pushes, to.len() as u64);
                }
                let finished = now_ms();
                futures_util::future::try_join_all(won.iter().map(|(bucket, _)| {
                    self.claims
                        .finish(item, *bucket, now, finished, Some((counts, as_of)))
                }))
                .await?;
                if !covers(as_of, newest_event_ms) {
                    let again = finished + PUSH_INTERVAL_MS;
                    later.extend(won.iter().map(|(bucket, _)| (*bucket, again)));
                }
            }
            pending = later;
            // Past the catch-up bound and another invocation's stale push, give up: every
            // watcher has been told to poll.
            let Some(next_try) = pending.iter().map(|(_, at)| *at).min() else {
                return Ok(());
            };
            if now - started > 2 * catch_up {
                return Ok(());
            }
            let wait = (next_try - now_ms()).clamp(1, 2 * PUSH_INTERVAL_MS);
            tokio::time::sleep(Duration::from_millis(wait as u64)).await;
        }
    }

    /// Posts `message` to every watcher of `item` in `buckets`: the buckets at once, each
    /// page by page.
    async fn fan_out(
        &self,
        item: &ItemId,
        buckets: &[u32],
        message: ServerMessage,
        tally: &Tally,
        posts: &Arc<Semaphore>,
    ) -> Result<(), StoreError> {
        let message: Arc<str> = message.to_json().into();
        let mut fan_outs = JoinSet::new();
        for &bucket in buckets {
            let (broadcaster, item, message, posts) =
                (self.clone(), item.clone(), message.clone(), posts.clone());
            fan_outs.spawn(async move {
                let mut outcomes = Vec::new();
                let mut start = None;
                loop {
                    let page = broadcaster.store.watchers(&item, bucket, start).await?;
                    let mut sends = JoinSet::new();
                    for connection in page.connections {
                        let permit = posts
                            .clone()
                            .acquire_owned()
                            .await
                            .expect("the semaphore is never closed");
                        let (broadcaster, message) = (broadcaster.clone(), message.clone());
                        sends.spawn(async move {
                            let posted = broadcaster.connections.post(&connection, &message).await;
                            drop(permit);
                            (connection, posted)
                        });
                    }
                    while let Some(sent) = sends.join_next().await {
                        outcomes.push(sent.map_err(StoreError::Task)?);
                    }
                    match page.next {
                        Some(next) => start = Some(next),
                        None => return Ok::<_, StoreError>(outcomes),
                    }
                }
            });
        }
        while let Some(joined) = fan_outs.join_next().await {
            let outcomes = joined.map_err(StoreError::Task)??;
            for (connection, posted) in outcomes {
                match posted {
                    Ok(Posted::Sent) => Tally::add(&tally.sent, 1),
                    Ok(Posted::Throttled) => Tally::add(&tally.throttled, 1),
                    Ok(Posted::Gone) => {
                        Tally::add(&tally.gone, 1);
                        // Its $disconnect was lost (or is late): its rows go now. A failure
                        // here leaves them to TTL and the next push's 410.
                        if let Err(err) = self.store.disconnect(&connection).await {
                            tracing::warn!(%connection, error = %err, "gone connection not removed");
                        }
                    }
                    Err(err) => {
                        Tally::add(&tally.failed, 1);
                        tracing::warn!(%connection, error = %err, "post failed");
                    }
                }
            }
        }
        Ok(())
    }
}
