//! The last figures: a page of an item's likers through the real handler, a viral item's
//! spread over its buckets beside what one index keyed by the item alone would read.

use std::collections::HashMap;
use std::time::Instant;

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::request::LambdaRequest;
use likes_api::{App, Config, Endpoint};
use likes_core::clock::now_ms;
use likes_core::likers::{bucket_of, buckets, LikerChange, LikerUpdate};
use likes_core::{CursorKey, ItemId};
use likes_local::http_api::GatewayRequest;
use likes_store::likers::POSITION_INDEX;
use likes_store::LikersStore;
use likes_tests::TestStack;
use serde_json::json;

use crate::capacity;
use crate::sent::SentRequests;
use crate::{LIKERS, VIRAL};

/// Pages of a viral item's likers and of a small item's through the real handler: requests
/// counted on the wire, read units from the entries each bucket's Query reads.
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

    let environment = stack
        .stack
        .function_environment("ListLikersFunction")
        .expect("the list-likers function's environment");
    let (client, sent) = SentRequests::client(&stack.stack.aws.sdk);
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
