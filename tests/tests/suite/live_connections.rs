//! Connections to the local WebSocket front with a real WebSocket client: cleanup of dropped
//! and gone connections, the management API answering the SDK as API Gateway does, the
//! token check at `$connect`, and `$connect`'s route throttle.

use std::time::Duration;

use likes_tests::live::Watcher;
use likes_tests::TestStack;
use serde_json::json;

use crate::live_support::ANSWER;

#[tokio::test]
async fn dropped_and_gone_connections_lose_their_rows() {
    let stack = TestStack::builder().scheduled().start().await;
    let item = "game:live-3";
    let mut dropped = stack.watcher("dropped").await;
    dropped.subscribe(&[item, "game:live-3b"]).await;
    assert_eq!(
        dropped.take(2, ANSWER).await.len(),
        2,
        "counts on subscribe"
    );
    assert_eq!(stack.rows("LiveConnectionsTable").await.len(), 1);
    assert_eq!(stack.rows("LiveSubscriptionsTable").await.len(), 2);
    // The client vanishes without a close frame: $disconnect removes its rows.
    dropped.drop_connection();
    let mut cleaned = false;
    for _ in 0..50 {
        if stack.rows("LiveConnectionsTable").await.is_empty()
            && stack.rows("LiveSubscriptionsTable").await.is_empty()
        {
            cleaned = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(cleaned, "the dropped connection's rows stayed");

    // A connection whose $disconnect was lost: its rows exist, API Gateway says 410.
    let store = stack.live_store();
    store
        .connect("ghost", "ghost-user", likes_core::clock::now_ms())
        .await
        .unwrap();
    let id = likes_core::ItemId::parse(item).unwrap();
    assert_eq!(
        store
            .subscribe("ghost", &[id], &stack.watching())
            .await
            .unwrap(),
        likes_store::Watch::Subscribed
    );
    let mut live = stack.watcher("live").await;
    live.subscribe(&[item]).await;
    live.next(ANSWER).await.expect("counts on subscribe");
    stack.like("u1", item).await;
    live.until(Duration::from_secs(30), |m| m["like_count"] == 1)
        .await;
    let mut removed = false;
    for _ in 0..50 {
        if store.connection("ghost").await.unwrap().is_none() {
            removed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(removed, "the push that met 410 removed the gone connection");
    let rows = stack.rows("LiveSubscriptionsTable").await;
    assert_eq!(
        rows.len(),
        1,
        "only the live watcher's subscription is left: {rows:?}"
    );
}

#[tokio::test]
async fn the_management_api_answers_the_sdk_as_api_gateway_does() {
    use aws_sdk_apigatewaymanagement::operation::post_to_connection::PostToConnectionError;
    use aws_sdk_apigatewaymanagement::primitives::Blob;

    let stack = TestStack::start().await;
    let endpoint = stack
        .stack
        .function_environment(likes_tests::live::BROADCAST_FUNCTION)
        .unwrap()["LIVE_CONNECTIONS_ENDPOINT"]
        .clone();
    assert_eq!(
        endpoint,
        format!("{}/live", stack.ws_url().replace("ws://", "http://"))
    );
    let client = aws_sdk_apigatewaymanagement::Client::from_conf(
        aws_sdk_apigatewaymanagement::config::Builder::from(&stack.stack.aws.sdk)
            .endpoint_url(&endpoint)
            .build(),
    );
    let mut watcher = stack.watcher("w").await;
    let connections = stack.rows("LiveConnectionsTable").await;
    let Some(aws_sdk_dynamodb::types::AttributeValue::S(id)) =
        connections[0].get("connection_id").cloned()
    else {
        panic!("a connection row: {connections:?}");
    };

    client
        .post_to_connection()
        .connection_id(&id)
        .data(Blob::new(r#"{"hello":1}"#))
        .send()
        .await
        .expect("a post to an open connection");
    assert_eq!(
        watcher.next(ANSWER).await.unwrap().message,
        json!({"hello": 1})
    );
    let described = client
        .get_connection()
        .connection_id(&id)
        .send()
        .await
        .expect("an open connection is described");
    assert!(described.connected_at().is_some());
    assert_eq!(
        described.identity().and_then(|i| i.source_ip()),
        Some("127.0.0.1")
    );

    client
        .delete_connection()
        .connection_id(&id)
        .send()
        .await
        .expect("an open connection is closed");
    assert!(
        watcher.next(Duration::from_secs(5)).await.is_none(),
        "closed"
    );
    for _ in 0..50 {
        if stack.rows("LiveConnectionsTable").await.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        stack.rows("LiveConnectionsTable").await.is_empty(),
        "$disconnect ran for the closed connection"
    );
    let gone = client
        .post_to_connection()
        .connection_id(&id)
        .data(Blob::new("late"))
        .send()
        .await
        .expect_err("a closed connection is gone");
    assert!(
        matches!(
            gone.as_service_error(),
            Some(PostToConnectionError::GoneException(_))
        ),
        "{gone:?}"
    );
    assert_eq!(gone.raw_response().map(|r| r.status().as_u16()), Some(410));
}

#[tokio::test]
async fn a_bad_token_is_refused_at_connect() {
    let stack = TestStack::start().await;
    let url = stack.ws_url();
    assert_eq!(Watcher::connect(&url, None).await.err(), Some(401));
    assert_eq!(
        Watcher::connect(&url, Some("not-a-jwt")).await.err(),
        Some(401)
    );
    let other_key = likes_local::jwt::JwtAuthorizer::new("another-secret").mint(
        "mallory",
        likes_tests::now_seconds(),
        60,
    );
    assert_eq!(
        Watcher::connect(&url, Some(&other_key)).await.err(),
        Some(401)
    );
    let expired = likes_local::jwt::JwtAuthorizer::from_env().mint(
        "late",
        likes_tests::now_seconds() - 120,
        60,
    );
    assert_eq!(
        Watcher::connect(&url, Some(&expired)).await.err(),
        Some(401)
    );
    assert!(stack.rows("LiveConnectionsTable").await.is_empty());
    // The header works as the query parameter does.
    let mut watcher = Watcher::connect_with_header(&url, &stack.token("alice"))
        .await
        .expect("a valid token in the header connects");
    watcher.subscribe(&["game:1"]).await;
    assert_eq!(
        watcher.next(ANSWER).await.unwrap().message["type"],
        "counts"
    );
    let rows = stack.rows("LiveConnectionsTable").await;
    assert_eq!(
        rows[0]["user_id"],
        aws_sdk_dynamodb::types::AttributeValue::S("alice".into())
    );
}

/// The issuer rotates its signing key while clients are connected: they stay connected and
/// keep their pushes; a token of the new key connects at once (`$connect` fetches the
/// issuer's keys again when a token names one it does not hold), as does one of the key
/// before, still listed; a second rotation withdraws the first key, and its tokens are
/// refused. No redeploy, no restart.
#[tokio::test]
async fn connects_follow_the_issuers_key_rotation() {
    let stack = TestStack::builder().scheduled().start().await;
    let url = stack.ws_url();
    let item = "game:rotation";
    let first_key = stack.token("early");
    let mut connected = stack.watcher("connected").await;
    connected.subscribe(&[item]).await;
    connected.next(ANSWER).await.expect("counts on subscribe");

    let rotated = stack.web_request("POST", "/local/keys/rotate").send().await;
    rotated.assert_status(200);
    assert_eq!(rotated.json()["kid"], "local-2");
    let keys = stack
        .web_request("GET", "/.well-known/jwks.json")
        .send()
        .await;
    let kids: Vec<_> = keys.json()["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|key| key["kid"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kids, ["local-1", "local-2"]);
    let second_key = stack.token("late");
    let mut late = Watcher::connect(&url, Some(&second_key))
        .await
        .expect("a token of the new key connects");
    late.subscribe(&[item]).await;
    late.next(ANSWER).await.expect("counts on subscribe");
    Watcher::connect(&url, Some(&first_key))
        .await
        .expect("a token of the key before, still listed, connects");
    stack.like("u1", item).await;
    for watcher in [&mut connected, &mut late] {
        watcher
            .until(Duration::from_secs(30), |m| m["like_count"] == 1)
            .await;
    }

    stack
        .web_request("POST", "/local/keys/rotate")
        .send()
        .await
        .assert_status(200);
    let third_key = stack.token("later");
    Watcher::connect(&url, Some(&third_key))
        .await
        .expect("a token of the newest key connects");
    assert_eq!(
        Watcher::connect(&url, Some(&first_key)).await.err(),
        Some(401),
        "the withdrawn key's tokens are refused"
    );
    stack.like("u2", item).await;
    connected
        .until(Duration::from_secs(30), |m| m["like_count"] == 2)
        .await;
}

/// A flood of connects meets `$connect`'s route throttle: past its burst and rate the
/// upgrade is refused with 429 before the token is even checked, as API Gateway throttles
/// the route, and the connections let in work.
#[tokio::test]
async fn a_flood_of_connects_meets_the_connect_route_cap() {
    const BURST: usize = 3;
    let stack = TestStack::builder()
        .parameters(&[
            ("PublicRouteRateLimit", "1"),
            ("PublicRouteBurstLimit", &BURST.to_string()),
        ])
        .start()
        .await;
    let url = stack.ws_url();
    let tokens: Vec<String> = (0..12).map(|n| stack.token(&format!("fan{n}"))).collect();
    let started = std::time::Instant::now();
    let attempts = futures_util::future::join_all(
        tokens
            .iter()
            .map(|token| Watcher::connect(&url, Some(token))),
    )
    .await;
    let most = BURST + started.elapsed().as_secs() as usize + 1;
    let (mut connected, refused): (Vec<_>, Vec<_>) = attempts.into_iter().partition(Result::is_ok);
    assert!(
        (BURST..=most).contains(&connected.len()),
        "{} connected, at most {most}",
        connected.len()
    );
    let statuses: Vec<Option<&u16>> = refused.iter().map(|r| r.as_ref().err()).collect();
    assert!(statuses.iter().all(|s| *s == Some(&429)), "{statuses:?}");
    let watcher = connected[0].as_mut().unwrap();
    watcher.subscribe(&["game:1"]).await;
    assert_eq!(
        watcher.next(ANSWER).await.unwrap().message["type"],
        "counts"
    );
}
