//! Requests the local HTTP front refuses: no valid token, a bad body, header or item id, an
//! unknown route; each a 4xx (a problem+json where the API says so) that writes nothing.

use likes_tests::TestStack;
use serde_json::json;

use crate::http_reactions::{assert_untouched, ITEM};

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
    // Signed with the right key, but for another issuer or another audience, which API
    // Gateway's JWT authorizer refuses.
    let local = likes_local::jwt::JwtAuthorizer::from_env();
    let claims = |iss: &str, aud: &str| {
        local.sign(&json!({
            "sub": "alice", "exp": likes_tests::now_seconds() + 60, "iss": iss, "aud": aud,
        }))
    };
    let other_issuer = claims("https://issuer.example", likes_local::jwt::LOCAL_AUDIENCE);
    let other_audience = claims(likes_local::jwt::LOCAL_ISSUER, "another-app");
    for authorization in [
        None,
        Some("Bearer garbage".to_owned()),
        Some(format!("Bearer {expired}")),
        Some(format!("Bearer {forged}")),
        Some(format!("Bearer {other_issuer}")),
        Some(format!("Bearer {other_audience}")),
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
