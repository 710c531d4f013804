//! The rules the count reads are measured with, set through the HTTP API as a platform sets
//! them: the namespace's rules row (an admin's) and each item's owner row (a platform
//! service registers the owner, the owner hides the like count). The count reads read both
//! rows of every item; each hides one count, so an answer hiding both shows both were read.

use likes_core::namespace::{Namespace, ADMIN_SCOPE, ITEMS_SCOPE};
use likes_core::ItemId;
use likes_tests::TestStack;
use serde_json::{json, Value};

/// Owns every item the reads read once the rules are set.
const OWNER: &str = "owner";

/// Disables dislikes in `namespace` (their count is hidden from the public) and has an owner
/// hide each of `items`' like count; panics unless a public read of `items` then hides both.
pub async fn set_rules(stack: &TestStack, namespace: &Namespace, items: &[ItemId]) {
    let admin = stack.scoped_token("platform", ADMIN_SCOPE);
    let rules = json!({ "dislikes": "disabled" });
    let path = format!("/v1/namespaces/{}", namespace.as_str());
    put(stack, &path, &admin, rules).await;
    let service = stack.scoped_token("platform-svc", ITEMS_SCOPE);
    let owner = stack.token(OWNER);
    for item in items {
        let path = format!("/v1/items/{item}/owner");
        put(stack, &path, &service, json!({ "owner_id": OWNER })).await;
        let path = format!("/v1/items/{item}/settings");
        put(stack, &path, &owner, json!({ "hide_like_count": true })).await;
    }
    let read = stack
        .request("POST", "/v1/items/like-counts:batchGet", None)
        .json(&json!({ "item_ids": items }))
        .send()
        .await;
    read.assert_status(200);
    let counts = read.json()["counts"].clone();
    for item in items {
        let shown = &counts[item.as_str()];
        assert_eq!(
            (&shown["like_count_hidden"], &shown["dislike_count_hidden"]),
            (&json!(true), &json!(true)),
            "{item} is read with its rules: {shown}"
        );
    }
}

/// `PUT path` with `body` as the bearer of `token`, which must answer 200.
async fn put(stack: &TestStack, path: &str, token: &str, body: Value) {
    stack
        .request("PUT", path, None)
        .header("authorization", &format!("Bearer {token}"))
        .json(&body)
        .send()
        .await
        .assert_status(200);
}
