//! The cache policy of the per-user routes through the local HTTP front: every answer and
//! every error is `private, no-store`.

use likes_tests::TestStack;
use serde_json::json;

use crate::http_reactions::ITEM;

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
