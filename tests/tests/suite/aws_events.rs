//! AWS's own event documents, as API Gateway (an HTTP API request past the JWT authorizer, a
//! public one, a WebSocket `$disconnect`), the event source mappings (a DynamoDB stream batch
//! in a tumbling window, a Kinesis batch) and EventBridge Scheduler deliver them
//! (`tests/fixtures/aws/`), each handed to the function the bootstrap builds for it (its
//! `Handler` in template.yaml, its environment): each reads the document and answers as
//! Lambda expects, with the effect it is for. The local fronts build their own events;
//! these hold the functions to what AWS sends.

use std::time::Duration;

use likes_core::leaderboard::Window;
use likes_tests::{eventually, TestStack};
use serde_json::{json, Value};

/// Hands the fixture `name` to the template's function `logical_id`, with a few seconds
/// to its deadline (a scheduled function ticks until then), and reads its answer.
async fn invoke(stack: &TestStack, logical_id: &str, name: &str) -> Value {
    let path = format!("{}/fixtures/aws/{name}", env!("CARGO_MANIFEST_DIR"));
    let event = std::fs::read(&path).unwrap_or_else(|err| panic!("{path}: {err}"));
    let function = stack
        .stack
        .function(logical_id)
        .unwrap_or_else(|err| panic!("{err}"));
    let mut context = lambda_runtime::Context::default();
    context.request_id = format!("fixture-{name}");
    context.invoked_function_arn = format!("local:{logical_id}");
    context.deadline = (likes_core::clock::now_ms() + 3_000) as u64;
    let answer = function
        .invoke(&event, context)
        .await
        .unwrap_or_else(|err| panic!("{logical_id} refused {name}: {err}"));
    serde_json::from_slice(&answer).unwrap_or_else(|err| panic!("{logical_id}'s answer: {err}"))
}

/// An HTTP API answer's status and JSON body.
fn http_answer(answer: &Value) -> (u64, Value) {
    let body = answer["body"].as_str().expect("a body");
    let body = serde_json::from_str(body).unwrap_or_else(|err| panic!("{body}: {err}"));
    (answer["statusCode"].as_u64().expect("a status"), body)
}

#[tokio::test]
async fn aws_event_documents_run_through_the_functions_the_bootstrap_builds() {
    let stack = TestStack::start().await;

    // A like past the JWT authorizer: the user is the claims' `sub`.
    let put = invoke(
        &stack,
        "PutReactionFunction",
        "apigw-v2-jwt-authorizer.json",
    )
    .await;
    let (status, body) = http_answer(&put);
    assert_eq!((status, &body["state"]), (200, &json!("LIKE")), "{put}");
    let mine = stack
        .request("GET", "/v1/items/fixture:1/reaction", Some("fixture-user"))
        .send()
        .await;
    mine.assert_status(200);
    assert_eq!(mine.json()["state"], "LIKE");

    // A like on the Reactions stream, in a window's final batch: counted, then read by a
    // public request (no authorizer).
    let window = invoke(
        &stack,
        "AggregatorFunction",
        "dynamodb-stream-tumbling-window.json",
    )
    .await;
    assert_eq!(window["batchItemFailures"], json!([]), "{window}");
    assert!(window["state"].is_object(), "{window}");
    let read = invoke(
        &stack,
        "GetLikeCountFunction",
        "apigw-v2-no-authorizer.json",
    )
    .await;
    let (status, counts) = http_answer(&read);
    assert_eq!(
        (status, &counts["item_id"], &counts["like_count"]),
        (200, &json!("fixture:2"), &json!(1)),
        "{read}"
    );

    // The event log: a like scored, a heartbeat stepped over, an unreadable record failed
    // by its sequence number, so Lambda retries from it.
    let log = invoke(&stack, "LeaderboardFunction", "kinesis.json").await;
    let unreadable = "49658861234567890123456789012345678901234567890123456818";
    assert_eq!(
        log["batchItemFailures"],
        json!([{ "itemIdentifier": unreadable }]),
        "{log}"
    );
    let score = stack.score_row(&Window::All, "fixture:3").await;
    assert_eq!(score["score"].as_n().map(String::as_str), Ok("1"));

    // The scheduler's tick re-ranks the board the like scored on.
    invoke(
        &stack,
        "LeaderboardRefreshFunction",
        "eventbridge-scheduler.json",
    )
    .await;
    eventually(Duration::from_secs(10), async || {
        let board = stack
            .request("GET", "/v1/leaderboard?namespace=fixture&window=all", None)
            .send()
            .await
            .json();
        let entry = json!({"item_id": "fixture:3", "like_count": 1});
        match board["items"].as_array() {
            Some(items) if items.contains(&entry) => Ok(()),
            _ => Err(format!("the board is {board}")),
        }
    })
    .await;

    // A WebSocket connection's end.
    let gone = invoke(
        &stack,
        "LiveDisconnectFunction",
        "apigw-websocket-disconnect.json",
    )
    .await;
    assert_eq!(gone["statusCode"], 200, "{gone}");
}
