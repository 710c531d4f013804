//! End to end through the local HTTP front: a reaction set and read back through every write
//! route, with its answer, a conditional write, and the caller told by their token only.
//! The item the `http_*` tests react to, and the calls that set and read a reaction on it,
//! are here for the others.

use likes_tests::{TestResponse, TestStack};
use serde_json::{json, Value};

pub(crate) const ITEM: &str = "/v1/items/game:1";

pub(crate) async fn put_reaction(
    stack: &TestStack,
    user: &str,
    key: &str,
    state: &str,
) -> TestResponse {
    stack
        .request("PUT", &format!("{ITEM}/reaction"), Some(user))
        .header("idempotency-key", key)
        .json(&json!({ "state": state }))
        .send()
        .await
}

pub(crate) async fn get_reaction(stack: &TestStack, user: &str) -> Value {
    let response = stack
        .request("GET", &format!("{ITEM}/reaction"), Some(user))
        .send()
        .await;
    assert_eq!(response.status, 200);
    response.json()
}

/// Nothing was written for `user`: the reaction reads NONE at version 0.
pub(crate) async fn assert_untouched(stack: &TestStack, user: &str) {
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
