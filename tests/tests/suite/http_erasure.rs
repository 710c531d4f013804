//! Account erasure end to end through the local front: `DELETE /v1/users/me/reactions`
//! starts a job, the eraser removes the user's rows from the Erasures stream, paced, and the
//! counts drop them through the ordinary pipeline, ending equal to a recount.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use likes_core::ReactionState;
use likes_tests::{eventually, TestResponse, TestStack};
use serde_json::Value;

/// The template's `ErasureRowsPerSecond`.
const ROWS_PER_SECOND: u64 = 100;

async fn erase(stack: &TestStack, user: &str) -> TestResponse {
    stack
        .request("DELETE", "/v1/users/me/reactions", Some(user))
        .send()
        .await
}

async fn erasure(stack: &TestStack, user: &str, id: &str) -> TestResponse {
    stack
        .request("GET", &format!("/v1/users/me/erasure/{id}"), Some(user))
        .send()
        .await
}

/// A 202 with a running job: its id, checked against the `Location` and the cache policy.
fn started(response: &TestResponse) -> String {
    response.assert_status(202);
    assert_eq!(response.header("cache-control"), Some("private, no-store"));
    let body = response.json();
    assert_eq!(body["status"], "running", "{body}");
    let id = body["erasure_id"]
        .as_str()
        .expect("an erasure id")
        .to_owned();
    assert_eq!(
        response.header("location"),
        Some(format!("/v1/users/me/erasure/{id}").as_str())
    );
    id
}

/// `user` reacts to each item: LIKE on even positions, DISLIKE on odd ones.
async fn react_to_all(stack: &TestStack, user: &str, items: &[String]) {
    for (i, item) in items.iter().enumerate() {
        let state = if i % 2 == 0 {
            ReactionState::Like
        } else {
            ReactionState::Dislike
        };
        stack.react(user, item, state).await;
    }
}

async fn rows_of(stack: &TestStack, user: &str) -> Vec<String> {
    let user = likes_core::UserId::parse(user).unwrap();
    stack
        .reactions_store()
        .item_keys(&user, None, 100)
        .await
        .expect("Query of the user's rows")
}

async fn liked_items(stack: &TestStack, user: &str) -> Value {
    let response = stack
        .request("GET", "/v1/users/me/liked-items", Some(user))
        .send()
        .await;
    response.assert_status(200);
    response.json()["items"].clone()
}

#[tokio::test]
async fn a_heavy_user_erased_mid_traffic_leaves_every_count_equal_to_a_recount() {
    let stack = TestStack::start().await;
    let items: Vec<String> = (0..240).map(|i| format!("erase:{i:03}")).collect();
    let shared: Vec<String> = items.iter().step_by(4).cloned().collect();
    react_to_all(&stack, "heavy", &items).await;
    for other in ["ann", "bob", "cy"] {
        react_to_all(&stack, other, &shared).await;
    }
    stack.settle().await;
    stack.assert_counts_match_recount(&[]).await;
    assert_eq!(
        liked_items(&stack, "heavy").await.as_array().unwrap().len(),
        20
    );

    let asked = Instant::now();
    let id = started(&erase(&stack, "heavy").await);
    // Idempotent while it runs: the same job again, nothing new started. (Its cancelled
    // transaction must leave the Erasures stream readable, or the job would stop here.)
    assert_eq!(started(&erase(&stack, "heavy").await), id);

    // Other users keep flipping reactions on the same items while the job runs.
    let stop = AtomicBool::new(false);
    let traffic = async {
        let mut flips = 0usize;
        while !stop.load(Ordering::SeqCst) {
            let item = &shared[flips % shared.len()];
            let state = [
                ReactionState::Like,
                ReactionState::None,
                ReactionState::Dislike,
            ][flips % 3];
            stack
                .react(["ann", "bob", "cy"][flips % 3], item, state)
                .await;
            flips += 1;
            // About a hundred flips a second: the emulator serves everyone through one lock.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        flips
    };
    let job = async {
        let seen = stack
            .wait_for_erasure("heavy", &id, Duration::from_secs(60))
            .await;
        stop.store(true, Ordering::SeqCst);
        seen
    };
    let (flips, seen) = tokio::join!(traffic, job);
    let took = asked.elapsed();
    assert!(flips > 0, "other users reacted while the job ran");

    let done = seen.last().unwrap();
    assert_eq!(done["erasure_id"], id.as_str());
    assert_eq!(done["reactions_erased"], 240, "{done}");
    // Progress shows while it runs, and never goes back.
    let erased: Vec<u64> = seen
        .iter()
        .map(|b| b["reactions_erased"].as_u64().unwrap())
        .collect();
    assert!(erased.windows(2).all(|w| w[0] <= w[1]), "{erased:?}");
    assert!(
        seen.iter().any(|b| b["status"] == "running"
            && (1..240).contains(&b["reactions_erased"].as_u64().unwrap())),
        "a running job with part of its rows erased was seen: {erased:?}"
    );
    // Paced: 240 rows at ErasureRowsPerSecond take at least 2.4 s.
    assert!(
        took >= Duration::from_millis(240 * 1000 / ROWS_PER_SECOND),
        "the erasure took {took:?}"
    );

    assert!(rows_of(&stack, "heavy").await.is_empty());
    assert_eq!(liked_items(&stack, "heavy").await, Value::Array(vec![]));
    stack.settle().await;
    stack
        .assert_counts_match_recount(&items.iter().map(String::as_str).collect::<Vec<_>>())
        .await;
    // An item only the erased user reacted to counts nothing now.
    let count = stack.like_count("erase:002").await.json();
    assert_eq!(
        (count["like_count"].clone(), count["dislike_count"].clone()),
        (0.into(), 0.into())
    );

    // Done, the next request starts a new job, which finds nothing to erase.
    let again = started(&erase(&stack, "heavy").await);
    assert!(
        again > id,
        "erasure ids are time-ordered: {again} after {id}"
    );
    let seen = stack
        .wait_for_erasure("heavy", &again, Duration::from_secs(30))
        .await;
    assert_eq!(seen.last().unwrap()["reactions_erased"], 0);
}

#[tokio::test]
async fn bad_or_foreign_erasure_ids_are_refused_and_change_nothing() {
    let stack = TestStack::start().await;
    stack
        .react("mallory", "game:kept", ReactionState::Like)
        .await;
    stack.react("alice", "game:a", ReactionState::Like).await;
    let id = started(&erase(&stack, "alice").await);

    for malformed in [
        "x",
        "1764455190123",
        "1764455190123-00000000000000AB",
        "%23active",
    ] {
        let response = erasure(&stack, "mallory", malformed).await;
        let problem = response.problem(400);
        assert_eq!(problem["type"], "/problems/validation");
        assert_eq!(response.header("cache-control"), Some("private, no-store"));
    }
    // Someone else's job is no job of the caller's.
    let foreign = erasure(&stack, "mallory", &id).await;
    assert_eq!(foreign.problem(404)["type"], "/problems/not-found");
    assert_eq!(foreign.header("cache-control"), Some("private, no-store"));
    let unknown = erasure(&stack, "alice", "1764455190123-00000000000000ab").await;
    unknown.problem(404);
    assert_eq!(
        erasure(&stack, "mallory", "1764455190123-00000000000000ab")
            .await
            .status,
        404
    );
    // No token: API Gateway's own 401.
    assert_eq!(
        stack
            .request("DELETE", "/v1/users/me/reactions", None)
            .send()
            .await
            .status,
        401
    );

    let seen = stack
        .wait_for_erasure("alice", &id, Duration::from_secs(30))
        .await;
    assert_eq!(seen.last().unwrap()["reactions_erased"], 1);
    assert_eq!(
        rows_of(&stack, "mallory").await,
        vec!["game:kept".to_owned()]
    );
    assert!(rows_of(&stack, "alice").await.is_empty());
    stack.settle().await;
    stack
        .assert_counts_match_recount(&["game:a", "game:kept"])
        .await;
}

#[tokio::test]
async fn a_reaction_set_behind_the_sweep_is_erased_by_the_final_sweep() {
    let stack = TestStack::start().await;
    let items: Vec<String> = (100..250).map(|i| format!("b:{i}")).collect();
    react_to_all(&stack, "dora", &items).await;
    let id = started(&erase(&stack, "dora").await);
    // Once the first slice committed, the sweep is past every "a:" key.
    eventually(Duration::from_secs(30), async || {
        let body = erasure(&stack, "dora", &id).await.json();
        assert_eq!(
            body["status"], "running",
            "the job is still running: {body}"
        );
        if body["reactions_erased"].as_u64().unwrap() >= 100 {
            return Ok(());
        }
        Err(format!("no slice committed: {body}"))
    })
    .await;
    stack.react("dora", "a:0", ReactionState::Like).await;

    let seen = stack
        .wait_for_erasure("dora", &id, Duration::from_secs(30))
        .await;
    assert_eq!(seen.last().unwrap()["reactions_erased"], 151);
    assert!(rows_of(&stack, "dora").await.is_empty());
    stack.settle().await;
    stack.assert_counts_match_recount(&["a:0"]).await;
}

#[tokio::test]
async fn a_slice_that_crashed_mid_delete_is_resumed_and_the_job_ends_exact() {
    let stack = TestStack::start().await;
    let items: Vec<String> = (0..150).map(|i| format!("crash:{i:03}")).collect();
    react_to_all(&stack, "erin", &items).await;
    react_to_all(&stack, "fred", &items[..50]).await;
    // The first slice with rows to delete dies after its second BatchWriteItem (50 of its
    // 100 planned rows gone, no checkpoint); the mapping retries it from the same record.
    stack.eraser().faults().crash_after_chunks(2);
    let id = started(&erase(&stack, "erin").await);

    let seen = stack
        .wait_for_erasure("erin", &id, Duration::from_secs(60))
        .await;
    assert_eq!(stack.eraser().counters().crashes, 1, "the crash was played");
    assert!(!stack.eraser().faults().armed());
    assert_eq!(seen.last().unwrap()["reactions_erased"], 150);
    assert!(rows_of(&stack, "erin").await.is_empty());
    assert_eq!(rows_of(&stack, "fred").await.len(), 50);
    stack.settle().await;
    stack.assert_counts_match_recount(&[]).await;
}
