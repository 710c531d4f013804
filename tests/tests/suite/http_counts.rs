//! End to end through the local HTTP front: the count endpoints, over count rows, overflow
//! partitions and `as_of` replicas written as the aggregator and the pulse lay them out; the
//! public count reads (no authorizer) and the container's count cache.

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use likes_core::clock::{now_ms, parse_rfc3339};
use likes_store::cached_counts::COUNT_CACHE_TTL;
use likes_tests::{TestResponse, TestStack};
use serde_json::{json, Value};

async fn put_row(stack: &TestStack, item: &str, shard: &str, fields: &[(&str, i64)]) {
    let mut request = stack
        .dynamodb()
        .put_item()
        .table_name(stack.name("CountsTable"))
        .item("item_id", AttributeValue::S(item.into()))
        .item("shard", AttributeValue::S(shard.into()));
    for (name, value) in fields {
        request = request.item(*name, AttributeValue::N(value.to_string()));
    }
    request.send().await.unwrap();
}

async fn count_row(stack: &TestStack, item: &str, k: u32, like: i64, dislike: i64) {
    put_row(
        stack,
        item,
        &format!("D#{k}"),
        &[("like_count", like), ("dislike_count", dislike)],
    )
    .await;
}

async fn batch(stack: &TestStack, path: &str, user: &str, body: &Value) -> TestResponse {
    stack
        .request("POST", path, Some(user))
        .json(body)
        .send()
        .await
}

#[tokio::test]
async fn a_count_is_the_sum_of_the_items_rows_and_says_how_fresh_it_is() {
    let stack = TestStack::start().await;
    count_row(&stack, "game:1", 0, 3, 0).await;
    count_row(&stack, "game:1", 5, 2, 1).await;
    count_row(&stack, "game:10", 0, 100, 100).await;

    let response = stack.like_count("game:1").await;
    assert_eq!(response.status, 200);
    let cache = response.header("cache-control").unwrap();
    for directive in ["public", "s-maxage=", "stale-if-error="] {
        assert!(cache.contains(directive), "{cache}");
    }
    let body = response.json();
    assert_eq!(body["item_id"], "game:1");
    assert_eq!(
        (body["like_count"].clone(), body["dislike_count"].clone()),
        (json!(5), json!(1))
    );
    assert_eq!(body["freshness"], "eventual");
    assert_eq!(
        body["as_of"],
        Value::Null,
        "no batch applied yet: nothing is promised"
    );
}

#[tokio::test]
async fn as_of_is_read_from_the_published_replicas() {
    let stack = TestStack::start().await;
    let as_of = likes_tests::now_seconds() * 1000 - 2_000;
    for replica in 0..likes_store::freshness::AS_OF_REPLICAS {
        put_row(
            &stack,
            &format!("#asof#{replica}"),
            "A",
            &[("as_of", as_of), ("computed_at", as_of + 500)],
        )
        .await;
    }
    let body = stack.like_count("game:1").await.json();
    assert_eq!(
        likes_core::clock::parse_rfc3339(body["as_of"].as_str().unwrap()).unwrap(),
        as_of
    );
    assert_eq!(body["like_count"], 0, "an item never counted reads zero");
}

/// A freshness read that fails (here: a replica no pulse could have written) never fails
/// the count read: the counts come with `as_of: null`.
#[tokio::test]
async fn a_failed_freshness_read_still_answers_the_counts() {
    let stack = TestStack::start().await;
    count_row(&stack, "game:1", 0, 3, 1).await;
    for replica in 0..likes_store::freshness::AS_OF_REPLICAS {
        stack
            .dynamodb()
            .put_item()
            .table_name(stack.name("CountsTable"))
            .item("item_id", AttributeValue::S(format!("#asof#{replica}")))
            .item("shard", AttributeValue::S("A".into()))
            .item("as_of", AttributeValue::S("not a number".into()))
            .send()
            .await
            .unwrap();
    }
    let response = stack.like_count("game:1").await;
    response.assert_status(200);
    let body = response.json();
    assert_eq!(
        (body["like_count"].clone(), body["as_of"].clone()),
        (json!(3), Value::Null)
    );
}

/// A hot item's writes spread over overflow partitions; its marker tells the reader to add
/// them, and an item without a marker is read from its own partition alone.
#[tokio::test]
async fn a_hot_items_count_adds_its_overflow_partitions() {
    let stack = TestStack::start().await;
    count_row(&stack, "game:viral", 0, 2, 0).await;
    count_row(&stack, "game:viral#1", 3, 10, 1).await;
    count_row(&stack, "game:viral#2", 0, 5, 0).await;
    // Beyond the marker's width: no reader looks there (and no writer writes there).
    count_row(&stack, "game:viral#3", 0, 1000, 0).await;
    let before = stack.like_count("game:viral").await.json();
    assert_eq!(before["like_count"], 2, "no marker yet: {before}");
    put_row(&stack, "game:viral", "H", &[("partitions", 2)]).await;
    // Past the container's cache, the marker is read.
    tokio::time::sleep(COUNT_CACHE_TTL).await;
    let after = stack.like_count("game:viral").await.json();
    assert_eq!(
        (after["like_count"].clone(), after["dislike_count"].clone()),
        (json!(17), json!(1)),
        "{after}"
    );
}

/// A partition whose rows pass DynamoDB's 1 MB page (rows heavy with subtotals a stalled
/// reconciliation left, say) is read through every page: the correction row and the overflow
/// marker sort last and still count.
#[tokio::test]
async fn a_partition_over_one_megabyte_is_read_whole() {
    let stack = TestStack::start().await;
    let item = "game:heavy";
    // Three rows of some 380 KB each (under the 400 KB item limit): 1.1 MB in one partition.
    let padding = "s".repeat(380_000);
    for (k, like) in [(0, 3), (1, 4), (2, 5)] {
        // Each put is some 372 write units and a partition takes 1,000 a second: a second
        // apart, none of them is throttled (the simulator meters as AWS does).
        if k > 0 {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        stack
            .dynamodb()
            .put_item()
            .table_name(stack.name("CountsTable"))
            .item("item_id", AttributeValue::S(item.into()))
            .item("shard", AttributeValue::S(format!("D#{k}")))
            .item("like_count", AttributeValue::N(like.to_string()))
            .item("dislike_count", AttributeValue::N("0".into()))
            .item("padding", AttributeValue::S(padding.clone()))
            .send()
            .await
            .unwrap();
    }
    put_row(
        &stack,
        item,
        "D#C",
        &[("like_count", 100), ("dislike_count", 2)],
    )
    .await;
    count_row(&stack, "game:heavy#1", 0, 1000, 0).await;
    put_row(&stack, item, "H", &[("partitions", 1)]).await;

    let one = stack.like_count(item).await.json();
    assert_eq!(
        (one["like_count"].clone(), one["dislike_count"].clone()),
        (json!(1112), json!(2)),
        "{one}"
    );
    let many = batch(
        &stack,
        "/v1/items/like-counts:batchGet",
        "reader",
        &json!({"item_ids": [item]}),
    )
    .await
    .json();
    assert_eq!(
        many["counts"][item],
        json!({"like_count": 1112, "dislike_count": 2})
    );
}

#[tokio::test]
async fn a_negative_sum_reads_as_zero() {
    let stack = TestStack::start().await;
    count_row(&stack, "game:2", 0, 1, 0).await;
    count_row(&stack, "game:2", 1, -3, 2).await;
    let body = stack.like_count("game:2").await.json();
    assert_eq!(
        (body["like_count"].clone(), body["dislike_count"].clone()),
        (json!(0), json!(2))
    );
}

#[tokio::test]
async fn counts_of_many_items_come_in_one_call() {
    let stack = TestStack::start().await;
    count_row(&stack, "game:1", 0, 4, 1).await;
    count_row(&stack, "game:2", 3, 0, 7).await;
    let response = batch(
        &stack,
        "/v1/items/like-counts:batchGet",
        "reader",
        &json!({"item_ids": ["game:1", "game:2", "game:3", "game:1"]}),
    )
    .await;
    response.assert_status(200);
    assert!(response
        .header("cache-control")
        .unwrap()
        .contains("stale-if-error"));
    let body = response.json();
    assert_eq!(
        body["counts"],
        json!({
            "game:1": {"like_count": 4, "dislike_count": 1},
            "game:2": {"like_count": 0, "dislike_count": 7},
            "game:3": {"like_count": 0, "dislike_count": 0},
        })
    );
    assert!(body.as_object().unwrap().contains_key("as_of"));
}

#[tokio::test]
async fn a_browse_page_has_my_state_and_the_counts() {
    let stack = TestStack::start().await;
    count_row(&stack, "game:1", 0, 4, 1).await;
    let like = stack
        .request("PUT", "/v1/items/game:1/like", Some("gina"))
        .send()
        .await;
    assert_eq!(like.status, 200);
    let dislike = stack
        .request("PUT", "/v1/items/game:2/reaction", Some("gina"))
        .header("idempotency-key", "d2")
        .json(&json!({"state": "DISLIKE"}))
        .send()
        .await;
    assert_eq!(dislike.status, 200);
    // The counts are read once the pipeline has counted both writes: the page's counts are
    // then exact, whatever the machine's speed.
    stack.settle().await;
    let ids: Vec<String> = (0..40).map(|n| format!("game:{n}")).collect();
    let response = batch(
        &stack,
        "/v1/items:batchGet",
        "gina",
        &json!({ "item_ids": ids }),
    )
    .await;
    response.assert_status(200);
    assert_eq!(response.header("cache-control"), Some("private, no-store"));
    let body = response.json();
    let items = body["items"].as_object().unwrap();
    assert_eq!(items.len(), 40);
    assert_eq!(
        items["game:1"],
        json!({"state": "LIKE", "like_count": 5, "dislike_count": 1})
    );
    assert_eq!(
        items["game:2"],
        json!({"state": "DISLIKE", "like_count": 0, "dislike_count": 1})
    );
    assert_eq!(
        items["game:39"],
        json!({"state": "NONE", "like_count": 0, "dislike_count": 0})
    );
    // Another caller sees their own states, not gina's.
    let other = batch(
        &stack,
        "/v1/items:batchGet",
        "hank",
        &json!({"item_ids": ["game:1"]}),
    )
    .await
    .json();
    assert_eq!(other["items"]["game:1"]["state"], "NONE");
}

#[tokio::test]
async fn bad_batch_requests_are_400_problems() {
    let stack = TestStack::start().await;
    let too_many: Vec<String> = (0..101).map(|n| format!("game:{n}")).collect();
    let hundred: Vec<String> = (0..100).map(|n| format!("game:{n}")).collect();
    for path in ["/v1/items/like-counts:batchGet", "/v1/items:batchGet"] {
        for body in [
            json!({"item_ids": []}),
            json!({"item_ids": too_many}),
            json!({"item_ids": ["ok", "not ok"]}),
            json!({"item_ids": "game:1"}),
            json!({"item_ids": [1]}),
            json!({"ids": ["game:1"]}),
            json!({"item_ids": ["game:1"], "extra": true}),
        ] {
            batch(&stack, path, "reader", &body).await.problem(400);
        }
        let malformed = stack
            .request("POST", path, Some("reader"))
            .header("content-type", "application/json")
            .body("{\"item_ids\": [")
            .send()
            .await;
        malformed.problem(400);
        assert_eq!(
            batch(&stack, path, "reader", &json!({"item_ids": hundred}))
                .await
                .status,
            200
        );
    }
    stack.like_count("bad%20id").await.problem(400);
}

/// The two count reads have no authorizer (template.yaml `Authorizer: NONE`, as API
/// Gateway runs it): no token, or a token that would fail the JWT check, is let through.
#[tokio::test]
async fn count_reads_are_public_whatever_the_token() {
    let stack = TestStack::start().await;
    count_row(&stack, "game:1", 0, 4, 1).await;
    let body = json!({"item_ids": ["game:1"]});
    for authorization in [None, Some("Bearer not.a.jwt"), Some("Basic Zm9vOmJhcg==")] {
        let with = |mut request: likes_tests::TestRequest| {
            if let Some(value) = authorization {
                request = request.header("authorization", value);
            }
            request
        };
        let one = with(stack.request("GET", "/v1/items/game:1/like-count", None))
            .send()
            .await;
        one.assert_status(200);
        assert_eq!(one.json()["like_count"], 4, "{authorization:?}");
        assert!(one.header("cache-control").unwrap().starts_with("public"));
        let many = with(stack.request("POST", "/v1/items/like-counts:batchGet", None))
            .json(&body)
            .send()
            .await;
        many.assert_status(200);
        assert_eq!(
            many.json()["counts"]["game:1"],
            json!({"like_count": 4, "dislike_count": 1}),
            "{authorization:?}"
        );
    }
}

/// Every other route keeps the JWT authorizer: the browse page carries the caller's states.
#[tokio::test]
async fn per_user_routes_still_need_a_token_and_stay_private() {
    let stack = TestStack::start().await;
    let body = json!({"item_ids": ["game:1"]});
    for authorization in [None, Some("Bearer not.a.jwt")] {
        let requests = [
            stack
                .request("POST", "/v1/items:batchGet", None)
                .json(&body),
            stack.request("GET", "/v1/items/game:1/reaction", None),
            stack.request("PUT", "/v1/items/game:1/like", None),
            stack.request("GET", "/v1/users/me/liked-items", None),
        ];
        for mut request in requests {
            if let Some(value) = authorization {
                request = request.header("authorization", value);
            }
            assert_eq!(request.send().await.status, 401, "{authorization:?}");
        }
    }
    for (method, path, body) in [
        ("POST", "/v1/items:batchGet", Some(&body)),
        ("GET", "/v1/items/game:1/reaction", None),
        ("GET", "/v1/users/me/liked-items", None),
    ] {
        let mut request = stack.request(method, path, Some("ivy"));
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await;
        response.assert_status(200);
        assert_eq!(
            response.header("cache-control"),
            Some("private, no-store"),
            "{method} {path}"
        );
    }
}

/// A container serves a count it read less than [`COUNT_CACHE_TTL`] ago, with the `as_of`
/// it was read with, and never an older one: like, read, like again, and a read after the
/// TTL shows both likes.
#[tokio::test]
async fn the_count_cache_never_serves_a_count_older_than_its_ttl() {
    let stack = TestStack::builder().scheduled().start().await;
    let item = "game:cached";
    let like = |user: &'static str| {
        let stack = &stack;
        async move {
            stack
                .request("PUT", &format!("/v1/items/{item}/like"), Some(user))
                .send()
                .await
                .assert_status(200);
            let written = now_ms();
            stack.settle().await;
            stack.wait_for_as_of(written, Duration::from_secs(30)).await;
        }
    };
    let read = || async {
        let body = stack.like_count(item).await.json();
        let as_of = body["as_of"].as_str().map(|t| parse_rfc3339(t).unwrap());
        (body["like_count"].as_u64().unwrap(), as_of)
    };
    like("kim").await;
    let (first, first_as_of) = read().await;
    let first_read = std::time::Instant::now();
    assert_eq!(first, 1);
    like("lee").await;
    let (again, again_as_of) = read().await;
    if first_read.elapsed() < COUNT_CACHE_TTL {
        // Still the cached read, or a new one; a cached count keeps the `as_of` it came with.
        assert!(
            (again, again_as_of) == (1, first_as_of) || again == 2,
            "{again} {again_as_of:?}"
        );
    }
    tokio::time::sleep(COUNT_CACHE_TTL).await;
    let (after, after_as_of) = read().await;
    assert_eq!(after, 2, "read after the TTL");
    assert!(after_as_of >= first_as_of);
}

/// Counts are the same for every caller: a shared cache may keep them for a few seconds.
#[tokio::test]
async fn count_answers_keep_their_shared_cache_policy() {
    let stack = TestStack::start().await;
    let shared = "public, max-age=1, s-maxage=5, stale-while-revalidate=5, stale-if-error=300";
    let one = stack.like_count("game:1").await;
    one.assert_status(200);
    assert_eq!(one.header("cache-control"), Some(shared));
    let many = stack
        .request("POST", "/v1/items/like-counts:batchGet", None)
        .json(&json!({"item_ids": ["game:1", "game:2"]}))
        .send()
        .await;
    many.assert_status(200);
    assert_eq!(many.header("cache-control"), Some(shared));
}
