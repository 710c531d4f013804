//! The rules the count reads are measured with, set through the HTTP API as a platform sets
//! them: the namespace's rules row (an admin's) and each item's owner row (a platform
//! service registers the owner, the owner hides the like count). The count reads read both
//! rows of every item; each hides one count, so an answer hiding both shows both were read.

use likes_core::namespace::Namespace;
use likes_core::ItemId;
use likes_tests::TestStack;
use serde_json::json;

/// Owns every item the reads read once the rules are set.
const OWNER: &str = "owner";

/// Disables dislikes in `namespace` (their count is hidden from the public) and has an owner
/// hide each of `items`' like count; panics unless a public read of `items` then hides both.
pub async fn set_rules(stack: &TestStack, namespace: &Namespace, items: &[ItemId]) {
    let rules = json!({ "dislikes": "disabled" });
    stack.set_namespace_rules(namespace.as_str(), &rules).await;
    let owner = stack.token(OWNER);
    for item in items {
        stack.set_item_owner(item.as_str(), OWNER).await;
        let path = format!("/v1/items/{item}/settings");
        let hide = json!({ "hide_like_count": true });
        stack.put_as(&owner, &path, &hide).await;
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
