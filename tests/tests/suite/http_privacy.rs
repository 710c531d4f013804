//! Who sees whose likes, end to end through the local front: a private user's likes leave
//! every other reader's likers list from their next page read on (they still count, and
//! their owner still sees them); a block hides the two users from each other's lists both
//! ways until it is lifted; pages stay full and their cursors exact however many likers they
//! skip; the blocks list pages behind its own cursor, up to the cap; and bad input is a
//! problem that writes nothing.

use std::collections::BTreeSet;

use likes_tests::{assert_reveals_none, cursor_readings, liker_ids, TestResponse, TestStack};
use serde_json::{json, Value};

const ITEM: &str = "privacy:1";

async fn set_visibility(stack: &TestStack, user: &str, visibility: &str) -> TestResponse {
    stack
        .request("PUT", "/v1/users/me/settings", Some(user))
        .json(&json!({ "likes_visibility": visibility }))
        .send()
        .await
}

async fn settings(stack: &TestStack, user: &str) -> Value {
    answer(
        &stack
            .request("GET", "/v1/users/me/settings", Some(user))
            .send()
            .await,
        200,
    )
}

async fn block(stack: &TestStack, user: &str, other: &str) -> TestResponse {
    stack
        .request("PUT", &format!("/v1/users/me/blocks/{other}"), Some(user))
        .send()
        .await
}

async fn unblock(stack: &TestStack, user: &str, other: &str) -> TestResponse {
    stack
        .request(
            "DELETE",
            &format!("/v1/users/me/blocks/{other}"),
            Some(user),
        )
        .send()
        .await
}

async fn blocks_page(stack: &TestStack, user: &str, query: &str) -> TestResponse {
    stack
        .request("GET", &format!("/v1/users/me/blocks?{query}"), Some(user))
        .send()
        .await
}

/// The answer's JSON, after its status and its private cache policy.
fn answer(response: &TestResponse, status: u16) -> Value {
    response.assert_status(status);
    assert_eq!(response.header("cache-control"), Some("private, no-store"));
    response.json()
}

/// A problem+json with `status`, private like every answer about the caller.
fn problem(response: &TestResponse, status: u16) -> Value {
    assert_eq!(response.header("cache-control"), Some("private, no-store"));
    response.problem(status)
}

/// The likers of [`ITEM`] on `reader`'s first page.
async fn seen_by(stack: &TestStack, reader: &str) -> Vec<String> {
    liker_ids(&stack.likers_page_as(reader, ITEM, "").await)
}

async fn like_all(stack: &TestStack, users: &[String]) {
    const LANES: usize = 4;
    let lane = |n: usize| async move {
        for user in users.iter().skip(n).step_by(LANES) {
            stack.like(user, ITEM).await;
        }
    };
    tokio::join!(lane(0), lane(1), lane(2), lane(3));
}

#[tokio::test]
async fn a_private_user_leaves_other_readers_likers_lists_not_their_own_and_still_counts() {
    let stack = TestStack::start().await;
    for user in ["ann", "bob", "cid"] {
        stack.like(user, ITEM).await;
    }
    stack.settle_leaderboard().await;
    let everyone = ["cid", "bob", "ann"];
    assert_eq!(seen_by(&stack, "dan").await, everyone);
    assert_eq!(
        settings(&stack, "ann").await,
        json!({"likes_visibility": "public"}),
        "public when never set"
    );

    let stored = answer(&set_visibility(&stack, "ann", "private").await, 200);
    assert_eq!(stored, json!({"likes_visibility": "private"}));
    assert_eq!(settings(&stack, "ann").await, stored);
    // The very next page read of every other reader leaves her out; she still sees herself.
    for reader in ["dan", "bob", "cid"] {
        assert_eq!(seen_by(&stack, reader).await, ["cid", "bob"], "{reader}");
    }
    assert_eq!(seen_by(&stack, "ann").await, everyone);
    // Her like still counts.
    stack.settle().await;
    let count = stack.like_count(ITEM).await;
    count.assert_status(200);
    assert_eq!(count.json()["like_count"], 3);

    answer(&set_visibility(&stack, "ann", "public").await, 200);
    for reader in ["dan", "ann"] {
        assert_eq!(seen_by(&stack, reader).await, everyone, "{reader}");
    }
}

#[tokio::test]
async fn a_block_hides_the_two_users_from_each_other_both_ways_until_it_is_lifted() {
    let stack = TestStack::start().await;
    for user in ["ann", "bob", "cid", "dan"] {
        stack.like(user, ITEM).await;
    }
    stack.settle_leaderboard().await;
    let everyone = ["dan", "cid", "bob", "ann"];

    let first = answer(&block(&stack, "ann", "bob").await, 200);
    assert_eq!(first["user_id"], "bob");
    assert!(first["blocked_at"].is_string(), "{first}");
    let again = answer(&block(&stack, "ann", "bob").await, 200);
    assert_eq!(again, first, "blocking again changes nothing");
    // The blocker does not see the blocked user, nor the blocked user the blocker.
    assert_eq!(seen_by(&stack, "ann").await, ["dan", "cid", "ann"]);
    assert_eq!(seen_by(&stack, "bob").await, ["dan", "cid", "bob"]);
    assert_eq!(seen_by(&stack, "cid").await, everyone, "others see both");
    assert_eq!(
        answer(&blocks_page(&stack, "ann", "").await, 200),
        json!({"items": [first], "next_cursor": null})
    );
    assert_eq!(
        answer(&blocks_page(&stack, "bob", "").await, 200),
        json!({"items": [], "next_cursor": null}),
        "being blocked is not blocking"
    );

    // Blocked both ways, one lifted block still leaves the other.
    answer(&block(&stack, "bob", "ann").await, 200);
    let lifted = unblock(&stack, "ann", "bob").await;
    answer_empty(&lifted);
    assert_eq!(seen_by(&stack, "ann").await, ["dan", "cid", "ann"]);
    assert_eq!(seen_by(&stack, "bob").await, ["dan", "cid", "bob"]);
    answer_empty(&unblock(&stack, "bob", "ann").await);
    answer_empty(&unblock(&stack, "bob", "ann").await);
    for reader in ["ann", "bob"] {
        assert_eq!(seen_by(&stack, reader).await, everyone, "{reader}");
    }
    assert_eq!(
        answer(&blocks_page(&stack, "ann", "").await, 200)["items"],
        json!([])
    );
}

/// A 204 without a body, private.
fn answer_empty(response: &TestResponse) {
    response.assert_status(204);
    assert_eq!(response.header("cache-control"), Some("private, no-store"));
    assert!(response.body.is_empty(), "{:?}", response.body);
}

#[tokio::test]
async fn pages_skipping_many_hidden_likers_stay_full_and_list_every_visible_liker_once() {
    let stack = TestStack::start().await;
    // fan000 likes first (the oldest), fan149 last; then the reader.
    let fans: Vec<String> = (0..150).map(|n| format!("fan{n:03}")).collect();
    for lane in fans.chunks(50) {
        like_all(&stack, lane).await;
    }
    stack.like("reader", ITEM).await;

    // Hidden from the reader, interleaved over the list: a run of 50 private fans in the
    // middle, the 10 oldest (the list's tail), every tenth from 3 on; the fans the reader
    // blocks; the fans who block the reader. The fans who block somebody else stay.
    let private = |n: usize| (40..90).contains(&n) || n < 10 || n % 10 == 3;
    let blocked = |n: usize| n % 10 == 5;
    let blocking = |n: usize| n % 10 == 7;
    for (n, fan) in fans.iter().enumerate() {
        if private(n) {
            answer(&set_visibility(&stack, fan, "private").await, 200);
        }
        if blocked(n) {
            answer(&block(&stack, "reader", fan).await, 200);
        }
        if blocking(n) {
            answer(&block(&stack, fan, "reader").await, 200);
        }
        if n % 10 == 9 {
            answer(&block(&stack, fan, "someone-else").await, 200);
        }
    }
    // The reader's own likes are private: shown to them, to nobody else.
    answer(&set_visibility(&stack, "reader", "private").await, 200);
    stack.settle_leaderboard().await;

    let all = stack.liked_rows(ITEM).await;
    assert_eq!(all.len(), 151, "the likes went through");
    let hidden: BTreeSet<String> = fans
        .iter()
        .enumerate()
        .filter(|(n, _)| private(*n) || blocked(*n) || blocking(*n))
        .map(|(_, fan)| fan.clone())
        .collect();
    let visible: Vec<(String, String)> = all
        .iter()
        .filter(|(user, _)| !hidden.contains(user))
        .cloned()
        .collect();
    assert_eq!((hidden.len(), visible.len()), (87, 64));
    // Every page but the last full, the last not empty, each visible liker once, in order.
    for limit in [7, 20, 100] {
        let listed = stack.all_likers_as("reader", ITEM, limit).await;
        assert_eq!(listed, visible, "limit {limit}");
    }
    // Another reader blocks nobody and is blocked by nobody: only the private are hidden.
    let others_view: Vec<(String, String)> = all
        .iter()
        .filter(|(user, _)| {
            user != "reader" && !fans.iter().position(|f| f == user).is_some_and(private)
        })
        .cloned()
        .collect();
    assert_eq!(stack.all_likers_as("other", ITEM, 20).await, others_view);
}

#[tokio::test]
async fn the_blocks_list_pages_in_user_id_order_behind_a_cursor_bound_to_its_user() {
    let stack = TestStack::start().await;
    let blocked: Vec<String> = (0..25).map(|n| format!("user-{n:02}")).collect();
    // Blocked out of order: the list is in user id order whatever the order of blocking.
    let evens_down = blocked.iter().rev().step_by(2);
    for user in evens_down.chain(blocked.iter().skip(1).step_by(2)) {
        answer(&block(&stack, "ann", user).await, 200);
    }
    let mut listed = Vec::new();
    let mut sizes = Vec::new();
    let mut query = "limit=10".to_owned();
    let mut first_cursor = None;
    let mut cursors = Vec::new();
    loop {
        let page = answer(&blocks_page(&stack, "ann", &query).await, 200);
        let items = page["items"].as_array().expect("items");
        sizes.push(items.len());
        for block in items {
            assert!(block["blocked_at"].is_string(), "{block}");
            listed.push(block["user_id"].as_str().expect("user_id").to_owned());
        }
        let Some(cursor) = page["next_cursor"].as_str() else {
            break;
        };
        first_cursor.get_or_insert_with(|| cursor.to_owned());
        cursors.push(cursor.to_owned());
        query = format!("limit=10&cursor={cursor}");
    }
    assert_eq!(sizes, [10, 10, 5]);
    assert_eq!(listed, blocked);
    // Opaque: no cursor names a blocked user, the one it pages after or any other.
    for cursor in &cursors {
        assert_reveals_none("a blocks cursor", &cursor_readings(cursor), &blocked);
    }
    let default = answer(&blocks_page(&stack, "ann", "").await, 200);
    assert_eq!(default["items"].as_array().map(Vec::len), Some(20));

    // The cursor is ann's, of her blocks list: any other use of it, a changed one, another
    // list's cursor, or a bad limit is a problem.
    let cursor = first_cursor.expect("a second page");
    let mut tampered = cursor.clone().into_bytes();
    let last = tampered.len() - 1;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).expect("ASCII");
    stack.like("ann", ITEM).await;
    stack.like("ann", "privacy:2").await;
    let liked = stack
        .request("GET", "/v1/users/me/liked-items?limit=1", Some("ann"))
        .send()
        .await;
    let liked_cursor = answer(&liked, 200)["next_cursor"]
        .as_str()
        .expect("a next page")
        .to_owned();
    for (user, query) in [
        ("bob", format!("cursor={cursor}")),
        ("ann", format!("cursor={tampered}")),
        ("ann", format!("cursor={liked_cursor}")),
        ("ann", "cursor=garbage".to_owned()),
        ("ann", "limit=0".to_owned()),
        ("ann", "limit=101".to_owned()),
        ("ann", "limit=ten".to_owned()),
    ] {
        problem(&blocks_page(&stack, user, &query).await, 400);
    }
    // And the blocks cursor is no liked-items cursor either.
    let misused = stack
        .request(
            "GET",
            &format!("/v1/users/me/liked-items?cursor={cursor}"),
            Some("ann"),
        )
        .send()
        .await;
    problem(&misused, 400);
}

/// `user`'s first `n` blocks (`user-0000` on), written as the store writes them: the block
/// rows and the count on the settings row. A thousand blocks through the front take a minute
/// on the simulator, where a transaction's rows stay in flight 10 ms after it and one user's
/// blocks one after the other meet them.
async fn seed_blocks(stack: &TestStack, user: &str, n: usize) {
    use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
    use likes_store::rows::{self, BlockRow};
    let table = stack.name("PrivacyTable");
    let mut puts: Vec<WriteRequest> = (0..n)
        .map(|k| BlockRow {
            user_id: user.to_owned(),
            entry: likes_core::privacy::block_entry(&format!("user-{k:04}")),
            blocked_at: likes_core::clock::now_ms(),
        })
        .map(|row| rows::to_item(&row).expect("a block row"))
        .collect::<Vec<_>>()
        .into_iter()
        .chain([std::collections::HashMap::from([
            ("user_id".to_owned(), AttributeValue::S(user.to_owned())),
            (
                "entry".to_owned(),
                AttributeValue::S("#settings".to_owned()),
            ),
            ("blocks".to_owned(), AttributeValue::N(n.to_string())),
        ])])
        .map(|item| {
            let put = PutRequest::builder().set_item(Some(item)).build();
            WriteRequest::builder()
                .put_request(put.expect("a put"))
                .build()
        })
        .collect();
    while !puts.is_empty() {
        let batch: Vec<WriteRequest> = puts.drain(..puts.len().min(25)).collect();
        let output = stack
            .dynamodb()
            .batch_write_item()
            .request_items(&table, batch)
            .send()
            .await
            .expect("BatchWriteItem of the blocks");
        if let Some(mut left) = output.unprocessed_items {
            puts.extend(left.remove(&table).unwrap_or_default());
        }
    }
}

#[tokio::test]
async fn a_user_blocks_at_most_a_thousand_users() {
    let stack = TestStack::start().await;
    seed_blocks(&stack, "ann", 999).await;
    // A thousand writes at once on ann's partition key: it is throttled for the rest of
    // the second, on the simulator as on DynamoDB.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert_eq!(
        answer(&block(&stack, "ann", "user-0999").await, 200)["user_id"],
        "user-0999",
        "the thousandth block is the last"
    );

    let refused = problem(&block(&stack, "ann", "one-more").await, 409);
    assert_eq!(refused["type"], "/problems/too-many-blocks");
    // At the cap, a block that exists is still answered as it was.
    answer(&block(&stack, "ann", "user-0500").await, 200);
    let rows = stack.rows("PrivacyTable").await;
    assert_eq!(
        rows.len(),
        1_000 + 1,
        "the blocks and the settings row, nothing more"
    );

    answer_empty(&unblock(&stack, "ann", "user-0500").await);
    let admitted = answer(&block(&stack, "ann", "one-more").await, 200);
    assert_eq!(admitted["user_id"], "one-more");
    problem(&block(&stack, "ann", "user-0500").await, 409);
}

#[tokio::test]
async fn bad_privacy_requests_are_problems_and_write_nothing() {
    let stack = TestStack::start().await;
    for body in [
        r#"{"likes_visibility": "secret"}"#,
        r#"{"likes_visibility": "PRIVATE"}"#,
        r#"{"likes_visibility": "private", "also": 1}"#,
        r#"{"likes_visibility": 1}"#,
        r#"{"likes_visibility": null}"#,
        r#"{}"#,
        r#"["private"]"#,
        r#""private""#,
        "null",
        "{",
        "",
    ] {
        let response = stack
            .request("PUT", "/v1/users/me/settings", Some("ann"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await;
        problem(&response, 400);
    }
    let wrong_type = stack
        .request("PUT", "/v1/users/me/settings", Some("ann"))
        .header("content-type", "text/plain")
        .body(r#"{"likes_visibility": "private"}"#)
        .send()
        .await;
    problem(&wrong_type, 415);
    // Nobody blocks or unblocks themselves, and a user id in the path is a valid one once
    // percent-decoded: no control character, UTF-8, at most 128 bytes.
    let too_long = "u".repeat(129);
    let two_byte_long = "%C3%A9".repeat(65);
    for other in [
        "ann",
        "an%6E",
        "%00",
        "a%7Fb",
        "a%C2%85b",
        "%C3%28",
        too_long.as_str(),
        two_byte_long.as_str(),
    ] {
        problem(&block(&stack, "ann", other).await, 400);
        problem(&unblock(&stack, "ann", other).await, 400);
    }
    assert_eq!(
        stack.rows("PrivacyTable").await,
        Vec::new(),
        "nothing was written"
    );
    assert_eq!(
        settings(&stack, "ann").await,
        json!({"likes_visibility": "public"})
    );

    // Any other user id is one, percent-encoded as a path segment.
    let odd = answer(&block(&stack, "ann", "b%C3%B6b%2F1%20x").await, 200);
    assert_eq!(odd["user_id"], "böb/1 x");
    assert_eq!(
        answer(&blocks_page(&stack, "ann", "").await, 200)["items"][0]["user_id"],
        "böb/1 x"
    );
    answer_empty(&unblock(&stack, "ann", "b%C3%B6b%2F1%20x").await);

    // Every route is the caller's: no token, no answer.
    for (method, path) in [
        ("GET", "/v1/users/me/settings"),
        ("PUT", "/v1/users/me/settings"),
        ("GET", "/v1/users/me/blocks"),
        ("PUT", "/v1/users/me/blocks/bob"),
        ("DELETE", "/v1/users/me/blocks/bob"),
    ] {
        stack
            .request(method, path, None)
            .send()
            .await
            .assert_status(401);
    }
}
