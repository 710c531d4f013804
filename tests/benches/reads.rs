//! `make bench-reads`: what a count read costs DynamoDB, as figures (not a timed test), for
//! the design (the public count handlers with the container's count cache) and the naive read
//! (no cache: every read Queries the item's partitions, as the handlers did before the cache)
//! side by side.
//!
//! One container (one `App`, one request at a time, as Lambda runs it) reads one viral item
//! at 1, 100 and 10,000 reads/s in real time, then a 40-item browse page. Requests are counted
//! on the wire by an interceptor on the DynamoDB client; read units come from AWS's size rules
//! over the rows each request reads. The page is also read as a materialized per-item total
//! would be read (one BatchGetItem of 40 one-row keys), to show what that design would save.
//!
//! The viral item is laid out as the aggregator leaves a hot item: K = 64 count rows in its
//! own partition and in each of H = 8 overflow partitions, with a marker; the page's items are
//! cold (two count rows each). `LIKES_BENCH_READ_SECONDS` (default 3) sets how long each rate
//! runs.
//!
//! Last, a page of an item's likers: 2,000 likers spread over the item's buckets as the likers
//! consumer leaves them, read through the real handler, beside what one Query of an index
//! keyed by the item alone would read (the layout that melts on a viral item's writes).

// Beside this file, not in benches/ itself, where cargo would take each for a bench of its own.
#[allow(dead_code)]
#[path = "dynamodb/capacity.rs"]
mod capacity;
#[allow(dead_code)]
#[path = "write/sent.rs"]
mod sent;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use aws_sdk_dynamodb::Client;
use lambda_http::request::LambdaRequest;
use lambda_http::{Body, Request};
use likes_api::{App, Config, Endpoint};
use likes_core::clock::now_ms;
use likes_core::likers::{bucket_of, buckets, LikerChange, LikerUpdate};
use likes_core::reconcile::subtotal_attributes;
use likes_core::{CursorKey, ItemId};
use likes_local::http_api::GatewayRequest;
use likes_store::freshness::AS_OF_REPLICAS;
use likes_store::likers::POSITION_INDEX;
use likes_store::{CountsStore, LikersStore};
use likes_tests::TestStack;
use serde_json::json;

use capacity::Item;
use sent::{Sent, SentRequests};

const VIRAL: &str = "game:viral";
const ROWS_PER_PARTITION: u32 = 64;
const OVERFLOW_PARTITIONS: u32 = 8;
const PAGE: usize = 40;
const RATES: [u32; 3] = [1, 100, 10_000];
/// Naive reads per rate: each one costs the same, whatever the rate.
const NAIVE_SAMPLE: u64 = 50;
const LIKERS: usize = 2_000;

#[tokio::main]
async fn main() {
    capacity::check_rules();
    let seconds = likes_tests::env_count("LIKES_BENCH_READ_SECONDS", 3) as u64;
    let stack = TestStack::start().await;
    let raw = stack.dynamodb();
    let table = stack.name("CountsTable");
    let page: Vec<ItemId> = (0..PAGE)
        .map(|n| ItemId::parse(&format!("game:page{n}")).expect("a valid id"))
        .collect();
    seed(&raw, &table, &page).await;
    let viral_half_units = partition_half_units(&raw, &table, VIRAL).await
        + partition_half_units(&raw, &table, &format!("{VIRAL}#1")).await
            * u64::from(OVERFLOW_PARTITIONS);
    let viral_queries = 1 + OVERFLOW_PARTITIONS;
    let viral_per_query = viral_half_units as f64 / f64::from(viral_queries);
    let mut page_half_units = 0;
    for item in &page {
        page_half_units += partition_half_units(&raw, &table, item.as_str()).await;
    }
    let page_per_query = page_half_units as f64 / PAGE as f64;
    let as_of_half_units = partition_half_units(&raw, &table, "#asof#0").await as f64;
    let unit = |half: f64| half / 2.0;

    println!("Likes count reads: figures, not a timed test");
    println!(
        "  one container, one request at a time; {}; requests counted on the wire",
        if cfg!(debug_assertions) {
            "debug build"
        } else {
            "release build"
        }
    );
    println!(
        "  viral item: {viral_queries} partitions x {ROWS_PER_PARTITION} rows = {viral_queries} Queries, {} RCU per uncached read; as_of replica {} RCU",
        unit(viral_half_units as f64),
        unit(as_of_half_units)
    );
    println!();
    println!("One viral item, DynamoDB requests and RCU per count read ({seconds} s per rate):");
    println!(
        "  {:>10} | {:>11} | {:>26} | {:>14} | {:>27}",
        "offered /s",
        "achieved /s",
        "design (cache): req / RCU",
        "design: req /s",
        "naive (no cache): req / RCU"
    );
    for rate in RATES {
        let design = Container::new(&stack);
        let naive = Container::new(&stack);
        let item = ItemId::parse(VIRAL).expect("a valid id");
        let (reads, achieved) =
            paced(rate, seconds, u64::MAX, || design.get_like_count(VIRAL)).await;
        let design_cost = design.cost(reads, viral_per_query, as_of_half_units);
        // Without a cache every read costs the same at any rate; the emulator could not
        // serve 10,000 of them a second, so a bounded sample is read at the rate it can.
        let (naive_reads, _) = paced(rate, seconds, NAIVE_SAMPLE, || naive.naive_read(&item)).await;
        let naive_cost = naive.cost(naive_reads, viral_per_query, as_of_half_units);
        let per_second = (design_cost.queries + design_cost.gets + design_cost.others) as f64
            / (reads as f64 / achieved);
        println!(
            "  {rate:>10} | {achieved:>11.0} | {:>26} | {per_second:>14.1} | {:>27}",
            design_cost.line(),
            naive_cost.line()
        );
    }

    println!();
    println!(
        "A {PAGE}-item page (cold items, 2 count rows each), DynamoDB requests and RCU per page:"
    );
    let design = Container::new(&stack);
    let started = Instant::now();
    design.batch_get_like_counts(&page).await;
    let cold_wall = started.elapsed();
    let cold = design.cost(1, page_per_query, as_of_half_units);
    let (pages, _) = paced(100, seconds, u64::MAX, || {
        design.batch_get_like_counts(&page)
    })
    .await;
    let warm = design.cost(pages, page_per_query, as_of_half_units);
    let naive = Container::new(&stack);
    let started = Instant::now();
    naive.naive_page(&page).await;
    let naive_wall = started.elapsed();
    let naive_cost = naive.cost(1, page_per_query, as_of_half_units);
    let started = Instant::now();
    let totals = naive.batch_get_rows(&table, &page).await;
    let total_wall = started.elapsed();
    let total_sent = naive.sent.take();
    println!(
        "  design, cache cold:                 {} ({} ms on the emulator)",
        cold.line(),
        cold_wall.as_millis()
    );
    println!("  design, the same page at 100 /s:    {}", warm.line());
    println!(
        "  naive, a Query per item:            {} ({} ms on the emulator)",
        naive_cost.line(),
        naive_wall.as_millis()
    );
    println!(
        "  materialized total, BatchGetItem:   {} req / {} RCU ({} ms on the emulator; {totals} rows)",
        total_sent.len(),
        // BatchGetItem rounds every item up to 4 KB on its own.
        unit(PAGE as f64),
        total_wall.as_millis()
    );
    likers_pages(&stack).await;
}

/// Pages of a viral item's likers and of a small item's through the real handler: requests
/// counted on the wire, read units from the entries each bucket's Query reads.
async fn likers_pages(stack: &TestStack) {
    let raw = stack.dynamodb();
    let table = stack.name("LikersTable");
    let store = LikersStore::new(raw.clone(), &table);
    let viral = ItemId::parse(VIRAL).expect("a valid id");
    let small = ItemId::parse("game:small").expect("a valid id");
    let now = now_ms();
    let mut writes = tokio::task::JoinSet::new();
    for (item, likers) in [(&viral, LIKERS), (&small, 3)] {
        for n in 0..likers {
            let store = store.clone();
            let user_id = format!("fan{n:05}");
            let update = LikerUpdate {
                item_id: item.clone(),
                bucket: bucket_of(&user_id),
                user_id,
                row_created_ms: now,
                op_id: 1,
                change: LikerChange::Liked {
                    liked_at_ms: now - n as i64,
                },
            };
            writes.spawn(async move { store.apply(&update).await.expect("a likers entry") });
            if writes.len() >= 16 {
                writes.join_next().await;
            }
        }
    }
    while writes.join_next().await.is_some() {}

    let environment = stack
        .stack
        .function_environment("ListLikersFunction")
        .expect("the list-likers function's environment");
    let sent = SentRequests::default();
    let client = Client::from_conf(
        aws_sdk_dynamodb::config::Builder::from(&stack.stack.aws.sdk)
            .interceptor(sent.clone())
            .build(),
    );
    let app = App::with_dynamodb(
        Config {
            likers_table: Some(table.clone()),
            cursor_key: Some(
                CursorKey::new(&environment["CURSOR_SIGNING_KEY"]).expect("the cursor key"),
            ),
            ..Config::default()
        },
        client,
    );
    println!();
    println!(
        "A page of an item's likers ({} buckets), DynamoDB requests and RCU per page:",
        buckets(&viral).len()
    );
    for (item, likers, limit) in [(&viral, LIKERS, 20), (&viral, LIKERS, 100), (&small, 3, 20)] {
        let route = "/v1/items/{item_id}/likers";
        let path = route.replace("{item_id}", item.as_str());
        let query = format!("limit={limit}");
        let event = GatewayRequest {
            method: "GET",
            route_path: route,
            path: &path,
            raw_query: &query,
            headers: Vec::new(),
            body: b"",
            path_parameters: serde_json::Map::from_iter([(
                "item_id".to_owned(),
                json!(item.as_str()),
            )]),
            claims: Some(HashMap::from([("sub".to_owned(), "reader".to_owned())])),
            source_ip: "127.0.0.1".to_owned(),
            request_id: format!("bench-likers-{limit}"),
            now_ms: now_ms(),
        }
        .event();
        let event: LambdaRequest = serde_json::from_value(event).expect("a v2 event");
        let started = Instant::now();
        let response = app.handle(Endpoint::ListLikers, event.into()).await;
        let wall = started.elapsed();
        assert_eq!(response.status(), 200);
        let requests = sent.take().len();
        // What each occupied bucket's Query read (its newest limit + 1 entries), and the
        // occupancy row's GetItem.
        let mut half_units = 1;
        let mut newest: Vec<(String, usize)> = Vec::new();
        for bucket in buckets(item) {
            let output = raw
                .query()
                .table_name(&table)
                .index_name(POSITION_INDEX)
                .key_condition_expression("#bucket = :bucket")
                .expression_attribute_names("#bucket", "bucket")
                .expression_attribute_values(":bucket", AttributeValue::S(bucket))
                .scan_index_forward(false)
                .limit(limit as i32 + 1)
                .send()
                .await
                .expect("Query of a bucket");
            if output.items().is_empty() {
                continue;
            }
            let sizes: Vec<(String, usize)> = output
                .items()
                .iter()
                .map(|row| {
                    let position = row["position"].as_s().expect("a position").clone();
                    (position, capacity::item_size(row))
                })
                .collect();
            half_units += capacity::eventually_consistent_half_units(
                sizes.iter().map(|(_, bytes)| bytes).sum(),
            );
            newest.extend(sizes);
        }
        // One index keyed by the item: one Query reads the newest limit + 1 of them all.
        newest.sort_by(|a, b| b.0.cmp(&a.0));
        let naive_bytes: usize = newest.iter().take(limit + 1).map(|(_, b)| b).sum();
        println!(
            "  {likers:>5} likers, limit {limit:>3}: buckets {requests} req / {} RCU ({} ms on the emulator); one index by item: 1 req / {} RCU",
            half_units as f64 / 2.0,
            wall.as_millis(),
            capacity::eventually_consistent_half_units(naive_bytes) as f64 / 2.0
        );
    }
}

/// Calls `read` `rate` times a second for `seconds`, or `max` times at most, one at a time (a
/// late call goes at once); returns the calls made and the rate achieved.
async fn paced<F, Fut>(rate: u32, seconds: u64, max: u64, mut read: F) -> (u64, f64)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let interval = Duration::from_secs(1) / rate;
    let total = (u64::from(rate) * seconds).min(max);
    let started = tokio::time::Instant::now();
    for n in 0..total {
        tokio::time::sleep_until(started + interval * n as u32).await;
        read().await;
    }
    (total, total as f64 / started.elapsed().as_secs_f64())
}

/// One warm Lambda container: an `App` over a client whose requests are counted.
struct Container {
    app: App,
    store: CountsStore,
    client: Client,
    sent: SentRequests,
}

/// What the reads cost since the last one.
struct Cost {
    queries: u64,
    gets: u64,
    others: u64,
    reads: u64,
    half_units: f64,
}

impl Cost {
    fn line(&self) -> String {
        let per = |n: u64| n as f64 / self.reads as f64;
        let mut line = format!(
            "{:.4} / {:.4}",
            per(self.queries + self.gets + self.others),
            self.half_units / 2.0 / self.reads as f64
        );
        if self.others > 0 {
            line.push_str(&format!(" ({} other)", self.others));
        }
        line
    }
}

impl Container {
    fn new(stack: &TestStack) -> Self {
        let sent = SentRequests::default();
        let config = aws_sdk_dynamodb::config::Builder::from(&stack.stack.aws.sdk)
            .interceptor(sent.clone())
            .build();
        let client = Client::from_conf(config);
        let table = stack.name("CountsTable");
        let config = Config {
            counts_table: Some(table.clone()),
            ..Config::default()
        };
        Self {
            app: App::with_dynamodb(config, client.clone()),
            store: CountsStore::new(client.clone(), table),
            client,
            sent,
        }
    }

    /// The requests sent since the last call, priced: each Query at `query_half_units` (the
    /// mean over the partitions of the items read), each GetItem one `as_of` replica.
    fn cost(&self, reads: u64, query_half_units: f64, as_of_half_units: f64) -> Cost {
        let sent = self.sent.take();
        let count = |name: &str| {
            sent.iter()
                .filter(|s| matches!(s, Sent::Other(op) if op == name))
                .count() as u64
        };
        let (queries, gets) = (count("Query"), count("GetItem"));
        Cost {
            queries,
            gets,
            others: sent.len() as u64 - queries - gets,
            reads,
            half_units: queries as f64 * query_half_units + gets as f64 * as_of_half_units,
        }
    }

    async fn get_like_count(&self, item: &str) {
        let route = "/v1/items/{item_id}/like-count";
        let path = route.replace("{item_id}", item);
        let params = serde_json::Map::from_iter([("item_id".to_owned(), json!(item))]);
        let status = self
            .call(Endpoint::GetLikeCount, "GET", route, &path, params, b"")
            .await;
        assert_eq!(status, 200);
    }

    async fn batch_get_like_counts(&self, items: &[ItemId]) {
        let route = "/v1/items/like-counts:batchGet";
        let body = json!({ "item_ids": items }).to_string();
        let status = self
            .call(
                Endpoint::BatchGetLikeCounts,
                "POST",
                route,
                route,
                serde_json::Map::new(),
                body.as_bytes(),
            )
            .await;
        assert_eq!(status, 200);
    }

    /// The handler as Lambda calls it, with the v2 event a public route gets (no authorizer).
    async fn call(
        &self,
        endpoint: Endpoint,
        method: &str,
        route: &str,
        path: &str,
        path_parameters: serde_json::Map<String, serde_json::Value>,
        body: &[u8],
    ) -> u16 {
        let now_ms = now_ms();
        let event = GatewayRequest {
            method,
            route_path: route,
            path,
            raw_query: "",
            headers: vec![("content-type".into(), "application/json".into())],
            body,
            path_parameters,
            claims: None,
            source_ip: "127.0.0.1".to_owned(),
            request_id: format!("bench-{now_ms}"),
            now_ms,
        }
        .event();
        let event: LambdaRequest = serde_json::from_value(event).expect("a v2 event");
        let request: Request = event.into();
        let response = self.app.handle(endpoint, request).await;
        assert!(matches!(response.body(), Body::Text(_)));
        response.status().as_u16()
    }

    /// What the handlers did before the cache: Query the item's partitions, and `as_of`.
    async fn naive_read(&self, item: &ItemId) {
        let (counts, _) = tokio::join!(self.store.read(item), self.store.as_of());
        counts.expect("count read");
    }

    async fn naive_page(&self, items: &[ItemId]) {
        let (counts, _) = tokio::join!(self.store.read_many(items), self.store.as_of());
        assert_eq!(counts.expect("count reads").len(), items.len());
    }

    /// One BatchGetItem of one row per item: what reading a materialized total would cost.
    async fn batch_get_rows(&self, table: &str, items: &[ItemId]) -> usize {
        let keys: Vec<Item> = items
            .iter()
            .map(|item| {
                HashMap::from([
                    ("item_id".to_owned(), AttributeValue::S(item.to_string())),
                    ("shard".to_owned(), AttributeValue::S("D#0".into())),
                ])
            })
            .collect();
        let output = self
            .client
            .batch_get_item()
            .request_items(
                table,
                KeysAndAttributes::builder()
                    .set_keys(Some(keys))
                    .build()
                    .expect("keys"),
            )
            .send()
            .await
            .expect("BatchGetItem");
        output
            .responses
            .and_then(|mut r| r.remove(table))
            .map_or(0, |rows| rows.len())
    }
}

/// Rows shaped as the aggregator writes them: totals, one epoch's subtotals, `updated_at`.
async fn seed(client: &Client, table: &str, page: &[ItemId]) {
    let now = now_ms();
    let (epoch_like, epoch_dislike) = subtotal_attributes(now / 300_000);
    let row = |partition: &str, shard: String, like: i64| -> Item {
        HashMap::from([
            (
                "item_id".to_owned(),
                AttributeValue::S(partition.to_owned()),
            ),
            ("shard".to_owned(), AttributeValue::S(shard)),
            ("like_count".to_owned(), AttributeValue::N(like.to_string())),
            ("dislike_count".to_owned(), AttributeValue::N("3".into())),
            (epoch_like.clone(), AttributeValue::N(like.to_string())),
            (epoch_dislike.clone(), AttributeValue::N("3".into())),
            ("updated_at".to_owned(), AttributeValue::N(now.to_string())),
        ])
    };
    let mut rows = Vec::new();
    for h in 0..=OVERFLOW_PARTITIONS {
        let partition = match h {
            0 => VIRAL.to_owned(),
            h => format!("{VIRAL}#{h}"),
        };
        for k in 0..ROWS_PER_PARTITION {
            rows.push(row(&partition, format!("D#{k}"), 123_456));
        }
    }
    rows.push(HashMap::from([
        ("item_id".to_owned(), AttributeValue::S(VIRAL.to_owned())),
        ("shard".to_owned(), AttributeValue::S("H".into())),
        (
            "partitions".to_owned(),
            AttributeValue::N(OVERFLOW_PARTITIONS.to_string()),
        ),
    ]));
    for item in page {
        for k in [0, 7] {
            rows.push(row(item.as_str(), format!("D#{k}"), 42));
        }
    }
    for replica in 0..AS_OF_REPLICAS {
        rows.push(HashMap::from([
            (
                "item_id".to_owned(),
                AttributeValue::S(format!("#asof#{replica}")),
            ),
            ("shard".to_owned(), AttributeValue::S("A".into())),
            (
                "as_of".to_owned(),
                AttributeValue::N((now - 2000).to_string()),
            ),
            ("computed_at".to_owned(), AttributeValue::N(now.to_string())),
        ]));
    }
    for row in rows {
        client
            .put_item()
            .table_name(table)
            .set_item(Some(row))
            .send()
            .await
            .expect("PutItem");
    }
}

/// The half read units of one eventually consistent Query of `partition`.
async fn partition_half_units(client: &Client, table: &str, partition: &str) -> u64 {
    let output = client
        .query()
        .table_name(table)
        .key_condition_expression("item_id = :p")
        .expression_attribute_values(":p", AttributeValue::S(partition.to_owned()))
        .send()
        .await
        .expect("Query");
    let bytes: usize = output
        .items
        .unwrap_or_default()
        .iter()
        .map(capacity::item_size)
        .sum();
    capacity::eventually_consistent_half_units(bytes)
}
