//! End to end through the local HTTP front: every reaction endpoint and every error.

use likes_tests::{TestResponse, TestStack};
use serde_json::{json, Value};

const ITEM: &str = "/v1/items/game:1";

async fn put_reaction(stack: &TestStack, user: &str, key: &str, state: &str) -> TestResponse {
    stack
        .request("PUT", &format!("{ITEM}/reaction"), Some(user))
        .header("idempotency-key", key)
        .json(&json!({ "state": state }))
        .send()
        .await
}

async fn get_reaction(stack: &TestStack, user: &str) -> Value {
    let response = stack
        .request("GET", &format!("{ITEM}/reaction"), Some(user))
        .send()
        .await;
    assert_eq!(response.status, 200);
    response.json()
}

/// Nothing was written for `user`: the reaction reads NONE at version 0.
async fn assert_untouched(stack: &TestStack, user: &str) {
    let reaction = get_reaction(stack, user).await;
    assert_eq!(reaction["state"], "NONE");
    assert_eq!(reaction["version"], 0);
}

#[tokio::test]
async fn a_reaction_is_set_and_read_back_at_once() {
    let stack = TestStack::start().await;
    let response = put_reaction(&stack, "alice", "k1", "LIKE").await;
    response.assert_status(200);
    assert_eq!(response.header("etag"), Some("\"1\""));
    assert_eq!(response.header("idempotent-replayed"), None);
    let body = response.json();
    assert_eq!(body["item_id"], "game:1");
    assert_eq!(body["state"], "LIKE");
    assert_eq!(body["previous_state"], "NONE");
    assert_eq!(body["version"], 1);
    assert_eq!(body["client_like_delta"], 1);
    assert_eq!(body["client_dislike_delta"], 0);
    assert_eq!(body["count_status"], "queued");
    let updated_at = body["updated_at"].as_str().unwrap();
    assert!(
        updated_at.ends_with('Z') && updated_at.contains('T'),
        "{updated_at}"
    );

    let reaction = get_reaction(&stack, "alice").await;
    assert_eq!(
        reaction,
        json!({
            "item_id": "game:1", "state": "LIKE", "version": 1, "updated_at": updated_at
        })
    );

    let flip = put_reaction(&stack, "alice", "k2", "DISLIKE").await.json();
    assert_eq!(flip["previous_state"], "LIKE");
    assert_eq!(
        (
            flip["client_like_delta"].clone(),
            flip["client_dislike_delta"].clone()
        ),
        (json!(-1), json!(1))
    );
    let same = put_reaction(&stack, "alice", "k3", "DISLIKE").await.json();
    assert_eq!(same["count_status"], "unchanged");
    assert_eq!(same["version"], 2);
    assert_eq!(same["client_dislike_delta"], 0);
}

#[tokio::test]
async fn a_reaction_never_set_reads_none_at_version_zero() {
    let stack = TestStack::start().await;
    let response = stack
        .request("GET", &format!("{ITEM}/reaction"), Some("nobody"))
        .send()
        .await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("etag"), Some("\"0\""));
    assert_eq!(
        response.json(),
        json!({ "item_id": "game:1", "state": "NONE", "version": 0, "updated_at": null })
    );
}

#[tokio::test]
async fn a_replayed_key_answers_the_stored_response() {
    let stack = TestStack::start().await;
    let first = put_reaction(&stack, "alice", "k1", "LIKE").await;
    let replay = put_reaction(&stack, "alice", "k1", "LIKE").await;
    assert_eq!(replay.status, 200);
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(replay.json(), first.json());
    assert_eq!(replay.header("etag"), first.header("etag"));
}

/// That the row stays NONE is the store's to show; here: the wire answer is the original one.
#[tokio::test]
async fn a_late_retry_is_answered_with_the_original_response() {
    let stack = TestStack::start().await;
    let like = put_reaction(&stack, "alice", "k1", "LIKE").await;
    like.assert_status(200);
    put_reaction(&stack, "alice", "k2", "NONE")
        .await
        .assert_status(200);
    let retry = put_reaction(&stack, "alice", "k1", "LIKE").await;
    retry.assert_status(200);
    assert_eq!(retry.header("idempotent-replayed"), Some("true"));
    assert_eq!(retry.header("etag"), Some("\"1\""));
    assert_eq!(retry.json(), like.json());
}

#[tokio::test]
async fn the_same_key_with_another_body_is_422() {
    let stack = TestStack::start().await;
    put_reaction(&stack, "alice", "k1", "LIKE")
        .await
        .assert_status(200);
    put_reaction(&stack, "alice", "k1", "DISLIKE")
        .await
        .problem(422);
    assert_eq!(get_reaction(&stack, "alice").await["state"], "LIKE");
}

#[tokio::test]
async fn if_match_with_a_stale_version_is_412() {
    let stack = TestStack::start().await;
    put_reaction(&stack, "alice", "k1", "LIKE")
        .await
        .assert_status(200);
    let stale = stack
        .request("PUT", &format!("{ITEM}/reaction"), Some("alice"))
        .header("idempotency-key", "k2")
        .header("if-match", "\"0\"")
        .json(&json!({ "state": "DISLIKE" }))
        .send()
        .await;
    stale.problem(412);
    assert_eq!(stale.header("etag"), Some("\"1\""));
    let current = stack
        .request("PUT", &format!("{ITEM}/reaction"), Some("alice"))
        .header("idempotency-key", "k3")
        .header("if-match", "\"1\"")
        .json(&json!({ "state": "DISLIKE" }))
        .send()
        .await;
    assert_eq!(current.status, 200);
    assert_eq!(current.header("etag"), Some("\"2\""));
}

#[tokio::test]
async fn like_conveniences_set_like_and_none_with_optional_keys() {
    let stack = TestStack::start().await;
    let like = stack
        .request("PUT", &format!("{ITEM}/like"), Some("bob"))
        .send()
        .await;
    assert_eq!(like.status, 200);
    assert_eq!(like.json()["state"], "LIKE");
    let again = stack
        .request("PUT", &format!("{ITEM}/like"), Some("bob"))
        .send()
        .await;
    assert_eq!(again.json()["count_status"], "unchanged");
    let keyed = stack
        .request("DELETE", &format!("{ITEM}/like"), Some("bob"))
        .header("idempotency-key", "unlike-1")
        .send()
        .await;
    assert_eq!(keyed.json()["state"], "NONE");
    assert_eq!(keyed.json()["previous_state"], "LIKE");
    let replay = stack
        .request("DELETE", &format!("{ITEM}/like"), Some("bob"))
        .header("idempotency-key", "unlike-1")
        .send()
        .await;
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(get_reaction(&stack, "bob").await["version"], 2);
}

#[tokio::test]
async fn users_are_told_apart_by_their_token_only() {
    let stack = TestStack::start().await;
    let response = stack
        .request("PUT", &format!("{ITEM}/like"), Some("alice"))
        .header("x-user-id", "mallory")
        .send()
        .await;
    assert_eq!(response.status, 200);
    assert_eq!(get_reaction(&stack, "alice").await["state"], "LIKE");
    assert_untouched(&stack, "mallory").await;
}

#[tokio::test]
async fn requests_without_a_valid_token_are_401() {
    let stack = TestStack::start().await;
    let path = format!("{ITEM}/reaction");
    let expired = likes_local::jwt::JwtAuthorizer::from_env().mint("alice", 1_000, 60);
    let forged = likes_local::jwt::JwtAuthorizer::new("not-the-secret").mint(
        "alice",
        likes_tests::now_seconds(),
        60,
    );
    for authorization in [
        None,
        Some("Bearer garbage".to_owned()),
        Some(format!("Bearer {expired}")),
        Some(format!("Bearer {forged}")),
    ] {
        let mut request = stack
            .request("PUT", &path, None)
            .header("idempotency-key", "k1")
            .json(&json!({ "state": "LIKE" }));
        if let Some(value) = &authorization {
            request = request.header("authorization", value);
        }
        let response = request.send().await;
        assert_eq!(response.status, 401, "{authorization:?}");
    }
    assert_untouched(&stack, "alice").await;
}

#[tokio::test]
async fn bad_reaction_requests_are_4xx_problems_and_write_nothing() {
    let stack = TestStack::start().await;
    let path = format!("{ITEM}/reaction");
    let put = || stack.request("PUT", &path, Some("alice"));
    let cases: Vec<(&str, likes_tests::TestRequest, u16)> = vec![
        (
            "no idempotency key",
            put().json(&json!({"state": "LIKE"})),
            400,
        ),
        (
            "empty idempotency key",
            put()
                .header("idempotency-key", "")
                .json(&json!({"state": "LIKE"})),
            400,
        ),
        (
            "oversized idempotency key",
            put()
                .header("idempotency-key", &"k".repeat(256))
                .json(&json!({"state": "LIKE"})),
            400,
        ),
        (
            "non-printable idempotency key",
            put()
                .header("idempotency-key", "a\tb")
                .json(&json!({"state": "LIKE"})),
            400,
        ),
        (
            "malformed JSON",
            put()
                .header("idempotency-key", "k")
                .header("content-type", "application/json")
                .body("{\"state\": LIKE"),
            400,
        ),
        (
            "unknown state",
            put()
                .header("idempotency-key", "k")
                .json(&json!({"state": "LOVE"})),
            400,
        ),
        (
            "lower-case state",
            put()
                .header("idempotency-key", "k")
                .json(&json!({"state": "like"})),
            400,
        ),
        (
            "state not a string",
            put()
                .header("idempotency-key", "k")
                .json(&json!({"state": 1})),
            400,
        ),
        (
            "unknown field",
            put()
                .header("idempotency-key", "k")
                .json(&json!({"state": "LIKE", "user_id": "bob"})),
            400,
        ),
        ("no body", put().header("idempotency-key", "k"), 400),
        (
            "oversized body",
            put()
                .header("idempotency-key", "k")
                .header("content-type", "application/json")
                .body(format!(
                    "{{\"state\": \"LIKE\", \"pad\": \"{}\"}}",
                    "x".repeat(4096)
                )),
            413,
        ),
        (
            "not JSON",
            put()
                .header("idempotency-key", "k")
                .header("content-type", "text/plain")
                .body("LIKE"),
            415,
        ),
        (
            "bad If-Match",
            put()
                .header("idempotency-key", "k")
                .header("if-match", "1")
                .json(&json!({"state": "LIKE"})),
            400,
        ),
    ];
    for (case, request, status) in cases {
        let response = request.send().await;
        assert_eq!(
            response.status,
            status,
            "{case}: {}",
            String::from_utf8_lossy(&response.body)
        );
        response.problem(status);
    }
    assert_untouched(&stack, "alice").await;
}

#[tokio::test]
async fn bad_item_ids_are_400_problems() {
    let stack = TestStack::start().await;
    let long = "x".repeat(129);
    for item in [long.as_str(), "a%20b", "a$b", "caf%C3%A9", "%FF", "a%2Fb"] {
        for (method, path) in [
            ("PUT", "reaction"),
            ("GET", "reaction"),
            ("PUT", "like"),
            ("DELETE", "like"),
        ] {
            let response = stack
                .request(method, &format!("/v1/items/{item}/{path}"), Some("alice"))
                .header("idempotency-key", "k")
                .json(&json!({"state": "LIKE"}))
                .send()
                .await;
            response.problem(400);
        }
    }
    let max = "x".repeat(128);
    let ok = stack
        .request("PUT", &format!("/v1/items/{max}/like"), Some("alice"))
        .send()
        .await;
    assert_eq!(ok.status, 200);
    let encoded = stack
        .request("GET", "/v1/items/game%3A1/reaction", Some("alice"))
        .send()
        .await;
    assert_eq!(encoded.json()["item_id"], "game:1");
}

#[tokio::test]
async fn unknown_routes_are_404() {
    let stack = TestStack::start().await;
    for (method, path) in [
        ("GET", "/v1/items/game:1"),
        ("POST", "/v1/items/game:1/reaction"),
        ("GET", "/v2/users/me/liked-items"),
    ] {
        let response = stack.request(method, path, Some("alice")).send().await;
        assert_eq!(response.status, 404, "{method} {path}");
    }
}

async fn liked_page(stack: &TestStack, user: &str, query: &str) -> TestResponse {
    stack
        .request(
            "GET",
            &format!("/v1/users/me/liked-items{query}"),
            Some(user),
        )
        .send()
        .await
}

fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["item_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn liked_items_are_listed_newest_first_with_a_cursor() {
    let stack = TestStack::start().await;
    for n in 0..5 {
        stack.like("carol", &format!("game:{n}")).await;
        // liked_at has millisecond resolution: keep the order unambiguous.
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    }
    let unlike = stack
        .request("DELETE", "/v1/items/game:3/like", Some("carol"))
        .send()
        .await;
    assert_eq!(unlike.status, 200);
    stack.like("dave", "game:0").await;

    let first = liked_page(&stack, "carol", "?limit=2").await;
    assert_eq!(first.status, 200);
    let first = first.json();
    assert_eq!(ids(&first), ["game:4", "game:2"]);
    assert!(first["items"][0]["liked_at"]
        .as_str()
        .unwrap()
        .ends_with('Z'));
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    let second = liked_page(&stack, "carol", &format!("?limit=2&cursor={cursor}"))
        .await
        .json();
    assert_eq!(ids(&second), ["game:1", "game:0"]);
    assert_eq!(
        second["next_cursor"],
        Value::Null,
        "the last page has no cursor"
    );

    let all = liked_page(&stack, "carol", "").await.json();
    assert_eq!(ids(&all), ["game:4", "game:2", "game:1", "game:0"]);
    assert_eq!(all["next_cursor"], Value::Null);
}

#[tokio::test]
async fn bad_limits_and_cursors_are_400_problems() {
    let stack = TestStack::start().await;
    for n in 0..3 {
        stack.like("erin", &format!("game:{n}")).await;
    }
    let page = liked_page(&stack, "erin", "?limit=1").await.json();
    let cursor = page["next_cursor"].as_str().unwrap().to_owned();
    for limit in ["0", "101", "-1", "x", "1.5", ""] {
        liked_page(&stack, "erin", &format!("?limit={limit}"))
            .await
            .problem(400);
    }
    let whole = liked_page(&stack, "erin", "?limit=100").await;
    whole.assert_status(200);
    let mut liked = ids(&whole.json());
    liked.sort();
    assert_eq!(liked, ["game:0", "game:1", "game:2"]);
    assert_eq!(whole.json()["next_cursor"], Value::Null);
    // Another user's cursor, a tampered one, garbage.
    liked_page(&stack, "frank", &format!("?cursor={cursor}"))
        .await
        .problem(400);
    let mut tampered = cursor.clone().into_bytes();
    tampered[2] = if tampered[2] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    liked_page(&stack, "erin", &format!("?cursor={tampered}"))
        .await
        .problem(400);
    liked_page(&stack, "erin", "?cursor=not-a-cursor")
        .await
        .problem(400);
    assert_eq!(
        liked_page(&stack, "erin", &format!("?cursor={cursor}"))
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn a_body_that_is_not_a_json_object_is_400_and_writes_nothing() {
    let stack = TestStack::start().await;
    // serde would read `["LIKE"]` as `{"state": "LIKE"}`; the API takes objects only.
    for (n, body) in [r#"["LIKE"]"#, r#" ["LIKE"] "#, r#""LIKE""#, "null"]
        .into_iter()
        .enumerate()
    {
        stack
            .request("PUT", &format!("{ITEM}/reaction"), Some("alice"))
            .header("idempotency-key", &format!("array-{n}"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .problem(400);
    }
    assert_untouched(&stack, "alice").await;
    let liked = stack
        .request("GET", "/v1/users/me/liked-items", Some("alice"))
        .send()
        .await
        .json();
    assert_eq!(liked["items"], json!([]));
}

/// Every answer of these routes is about the caller, or an error: no cache may keep it.
#[tokio::test]
async fn per_user_answers_and_errors_are_private_no_store() {
    let stack = TestStack::start().await;
    let reaction = format!("{ITEM}/reaction");
    let long_sub = "u".repeat(129);
    let cases: Vec<(&str, likes_tests::TestRequest, u16)> = vec![
        (
            "set a reaction",
            stack
                .request("PUT", &reaction, Some("alice"))
                .header("idempotency-key", "k1")
                .json(&json!({"state": "LIKE"})),
            200,
        ),
        (
            "a replayed key",
            stack
                .request("PUT", &reaction, Some("alice"))
                .header("idempotency-key", "k1")
                .json(&json!({"state": "LIKE"})),
            200,
        ),
        (
            "read my reaction",
            stack.request("GET", &reaction, Some("alice")),
            200,
        ),
        (
            "like",
            stack.request("PUT", "/v1/items/game:2/like", Some("alice")),
            200,
        ),
        (
            "unlike",
            stack.request("DELETE", "/v1/items/game:2/like", Some("alice")),
            200,
        ),
        (
            "my liked items",
            stack.request("GET", "/v1/users/me/liked-items?limit=5", Some("alice")),
            200,
        ),
        (
            "the key reused for another state",
            stack
                .request("PUT", &reaction, Some("alice"))
                .header("idempotency-key", "k1")
                .json(&json!({"state": "DISLIKE"})),
            422,
        ),
        (
            "a stale If-Match",
            stack
                .request("PUT", &reaction, Some("alice"))
                .header("idempotency-key", "k2")
                .header("if-match", "\"7\"")
                .json(&json!({"state": "DISLIKE"})),
            412,
        ),
        (
            "an array body",
            stack
                .request("PUT", &reaction, Some("alice"))
                .header("idempotency-key", "k3")
                .header("content-type", "application/json")
                .body(r#"["DISLIKE"]"#),
            400,
        ),
        (
            "a bad item id",
            stack.request("GET", "/v1/items/a$b/reaction", Some("alice")),
            400,
        ),
        (
            "a bad cursor",
            stack.request("GET", "/v1/users/me/liked-items?cursor=x", Some("alice")),
            400,
        ),
        (
            "a body too large",
            stack
                .request("PUT", &reaction, Some("alice"))
                .header("idempotency-key", "k4")
                .header("content-type", "application/json")
                .body(format!("{{\"state\": \"{}\"}}", "x".repeat(2000))),
            413,
        ),
        (
            "not JSON",
            stack
                .request("PUT", &reaction, Some("alice"))
                .header("idempotency-key", "k5")
                .header("content-type", "text/plain")
                .body("LIKE"),
            415,
        ),
        (
            "a subject too long to be a user id",
            stack.request("GET", &reaction, Some(&long_sub)),
            401,
        ),
        (
            "a bad item id on a count",
            stack.request("GET", "/v1/items/a$b/like-count", Some("alice")),
            400,
        ),
        (
            "an array body on a batch of counts",
            stack
                .request("POST", "/v1/items/like-counts:batchGet", Some("alice"))
                .header("content-type", "application/json")
                .body(r#"[["game:1"]]"#),
            400,
        ),
        (
            "a browse page",
            stack
                .request("POST", "/v1/items:batchGet", Some("alice"))
                .json(&json!({"item_ids": ["game:1"]})),
            200,
        ),
        (
            "an array body on a browse page",
            stack
                .request("POST", "/v1/items:batchGet", Some("alice"))
                .header("content-type", "application/json")
                .body(r#"[["game:1"]]"#),
            400,
        ),
    ];
    for (case, request, status) in cases {
        let response = request.send().await;
        assert_eq!(
            response.status,
            status,
            "{case}: {}",
            String::from_utf8_lossy(&response.body)
        );
        if status >= 400 {
            response.problem(status);
        }
        assert_eq!(
            response.header("cache-control"),
            Some("private, no-store"),
            "{case}"
        );
    }
}

/// The write limit of [`a_burst_from_one_user_is_limited_and_writes_nothing`]'s stack: small,
/// so a burst meets it in a few requests, with leases of two tokens (one second of the rate).
const TEST_RATE: u32 = 2;
const TEST_BURST: usize = 6;

/// Write `i` of the burst, to its own item, on one of the three write routes (`route` taken
/// modulo 3), which all share the user's bucket.
async fn burst_write(stack: &TestStack, user: &str, route: usize, i: usize) -> TestResponse {
    let item = format!("/v1/items/game:burst-{i}");
    match route % 3 {
        0 => stack.request("PUT", &format!("{item}/like"), Some(user)),
        1 => stack
            .request("PUT", &format!("{item}/reaction"), Some(user))
            .header("idempotency-key", &format!("burst-{i}"))
            .json(&json!({ "state": "LIKE" })),
        _ => stack.request("DELETE", &format!("{item}/like"), Some(user)),
    }
    .send()
    .await
}

#[tokio::test]
async fn a_burst_from_one_user_is_limited_and_writes_nothing() {
    let stack = likes_tests::TestStack::builder()
        .parameters(&[
            ("WriteRatePerSecond", &TEST_RATE.to_string()),
            ("WriteBurst", &TEST_BURST.to_string()),
        ])
        .start()
        .await;
    // The bucket starts full: `burst` writes one after another to one route all go through,
    // however slowly each is answered. A route's container spends a lease for a second and
    // loses what it has not spent by then, but a lease is a second of the rate, so a slow
    // answer gives the bucket back at least what one container's lease loses. (Spread over
    // several containers, slow writes can lose more than refills: the limit only promises
    // the upper bound checked below.)
    let started = std::time::Instant::now();
    let mut answers = Vec::new();
    for i in 0..TEST_BURST {
        let answer = burst_write(&stack, "script", 0, i).await;
        assert_eq!(
            answer.status,
            200,
            "write {i} of a full bucket: {}",
            String::from_utf8_lossy(&answer.body)
        );
        answers.push(answer);
    }
    // Then a volley sent all at once, as a script does: it reaches the limiter within the
    // time of one request, so it outruns the refill whatever the machine's load.
    const VOLLEY: usize = 24;
    let volley = (TEST_BURST..TEST_BURST + VOLLEY).map(|i| burst_write(&stack, "script", i, i));
    answers.extend(futures_util::future::join_all(volley).await);
    let elapsed = started.elapsed();
    let writes = answers.len();

    // Every token spent was taken from the user's bucket, which started full: at most
    // `burst` plus the refill since the first write, `rate` a second, whole tokens only.
    let refilled = (f64::from(TEST_RATE) * elapsed.as_secs_f64()) as usize;
    let accepted = answers.iter().filter(|a| a.status == 200).count();
    assert!(
        accepted <= TEST_BURST + refilled,
        "{accepted} writes accepted in {elapsed:?}; the bucket allows {TEST_BURST} + {refilled}"
    );
    let limited: Vec<usize> = (0..writes).filter(|i| answers[*i].status == 429).collect();
    assert_eq!(
        limited.len() + accepted,
        writes,
        "every write is accepted or limited"
    );
    assert!(
        !limited.is_empty(),
        "{writes} writes in {elapsed:?} outran {TEST_BURST} + {TEST_RATE}/s"
    );
    for i in &limited {
        let answer = &answers[*i];
        let problem = answer.problem(429);
        assert_eq!(problem["type"], "/problems/rate-limited");
        // A token is due within 1/rate s: Retry-After rounds it up to whole seconds.
        assert_eq!(answer.header("retry-after"), Some("1"));
        assert_eq!(answer.header("ratelimit"), Some("\"default\";r=0;t=1"));
        assert_eq!(
            answer.header("ratelimit-policy"),
            Some("\"default\";q=6;w=3"),
            "q is the burst, w the seconds it takes to refill"
        );
        assert_eq!(answer.header("cache-control"), Some("private, no-store"));
        // Nothing written: the refused write's row was never created.
        let row = get_reaction_of(&stack, "script", &format!("game:burst-{i}")).await;
        assert_eq!(row["version"], 0, "write {i} was limited");
    }

    // Another user, at the same time, has a bucket of their own.
    let bystander = burst_write(&stack, "bystander", 0, 0).await;
    bystander.assert_status(200);
    assert_eq!(
        bystander.header("ratelimit"),
        None,
        "only refusals carry it"
    );

    // One token refills in 1/rate s.
    tokio::time::sleep(std::time::Duration::from_millis(
        1000 / u64::from(TEST_RATE),
    ))
    .await;
    let like = writes;
    burst_write(&stack, "script", 0, like)
        .await
        .assert_status(200);
    assert_eq!(
        get_reaction_of(&stack, "script", &format!("game:burst-{like}")).await["state"],
        "LIKE"
    );
}

async fn get_reaction_of(stack: &TestStack, user: &str, item: &str) -> Value {
    let response = stack
        .request("GET", &format!("/v1/items/{item}/reaction"), Some(user))
        .send()
        .await;
    response.assert_status(200);
    response.json()
}
