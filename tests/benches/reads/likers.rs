//! The last figures: a page of an item's likers through the real handler, a viral item's
//! spread over its buckets beside what one index keyed by the item alone would read; what
//! checking the reader's privacy adds; and the page when half the newest likers are hidden
//! from the reader, beside the unfiltered read. Each request is priced as it is sent; what
//! it says is written into docs/performance.md.

use std::collections::HashMap;
use std::time::Instant;

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::request::LambdaRequest;
use lambda_http::Body;
use likes_api::{App, Config, Endpoint};
use likes_core::clock::now_ms;
use likes_core::likers::{bucket_of, buckets, LikerChange, LikerUpdate, LIKES_END};
use likes_core::{ItemId, LikesVisibility, UserId};
use likes_local::http_api::GatewayRequest;
use likes_store::{LikersStore, PrivacyStore};
use likes_tests::{say, TestStack};
use serde_json::json;

use crate::capacity;
use crate::priced::PricedReads;
use crate::{LIKERS, VIRAL};

/// The newest likers of the viral item the reader's privacy is written for: half of them
/// are hidden from the reader.
const HIDING: usize = 800;

/// Pages of a viral item's likers and of a small item's through the real handler, then with
/// privacy that hides half of the viral item's newest likers from the reader: each request
/// priced as it is sent, by table.
pub async fn likers_pages(stack: &TestStack) {
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
    // The buckets the items' count rows list once the likes are counted.
    for (item, likers) in [(&viral, LIKERS), (&small, 3)] {
        let users: Vec<String> = (0..likers).map(|n| format!("fan{n:05}")).collect();
        let users: Vec<&str> = users.iter().map(String::as_str).collect();
        stack.list_likers_buckets(item.as_str(), &users).await;
    }

    let environment = stack
        .stack
        .function_environment("ListLikersFunction")
        .expect("the list-likers function's environment");
    let (client, priced) = PricedReads::client(&stack.stack.aws.sdk);
    let config = Config::from_lookup(Endpoint::ListLikers, |name| environment.get(name).cloned())
        .expect("the list-likers function's configuration");
    let app = App::with_clients(
        config,
        client,
        aws_sdk_secretsmanager::Client::new(&stack.stack.aws.sdk),
    );
    println!();
    say!(
        "A page of an item's likers ({} buckets), DynamoDB requests and RCU per page; the buckets' reads include the item's removal mark (1 req / 1 RCU when the container has not read it within a second) and its count rows, read for the buckets they list (the viral item's are laid out as the count reads above lay them out, over its overflow partitions); the reader's privacy checked (no user set any):",
        buckets(&viral).len()
    );
    let mut unfiltered = HashMap::new();
    for (item, likers, limit) in [(&viral, LIKERS, 20), (&viral, LIKERS, 100), (&small, 3, 20)] {
        let page = read_page(&app, &priced, item, limit).await;
        // One index keyed by the item: one Query reads the newest limit + 1 of them all.
        let mut newest: Vec<(String, usize)> = Vec::new();
        for bucket in buckets(item) {
            let output = raw
                .query()
                .table_name(&table)
                .key_condition_expression("#bucket = :bucket AND #entry < :likes_end")
                .expression_attribute_names("#bucket", "bucket")
                .expression_attribute_names("#entry", "entry")
                .expression_attribute_values(":bucket", AttributeValue::S(bucket))
                .expression_attribute_values(":likes_end", AttributeValue::S(LIKES_END.into()))
                .scan_index_forward(false)
                .limit(limit as i32 + 1)
                .send()
                .await
                .expect("Query of a bucket");
            newest.extend(output.items().iter().map(|row| {
                let position = row["entry"].as_s().expect("a position").clone();
                (position, capacity::item_size(row))
            }));
        }
        newest.sort_by(|a, b| b.0.cmp(&a.0));
        let naive_bytes: usize = newest.iter().take(limit + 1).map(|(_, b)| b).sum();
        say!(
            "  {likers:>5} likers, limit {limit:>3}: buckets {} ({} ms on the emulator); one index by item: 1 req / {} RCU; the privacy check: {}",
            page.likers.line(),
            page.wall.as_millis(),
            capacity::eventually_consistent_half_units(naive_bytes) as f64 / 2.0,
            page.privacy.line()
        );
        if item == &viral {
            unfiltered.insert(limit, page.likers);
        }
    }

    let hidden = hide_from_reader(stack, &environment["PRIVACY_TABLE"]).await;
    say!();
    say!(
        "The viral item's first page with {} of its newest {HIDING} likers hidden from the reader ({} private, {} the reader blocks, {} who block the reader; {} more block somebody else), requests and RCU per page:",
        hidden.private + hidden.blocked + hidden.blocking,
        hidden.private,
        hidden.blocked,
        hidden.blocking,
        hidden.asked
    );
    for limit in [20, 100] {
        let page = read_page(&app, &priced, &viral, limit).await;
        assert_eq!(page.listed, limit, "a full page");
        say!(
            "  limit {limit:>3}: buckets {} + privacy {} = {} ({} ms on the emulator); unfiltered: {}",
            page.likers.line(),
            page.privacy.line(),
            page.likers.plus(&page.privacy).line(),
            page.wall.as_millis(),
            unfiltered[&limit].line()
        );
    }
    likes_tests::docs::write_said("likers-pages", "make bench-reads");
}

/// How the likers hidden from the reader are hidden, and how many more are asked about.
#[derive(Debug, Default)]
struct Hidden {
    private: usize,
    blocked: usize,
    blocking: usize,
    /// Shown, but they block somebody, so their row for the reader is read.
    asked: usize,
}

/// Privacy that hides half of the viral item's newest [`HIDING`] likers (`fan00000` is the
/// newest) from the reader: every 4th is private; in the newer half, the reader blocks every
/// 4th, every 4th blocks the reader, and every 8th blocks somebody else.
async fn hide_from_reader(stack: &TestStack, table: &str) -> Hidden {
    let privacy = PrivacyStore::new(stack.dynamodb(), table);
    let reader = UserId::parse("reader").expect("a user id");
    let somebody = UserId::parse("somebody").expect("a user id");
    let now = now_ms();
    let mut hidden = Hidden::default();
    for n in 0..HIDING {
        let fan = UserId::parse(&format!("fan{n:05}")).expect("a user id");
        let newer = n < HIDING / 2;
        match n % 8 {
            0 | 4 => {
                privacy
                    .set_visibility(&fan, LikesVisibility::Private)
                    .await
                    .expect("a private fan");
                hidden.private += 1;
            }
            1 | 5 if newer => {
                privacy.block(&reader, &fan, now).await.expect("a block");
                hidden.blocked += 1;
            }
            2 | 6 if newer => {
                privacy.block(&fan, &reader, now).await.expect("a block");
                hidden.blocking += 1;
            }
            3 if newer => {
                privacy.block(&fan, &somebody, now).await.expect("a block");
                hidden.asked += 1;
            }
            _ => {}
        }
    }
    hidden
}

/// Requests and read units of one table's reads.
#[derive(Debug, Clone, Copy, Default)]
struct Reads {
    requests: usize,
    half_units: u64,
}

impl Reads {
    fn line(&self) -> String {
        format!(
            "{} req / {} RCU",
            self.requests,
            self.half_units as f64 / 2.0
        )
    }

    fn plus(&self, other: &Reads) -> Reads {
        Reads {
            requests: self.requests + other.requests,
            half_units: self.half_units + other.half_units,
        }
    }
}

/// One page read through the handler: the Likers table's reads, the Privacy table's, how
/// many likers it listed and how long it took.
struct PageRead {
    likers: Reads,
    privacy: Reads,
    listed: usize,
    wall: std::time::Duration,
}

/// The first page of `item` at `limit` as "reader" reads it, priced by table.
async fn read_page(app: &App, priced: &PricedReads, item: &ItemId, limit: usize) -> PageRead {
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
        path_parameters: serde_json::Map::from_iter([("item_id".to_owned(), json!(item.as_str()))]),
        claims: Some(HashMap::from([("sub".to_owned(), "reader".to_owned())])),
        source_ip: "127.0.0.1".to_owned(),
        request_id: format!("bench-likers-{limit}"),
        now_ms: now_ms(),
    }
    .event();
    let event: LambdaRequest = serde_json::from_value(event).expect("a v2 event");
    priced.take();
    let started = Instant::now();
    let response = app.handle(Endpoint::ListLikers, event.into()).await;
    let wall = started.elapsed();
    assert_eq!(response.status(), 200);
    let Body::Text(body) = response.body() else {
        panic!("a JSON page");
    };
    let page: serde_json::Value = serde_json::from_str(body).expect("a JSON page");
    let mut likers = Reads::default();
    let mut privacy = Reads::default();
    for read in priced.take() {
        let reads = if read.table.contains("Privacy") {
            &mut privacy
        } else {
            &mut likers
        };
        reads.requests += 1;
        reads.half_units += read.half_units;
    }
    PageRead {
        likers,
        privacy,
        listed: page["items"].as_array().map_or(0, Vec::len),
        wall,
    }
}
