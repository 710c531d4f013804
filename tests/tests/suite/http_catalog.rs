//! What an item is, through the local HTTP front: a namespace's rules (read by anyone, set by
//! an admin), an item's owner (set by a platform service), what the owner hides and sees, and
//! the public count reads, which follow the rules and the owner within seconds, with no
//! recount.

use std::time::Duration;

use likes_core::namespace::{ADMIN_SCOPE, ITEMS_SCOPE};
use likes_tests::{TestResponse, TestStack};
use serde_json::{json, Value};

/// How long a rule change may take to reach the reads (the containers' catalog cache is a
/// second; the rest is the emulator).
const FOLLOWS_WITHIN: Duration = Duration::from_secs(10);

async fn send(
    stack: &TestStack,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> TestResponse {
    let mut request = stack.request(method, path, None);
    if let Some(token) = token {
        request = request.header("authorization", &format!("Bearer {token}"));
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().await
}

/// Reads `path` (public) until `done` holds for its answer; panics with the last one.
async fn read_until(stack: &TestStack, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = std::time::Instant::now();
    loop {
        let answer = send(stack, "GET", path, None, None).await;
        answer.assert_status(200);
        let body = answer.json();
        if done(&body) {
            return body;
        }
        assert!(
            started.elapsed() < FOLLOWS_WITHIN,
            "{path} never came to it: {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `caller` sets `item`'s `hide_like_count`; the answer as it came.
async fn hide_like_count(stack: &TestStack, item: &str, caller: &str, hide: bool) -> TestResponse {
    let path = format!("/v1/items/{item}/settings");
    let body = json!({ "hide_like_count": hide });
    send(stack, "PUT", &path, Some(&stack.token(caller)), Some(body)).await
}

async fn counts_of(stack: &TestStack, items: &[&str]) -> Value {
    let answer = send(
        stack,
        "POST",
        "/v1/items/like-counts:batchGet",
        None,
        Some(json!({ "item_ids": items })),
    )
    .await;
    answer.assert_status(200);
    answer.json()["counts"].clone()
}

#[tokio::test]
async fn namespace_rules_are_public_to_read_and_set_by_an_admin_only() {
    let stack = TestStack::start().await;
    let defaults = send(&stack, "GET", "/v1/namespaces/post", None, None).await;
    defaults.assert_status(200);
    assert_eq!(
        defaults.json(),
        json!({"namespace": "post", "dislikes": "public", "like_count": "public",
            "leaderboard_windows": ["day", "all"]})
    );
    assert!(defaults
        .header("cache-control")
        .unwrap()
        .starts_with("public"));
    let admin = stack.scoped_token("platform", ADMIN_SCOPE);
    let change = json!({"dislikes": "owner_only", "leaderboard_windows": ["all", "hour"]});
    // A user's token, and another scope's, are refused; nothing is set.
    for token in [stack.token("user"), stack.scoped_token("svc", ITEMS_SCOPE)] {
        let refused = send(
            &stack,
            "PUT",
            "/v1/namespaces/post",
            Some(&token),
            Some(change.clone()),
        )
        .await;
        // API Gateway's own answer to a token without the route's scope.
        refused.assert_status(403);
    }
    let set = send(
        &stack,
        "PUT",
        "/v1/namespaces/post",
        Some(&admin),
        Some(change),
    )
    .await;
    set.assert_status(200);
    let stored = json!({"namespace": "post", "dislikes": "owner_only", "like_count": "public",
        "leaderboard_windows": ["hour", "all"]});
    assert_eq!(set.json(), stored);
    // A later change keeps what it does not name.
    let set = send(
        &stack,
        "PUT",
        "/v1/namespaces/post",
        Some(&admin),
        Some(json!({"like_count": "owner_only"})),
    )
    .await;
    let mut expected = stored;
    expected["like_count"] = "owner_only".into();
    assert_eq!(set.json(), expected);
    read_until(&stack, "/v1/namespaces/post", |rules| *rules == expected).await;
    for (path, body) in [
        ("/v1/namespaces/po:st", json!({})),
        ("/v1/namespaces/post", json!({"dislike": "public"})),
        ("/v1/namespaces/post", json!({"dislikes": "hidden"})),
        (
            "/v1/namespaces/post",
            json!({"leaderboard_windows": ["month"]}),
        ),
    ] {
        send(&stack, "PUT", path, Some(&admin), Some(body))
            .await
            .problem(400);
    }
    send(
        &stack,
        "GET",
        &format!("/v1/namespaces/{}", "n".repeat(65)),
        None,
        None,
    )
    .await
    .problem(400);
    read_until(&stack, "/v1/namespaces/post", |rules| *rules == expected).await;
}

#[tokio::test]
async fn a_namespace_without_dislikes_refuses_new_ones_and_keeps_the_old() {
    let stack = TestStack::start().await;
    let dislike = |user: String, key: &'static str| {
        let stack = &stack;
        async move {
            stack
                .request("PUT", "/v1/items/clip:1/reaction", Some(&user))
                .header("idempotency-key", key)
                .json(&json!({"state": "DISLIKE"}))
                .send()
                .await
        }
    };
    dislike("early".into(), "k1").await.assert_status(200);
    stack
        .set_namespace_rules("clip", &json!({"dislikes": "disabled"}))
        .await;
    // Until the rule reaches the write function, dislikes are still taken: each try is a
    // new user's, and the one refused has nothing written.
    let started = std::time::Instant::now();
    let (late, refused) = loop {
        let late = format!("late{}", started.elapsed().as_millis());
        let answer = dislike(late.clone(), "k2").await;
        if answer.status == 409 || started.elapsed() > FOLLOWS_WITHIN {
            break (late, answer);
        }
        answer.assert_status(200);
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let problem = refused.problem(409);
    assert_eq!(problem["type"], "/problems/dislikes-disabled");
    let late = stack
        .request("GET", "/v1/items/clip:1/reaction", Some(&late))
        .send()
        .await;
    assert_eq!(late.json()["state"], "NONE", "nothing was written");
    // Likes are taken; the dislike set before still counts, and can be withdrawn.
    stack.like("fan", "clip:1").await;
    stack.settle().await;
    let counted = read_until(&stack, "/v1/items/clip:1/like-count", |c| {
        c["like_count"] == 1
    })
    .await;
    assert_eq!(
        counted["dislike_count"],
        Value::Null,
        "disabled dislikes are not shown"
    );
    assert_eq!(counted["dislike_count_hidden"], true);
    stack
        .request("PUT", "/v1/items/clip:1/reaction", Some("early"))
        .header("idempotency-key", "k3")
        .json(&json!({"state": "NONE"}))
        .send()
        .await
        .assert_status(200);
}

#[tokio::test]
async fn hidden_counts_are_null_to_the_public_and_exact_to_the_owner_and_show_again_with_no_recount(
) {
    let stack = TestStack::start().await;
    for user in ["a", "b", "c"] {
        stack.like(user, "post:1").await;
    }
    stack.like("a", "post:2").await;
    stack.settle().await;
    read_until(&stack, "/v1/items/post:1/like-count", |c| {
        c["like_count"] == 3
    })
    .await;

    // The namespace hides like counts: every public read says so, the same to everyone.
    stack
        .set_namespace_rules("post", &json!({"like_count": "owner_only"}))
        .await;
    let hidden = read_until(&stack, "/v1/items/post:1/like-count", |c| {
        c["like_count"].is_null()
    })
    .await;
    assert_eq!(hidden["like_count_hidden"], true);
    assert_eq!(hidden["dislike_count"], 0);
    assert!(hidden.get("dislike_count_hidden").is_none());
    let batch = counts_of(&stack, &["post:1", "post:2", "game:1"]).await;
    assert_eq!(batch["post:2"]["like_count"], Value::Null);
    assert_eq!(
        batch["game:1"],
        json!({"like_count": 0, "dislike_count": 0})
    );
    let browse = stack
        .request("POST", "/v1/items:batchGet", Some("a"))
        .json(&json!({"item_ids": ["post:1"]}))
        .send()
        .await
        .json();
    assert_eq!(browse["items"]["post:1"]["state"], "LIKE");
    assert_eq!(browse["items"]["post:1"]["like_count_hidden"], true);

    // Shown again: the same counts, nothing recounted.
    stack
        .set_namespace_rules("post", &json!({"like_count": "public"}))
        .await;
    let shown = read_until(&stack, "/v1/items/post:1/like-count", |c| {
        c["like_count"] == 3
    })
    .await;
    assert!(shown.get("like_count_hidden").is_none());

    // The owner hides one item's count: that item only, and its owner still sees it all.
    let service = stack.scoped_token("platform-svc", ITEMS_SCOPE);
    let owner = send(
        &stack,
        "PUT",
        "/v1/items/post:1/owner",
        Some(&service),
        Some(json!({"owner_id": "author"})),
    )
    .await;
    owner.assert_status(200);
    assert_eq!(
        owner.json(),
        json!({"item_id": "post:1", "owner_id": "author"})
    );
    let author = stack.token("author");
    let intruder = stack.token("b");
    hide_like_count(&stack, "post:1", "b", true)
        .await
        .problem(403);
    send(
        &stack,
        "GET",
        "/v1/items/post:1/stats",
        Some(&intruder),
        None,
    )
    .await
    .problem(403);
    let hid = hide_like_count(&stack, "post:1", "author", true).await;
    hid.assert_status(200);
    assert_eq!(
        hid.json(),
        json!({"item_id": "post:1", "hide_like_count": true})
    );
    let hidden = read_until(&stack, "/v1/items/post:1/like-count", |c| {
        c["like_count"].is_null()
    })
    .await;
    assert_eq!(hidden["like_count_hidden"], true);
    assert_eq!(
        counts_of(&stack, &["post:2"]).await["post:2"]["like_count"],
        1
    );
    let stats = send(&stack, "GET", "/v1/items/post:1/stats", Some(&author), None).await;
    stats.assert_status(200);
    assert_eq!(stats.header("cache-control"), Some("private, no-store"));
    let stats = stats.json();
    assert_eq!(
        (stats["like_count"].clone(), stats["dislike_count"].clone()),
        (json!(3), json!(0))
    );
    let read = send(
        &stack,
        "GET",
        "/v1/items/post:1/settings",
        Some(&author),
        None,
    )
    .await;
    assert_eq!(read.json()["hide_like_count"], true);

    // A transfer: the new owner decides, the old one no longer can.
    stack.set_item_owner("post:1", "editor").await;
    let owner = send(
        &stack,
        "GET",
        "/v1/items/post:1/owner",
        Some(&service),
        None,
    )
    .await;
    assert_eq!(owner.json()["owner_id"], "editor");
    hide_like_count(&stack, "post:1", "author", false)
        .await
        .problem(403);
    hide_like_count(&stack, "post:1", "editor", false)
        .await
        .assert_status(200);
    read_until(&stack, "/v1/items/post:1/like-count", |c| {
        c["like_count"] == 3
    })
    .await;
}

#[tokio::test]
async fn owners_are_registered_by_a_platform_service_only() {
    let stack = TestStack::start().await;
    let body = json!({"owner_id": "author"});
    for token in [
        stack.token("author"),
        stack.scoped_token("platform", ADMIN_SCOPE),
    ] {
        send(
            &stack,
            "PUT",
            "/v1/items/post:9/owner",
            Some(&token),
            Some(body.clone()),
        )
        .await
        // API Gateway's own answer to a token without the route's scope.
        .assert_status(403);
    }
    let service = stack.scoped_token("platform-svc", ITEMS_SCOPE);
    send(
        &stack,
        "GET",
        "/v1/items/post:9/owner",
        Some(&service),
        None,
    )
    .await
    .problem(404);
    for bad in [
        json!({"owner": "x"}),
        json!({"owner_id": ""}),
        json!({"owner_id": 7}),
    ] {
        send(
            &stack,
            "PUT",
            "/v1/items/post:9/owner",
            Some(&service),
            Some(bad),
        )
        .await
        .problem(400);
    }
    // Nobody owns it: nobody may change its settings.
    hide_like_count(&stack, "post:9", "author", true)
        .await
        .problem(403);
}

/// A rule reaches the live counts too: once the namespace hides its like counts, a push
/// after the next like and the counts sent on a new subscription show the like count as
/// hidden.
#[tokio::test]
async fn live_counts_follow_the_rules() {
    let stack = TestStack::builder().scheduled().start().await;
    let item = "post:live";
    let mut watcher = stack.watcher("watcher").await;
    watcher.subscribe(&[item]).await;
    let first = watcher
        .until(FOLLOWS_WITHIN, |m| m["type"] == "counts")
        .await;
    assert_eq!(first.last().unwrap().message["like_count"], 0);
    stack
        .set_namespace_rules("post", &json!({"like_count": "owner_only"}))
        .await;
    read_until(&stack, &format!("/v1/items/{item}/like-count"), |c| {
        c["like_count"].is_null()
    })
    .await;
    // Past the containers' catalog cache: the broadcaster reads the rule for the next push.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    stack.like("u1", item).await;
    let pushed = watcher
        .until(Duration::from_secs(30), |m| m["like_count_hidden"] == true)
        .await;
    let pushed = &pushed.last().unwrap().message;
    assert_eq!(pushed["like_count"], Value::Null);
    assert_eq!(pushed["dislike_count"], 0);
    let mut late = stack.watcher("late").await;
    late.subscribe(&[item]).await;
    let sent = late.until(FOLLOWS_WITHIN, |m| m["type"] == "counts").await;
    assert_eq!(sent.last().unwrap().message["like_count_hidden"], true);
}

/// The public board leaves off an item whose like count is hidden, its namespace's or by its
/// owner (a rank would tell what the count hides), and shows it again, unrecounted, when the
/// count is shown again.
#[tokio::test]
async fn the_public_board_leaves_off_the_items_whose_like_counts_are_hidden() {
    let stack = TestStack::builder().scheduled().start().await;
    for (item, likers) in [("post:top", 3), ("clip:mid", 2), ("game:low", 1)] {
        for n in 0..likers {
            stack.like(&format!("fan{n}"), item).await;
        }
    }
    let entry = |item: &str, likes: u64| json!({"item_id": item, "like_count": likes});
    let everything = json!([
        entry("post:top", 3),
        entry("clip:mid", 2),
        entry("game:low", 1)
    ]);
    stack.leaderboard_until("window=all", &everything).await;

    stack
        .set_namespace_rules("post", &json!({"like_count": "owner_only"}))
        .await;
    stack
        .leaderboard_until(
            "window=all&limit=2",
            &json!([entry("clip:mid", 2), entry("game:low", 1)]),
        )
        .await;
    stack.set_item_owner("clip:mid", "maker").await;
    hide_like_count(&stack, "clip:mid", "maker", true)
        .await
        .assert_status(200);
    stack
        .leaderboard_until("window=all", &json!([entry("game:low", 1)]))
        .await;
    stack
        .set_namespace_rules("post", &json!({"like_count": "public"}))
        .await;
    stack
        .leaderboard_until(
            "window=all",
            &json!([entry("post:top", 3), entry("game:low", 1)]),
        )
        .await;
}
