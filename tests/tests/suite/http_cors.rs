//! CORS through the local front, as API Gateway answers a page on another origin: the
//! template's `CorsConfiguration`, with the stack's web client origin allowed.

use likes_tests::{TestResponse, TestStack};

const PATH: &str = "/v1/items/cors:1/reaction";

#[tokio::test]
async fn a_preflight_from_the_allowed_origin_is_answered_before_any_authorizer() {
    let stack = TestStack::start().await;
    let origin = stack.stack.web_url();
    // No token: API Gateway answers the preflight itself.
    let answer = stack
        .request("OPTIONS", PATH, None)
        .header("origin", &origin)
        .header("access-control-request-method", "PUT")
        .header(
            "access-control-request-headers",
            "authorization,content-type,idempotency-key,if-match",
        )
        .send()
        .await;
    answer.assert_status(204);
    assert_allow_origin(&answer, Some(&origin));
    assert_lists(
        &answer,
        "access-control-allow-methods",
        &["GET", "PUT", "POST", "DELETE"],
    );
    assert_lists(
        &answer,
        "access-control-allow-headers",
        &[
            "authorization",
            "content-type",
            "idempotency-key",
            "if-match",
        ],
    );
    assert_eq!(answer.header("access-control-max-age"), Some("600"));
    assert_eq!(answer.header("access-control-allow-credentials"), None);
}

#[tokio::test]
async fn a_preflight_from_another_origin_gets_no_cors_headers() {
    let stack = TestStack::start().await;
    let answer = stack
        .request("OPTIONS", PATH, None)
        .header("origin", "https://elsewhere.example")
        .header("access-control-request-method", "PUT")
        .send()
        .await;
    answer.assert_status(204);
    let cors: Vec<_> = answer
        .headers
        .keys()
        .filter(|name| name.as_str().starts_with("access-control-"))
        .collect();
    assert!(
        cors.is_empty(),
        "CORS headers for a refused origin: {cors:?}"
    );
    // A plain OPTIONS is no preflight: no route has that method.
    stack
        .request("OPTIONS", PATH, None)
        .send()
        .await
        .assert_status(404);
}

#[tokio::test]
async fn an_answer_to_the_allowed_origin_exposes_the_headers_a_page_reads() {
    let stack = TestStack::start().await;
    let origin = stack.stack.web_url();
    let write = stack
        .request("PUT", PATH, Some("cora"))
        .header("origin", &origin)
        .header("idempotency-key", "k1")
        .json(&serde_json::json!({"state": "LIKE"}))
        .send()
        .await;
    write.assert_status(200);
    assert_allow_origin(&write, Some(&origin));
    assert_lists(
        &write,
        "access-control-expose-headers",
        &[
            "etag",
            "location",
            "retry-after",
            "ratelimit",
            "ratelimit-policy",
        ],
    );
    assert!(
        write.header("etag").is_some(),
        "the ETag the page keeps for If-Match"
    );
    // API Gateway's own answers carry them too, so a page can read a 401.
    let refused = stack
        .request("PUT", PATH, None)
        .header("origin", &origin)
        .send()
        .await;
    refused.assert_status(401);
    assert_allow_origin(&refused, Some(&origin));
    // Another origin's answer has none: its page cannot read it.
    let other = stack
        .request("GET", "/v1/items/cors:1/like-count", None)
        .header("origin", "https://elsewhere.example")
        .send()
        .await;
    other.assert_status(200);
    assert_allow_origin(&other, None);
}

/// The origin `answer` lets read it: `origin`, or none.
fn assert_allow_origin(answer: &TestResponse, origin: Option<&str>) {
    assert_eq!(answer.header("access-control-allow-origin"), origin);
}

/// `header` of `answer` is a comma-separated list holding each of `expected`.
fn assert_lists(answer: &TestResponse, header: &str, expected: &[&str]) {
    let list = answer.header(header).unwrap_or_default();
    for value in expected {
        assert!(
            list.split(',').any(|v| v == *value),
            "{value} not in {header}: {list:?}"
        );
    }
}
