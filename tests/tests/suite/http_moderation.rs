//! Moderation end to end through the local front: a moderator (a token with the
//! `likes/moderate` scope) retracts a bot's reactions, which leave every count, likers list,
//! the leaderboard and the bot's liked list through the ordinary pipeline; a suspension
//! refuses the bot's writes until it is lifted; a removed item drops to zero everywhere and
//! refuses its writes and reads; every action is a record on the event log.

use std::time::Duration;

use likes_core::moderation::ModerationAction;
use likes_core::pipeline::LogRecord;
use likes_core::ReactionState;
use likes_tests::{eventually, liker_ids, TestRequest, TestResponse, TestStack};
use serde_json::{json, Value};

const MODERATOR: &str = "moderator";

/// A request with a moderator's token.
fn moderate(stack: &TestStack, method: &str, path: &str) -> TestRequest {
    stack.request(method, path, None).header(
        "authorization",
        &format!("Bearer {}", stack.moderator_token(MODERATOR)),
    )
}

async fn retract(stack: &TestStack, user: &str, body: &Value) -> TestResponse {
    moderate(
        stack,
        "POST",
        &format!("/v1/moderation/users/{user}/retractions"),
    )
    .json(body)
    .send()
    .await
}

/// A 202 with a job: its id, checked against the `Location` and the cache policy.
fn accepted(response: &TestResponse) -> (String, Value) {
    response.assert_status(202);
    assert_eq!(response.header("cache-control"), Some("private, no-store"));
    let body = response.json();
    let id = body["retraction_id"]
        .as_str()
        .expect("a retraction id")
        .to_owned();
    assert_eq!(
        response.header("location"),
        Some(format!("/v1/moderation/retractions/{id}").as_str())
    );
    (id, body)
}

async fn state_of(stack: &TestStack, user: &str, item: &str) -> Value {
    let response = stack
        .request("GET", &format!("/v1/items/{item}/reaction"), Some(user))
        .send()
        .await;
    response.assert_status(200);
    response.json()["state"].clone()
}

/// The honest users who like item `i` of the first twelve: `12 - i` of them, so the
/// twelve items rank by index, and none of the others has an honest like.
fn honest_likers(i: usize) -> Vec<String> {
    (0..12usize.saturating_sub(i))
        .map(|h| format!("h{h}"))
        .collect()
}

#[tokio::test]
async fn a_retracted_bots_likes_leave_counts_likers_and_the_leaderboard_as_if_it_never_liked() {
    let stack = TestStack::builder().refreshing_boards().start().await;
    let items: Vec<String> = (0..200).map(|i| format!("mod:{i:03}")).collect();
    for (i, item) in items.iter().enumerate() {
        for user in honest_likers(i) {
            stack.react(&user, item, ReactionState::Like).await;
        }
    }
    // The bot likes every item (and dislikes none) after the honest users.
    for item in &items {
        stack.react("bot", item, ReactionState::Like).await;
    }
    stack.settle().await;
    stack.settle_leaderboard().await;
    assert_eq!(
        liker_ids(&stack.likers_page("mod:000", "").await)[0],
        "bot",
        "the bot is on the list before it is retracted"
    );

    let (id, started) = accepted(
        &retract(
            &stack,
            "bot",
            &json!({"reason": "bought likes", "suspend": true}),
        )
        .await,
    );
    assert_eq!(started["status"], "running", "{started}");
    assert_eq!(started["requested_by"], MODERATOR);
    // The suspension holds from the request on: the bot writes nothing.
    let refused = stack
        .request("PUT", "/v1/items/mod:150/like", Some("bot"))
        .send()
        .await;
    assert_eq!(refused.problem(403)["type"], "/problems/suspended");
    let fresh = stack
        .request("PUT", "/v1/items/mod:fresh/like", Some("bot"))
        .send()
        .await;
    fresh.problem(403);
    assert_eq!(state_of(&stack, "bot", "mod:fresh").await, "NONE");

    let done = stack.wait_for_retraction(&id).await;
    assert_eq!(done["reactions_retracted"], 200, "{done}");
    assert_eq!(done["reason"], "bought likes");
    assert_eq!(state_of(&stack, "bot", "mod:007").await, "NONE");
    assert_eq!(stack.liked_items("bot").await, Vec::<Value>::new());

    stack.settle().await;
    stack.settle_events().await;
    stack.settle_leaderboard().await;
    stack.settle_leaderboard().await;
    stack
        .assert_counts_match_recount(&items.iter().map(String::as_str).collect::<Vec<_>>())
        .await;
    for (i, item) in items.iter().enumerate().step_by(7) {
        let count = stack.like_count(item).await.json();
        assert_eq!(
            count["like_count"],
            honest_likers(i).len(),
            "{item}: {count}"
        );
        let mut expected = honest_likers(i);
        expected.reverse();
        assert_eq!(
            liker_ids(&stack.likers_page(item, "").await),
            expected,
            "{item}'s likers, newest first"
        );
    }
    let board: Vec<Value> = (0..10)
        .map(|i| json!({"item_id": items[i], "like_count": 12 - i}))
        .collect();
    stack
        .leaderboard_until("window=all", &Value::Array(board))
        .await;

    // The log: every retracted flip says why, and the action says who, why and when.
    let records = stack.log_records().await;
    let retracted: std::collections::BTreeSet<String> = records
        .iter()
        .filter_map(|record| match record {
            LogRecord::Event(event) if event.user_id == "bot" && event.cause.is_some() => {
                assert_eq!(event.reason.as_deref(), Some("bought likes"));
                assert_eq!(event.moderation_id.as_deref(), Some(id.as_str()));
                assert_eq!(event.new_state, ReactionState::None);
                Some(event.item_id.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(retracted.len(), 200);
    let action = records
        .iter()
        .find_map(|record| match record {
            LogRecord::Moderation(action) if action.moderation_id == id => Some(action),
            _ => None,
        })
        .expect("the retraction is on the log");
    assert_eq!(action.action, ModerationAction::Retract);
    assert_eq!(
        (action.by.as_str(), action.user_id.as_deref()),
        (MODERATOR, Some("bot"))
    );
    assert_eq!(
        (action.reason.as_deref(), action.suspend),
        (Some("bought likes"), Some(true))
    );

    // Lifted, the bot writes again, and the lifting is on the log too.
    let lifted = moderate(&stack, "DELETE", "/v1/moderation/users/bot/suspension")
        .send()
        .await;
    lifted.assert_status(204);
    stack.like("bot", "mod:150").await;
    assert_eq!(state_of(&stack, "bot", "mod:150").await, "LIKE");
    eventually(Duration::from_secs(30), async || {
        let lifted = stack.log_records().await.into_iter().any(|record| {
            matches!(record, LogRecord::Moderation(action)
                if action.action == ModerationAction::LiftSuspension
                    && action.user_id.as_deref() == Some("bot")
                    && action.by == MODERATOR)
        });
        lifted
            .then_some(())
            .ok_or_else(|| "the lifted suspension is not on the log yet".to_owned())
    })
    .await;
}

#[tokio::test]
async fn moderation_needs_the_scope_and_refuses_bad_input_writing_nothing() {
    let stack = TestStack::start().await;
    for item in ["pair:a", "pair:b"] {
        stack.react("pair", item, ReactionState::Like).await;
    }
    let user_token = format!("Bearer {}", stack.token("someone"));
    for (method, path) in [
        ("POST", "/v1/moderation/users/pair/retractions"),
        (
            "GET",
            "/v1/moderation/retractions/1764455190123-00000000000000ab",
        ),
        ("DELETE", "/v1/moderation/users/pair/suspension"),
    ] {
        // API Gateway's own answers: no token 401, a token without the scope 403.
        let anonymous = stack
            .request(method, path, None)
            .json(&json!({"reason": "x"}))
            .send()
            .await;
        anonymous.assert_status(401);
        let unscoped = stack
            .request(method, path, None)
            .header("authorization", &user_token)
            .json(&json!({"reason": "x"}))
            .send()
            .await;
        unscoped.assert_status(403);
        assert_eq!(unscoped.json(), json!({"message": "Forbidden"}), "{path}");
    }

    let long = "x".repeat(201);
    for (user, body) in [
        ("pair", json!({"reason": ""})),
        ("pair", json!({"reason": "   "})),
        ("pair", json!({"reason": long})),
        ("pair", json!({"reason": "spam", "suspend": "yes"})),
        ("pair", json!({"reason": "spam", "item_id": "not an id"})),
        ("pair", json!({"reason": "spam", "item_id": null})),
        ("pair", json!({"reason": "spam", "extra": 1})),
        ("pair", json!({})),
        ("pair", json!(["spam"])),
        ("bad%0Aid", json!({"reason": "spam"})),
    ] {
        let refused = retract(&stack, user, &body).await;
        let problem = refused.problem(400);
        assert_eq!(problem["type"], "/problems/validation", "{body}: {problem}");
    }
    let malformed = moderate(&stack, "GET", "/v1/moderation/retractions/nope")
        .send()
        .await;
    malformed.problem(400);
    let unknown = moderate(
        &stack,
        "GET",
        "/v1/moderation/retractions/1764455190123-00000000000000ab",
    )
    .send()
    .await;
    unknown.problem(404);
    // Nothing was retracted by any of them.
    for item in ["pair:a", "pair:b"] {
        assert_eq!(state_of(&stack, "pair", item).await, "LIKE");
    }

    // A user with nothing to retract: done at once, with 0.
    let (_, nobody) = accepted(&retract(&stack, "nobody", &json!({"reason": "check"})).await);
    assert_eq!(
        (
            nobody["status"].clone(),
            nobody["reactions_retracted"].clone()
        ),
        (json!("done"), json!(0))
    );

    // One item's reaction only; the other stays.
    let (one, _) = accepted(
        &retract(
            &stack,
            "pair",
            &json!({"reason": "one fake", "item_id": "pair:a"}),
        )
        .await,
    );
    assert_eq!(
        stack.wait_for_retraction(&one).await["reactions_retracted"],
        1
    );
    assert_eq!(state_of(&stack, "pair", "pair:a").await, "NONE");
    assert_eq!(state_of(&stack, "pair", "pair:b").await, "LIKE");

    // A second request while one runs answers the running job (a suspension keeps it
    // running for a few seconds at least) and starts nothing.
    let (first, _) =
        accepted(&retract(&stack, "pair", &json!({"reason": "all", "suspend": true})).await);
    let (again, _) = accepted(&retract(&stack, "pair", &json!({"reason": "again"})).await);
    assert_eq!(again, first);
    let done = stack.wait_for_retraction(&first).await;
    assert_eq!(done["reactions_retracted"], 1, "{done}");
    assert_eq!(state_of(&stack, "pair", "pair:b").await, "NONE");
}

#[tokio::test]
async fn a_removed_viral_item_drops_to_zero_everywhere_and_refuses_its_writes_and_reads() {
    let stack = TestStack::builder()
        .refreshing_boards()
        .fire("PulseFunction")
        .start()
        .await;
    const ITEM: &str = "viral:removed";
    // More reactors than one page of any sweep or index: 150, a fifth of them disliking.
    let users: Vec<String> = (0..150).map(|u| format!("fan{u:03}")).collect();
    for (u, user) in users.iter().enumerate() {
        let state = if u % 5 == 0 {
            ReactionState::Dislike
        } else {
            ReactionState::Like
        };
        stack.react(user, ITEM, state).await;
        if u < 3 {
            stack.react(user, "kept:item", ReactionState::Like).await;
        }
    }
    stack.settle().await;
    stack.settle_leaderboard().await;
    stack.settle_leaderboard().await;
    stack
        .leaderboard_until(
            "window=all",
            &json!([
                {"item_id": ITEM, "like_count": 120},
                {"item_id": "kept:item", "like_count": 3},
            ]),
        )
        .await;

    let path = format!("/v1/moderation/items/{ITEM}");
    let unscoped = stack
        .request("DELETE", &path, Some("someone"))
        .json(&json!({"reason": "x"}))
        .send()
        .await;
    unscoped.assert_status(403);
    for body in [
        json!({}),
        json!({"reason": ""}),
        json!({"reason": "x", "more": 1}),
    ] {
        let refused = moderate(&stack, "DELETE", &path).json(&body).send().await;
        refused.problem(400);
    }
    moderate(&stack, "DELETE", "/v1/moderation/items/not%20an%20id")
        .json(&json!({"reason": "x"}))
        .send()
        .await
        .problem(400);
    // Nothing was removed by any of them.
    stack.like("late-fan", ITEM).await;
    stack.like_count(ITEM).await.assert_status(200);

    let removal = moderate(&stack, "DELETE", &path)
        .json(&json!({"reason": "counterfeit listing"}))
        .send()
        .await;
    let (id, started) = accepted(&removal);
    assert_eq!(started["item_id"], ITEM);
    assert!(started.get("user_id").is_none(), "{started}");
    // From the answer on, the item's writes and its own reads are refused.
    for (user, method, route) in [
        ("newcomer", "PUT", format!("/v1/items/{ITEM}/like")),
        ("fan001", "DELETE", format!("/v1/items/{ITEM}/like")),
        ("reader", "GET", format!("/v1/items/{ITEM}/likers")),
    ] {
        let refused = stack.request(method, &route, Some(user)).send().await;
        assert_eq!(
            refused.problem(410)["type"],
            "/problems/item-removed",
            "{route}"
        );
    }
    assert_eq!(
        stack.like_count(ITEM).await.problem(410)["type"],
        "/problems/item-removed"
    );
    assert_eq!(state_of(&stack, "newcomer", ITEM).await, "NONE");
    // A second removal answers the first.
    let again = moderate(&stack, "DELETE", &path)
        .json(&json!({"reason": "again"}))
        .send()
        .await;
    assert_eq!(accepted(&again).0, id);

    let done = stack.wait_for_retraction(&id).await;
    assert_eq!(done["reactions_retracted"], 151, "{done}");
    stack.settle().await;
    stack.settle_events().await;
    stack.settle_leaderboard().await;
    stack.settle_leaderboard().await;
    let recount = stack
        .assert_counts_match_recount(&[ITEM, "kept:item"])
        .await;
    assert_eq!(
        recount.get(ITEM).copied().unwrap_or_default(),
        Default::default()
    );
    let counts = stack
        .request("POST", "/v1/items/like-counts:batchGet", None)
        .json(&json!({"item_ids": [ITEM]}))
        .send()
        .await
        .json();
    assert_eq!(
        counts["counts"][ITEM],
        json!({"like_count": 0, "dislike_count": 0})
    );
    for user in ["fan000", "fan001", "fan149", "late-fan"] {
        assert_eq!(state_of(&stack, user, ITEM).await, "NONE", "{user}");
        let liked: Vec<Value> = stack.liked_items(user).await;
        assert!(
            liked.iter().all(|entry| entry["item_id"] != ITEM),
            "{user}: {liked:?}"
        );
    }
    stack
        .leaderboard_until(
            "window=all",
            &json!([{"item_id": "kept:item", "like_count": 3}]),
        )
        .await;
    let removed_flips = stack
        .events()
        .await
        .into_iter()
        .filter(|event| {
            event.item_id == ITEM
                && event.cause == Some(likes_core::moderation::Cause::Removed)
                && event.moderation_id.as_deref() == Some(id.as_str())
        })
        .map(|event| event.user_id)
        .collect::<std::collections::BTreeSet<_>>();
    assert_eq!(removed_flips.len(), 151);
}

/// What a suspension and a removal wait for rests on the API functions' `Timeout`: Lambda
/// stops a function then, so a write it admitted has landed within the timeout and the
/// second its last request may still be in flight.
#[test]
fn every_api_function_ends_before_a_moderation_stops_waiting_for_its_writes() {
    use likes_local::template::Template;
    let template = Template::load(&likes_local::template::default_path()).expect("template");
    let routes = template.http_routes().expect("the HTTP API's routes");
    assert!(!routes.is_empty());
    for route in routes {
        let timeout_s = template
            .function_property(&route.function, "Timeout")
            .and_then(serde_yaml::Value::as_i64)
            .unwrap_or_else(|| panic!("{} has a numeric Timeout", route.function));
        assert!(
            timeout_s * 1000 + 1000 <= likes_core::moderation::WRITES_LAND_WITHIN_MS,
            "{} runs for up to {timeout_s} s: WRITES_LAND_WITHIN_MS must cover it",
            route.function
        );
    }
}

/// A reaction to a removed item that the log has not shown yet (its user's stream shard
/// stalled at the publisher, as when the log lags behind a viral item): the removal does not
/// end until it found and retracted it, however long the log takes, and a second removal
/// reports the same job.
#[tokio::test]
async fn a_removal_waits_for_a_reaction_the_log_has_not_shown_yet() {
    // The pulse publishes the counts' as_of, which a removal ends on.
    let stack = TestStack::builder().fire("PulseFunction").start().await;
    const ITEM: &str = "game:removed-late";
    let publisher = stack.publisher();
    let late = publisher.shard_index("late");
    let early: Vec<String> = (0..)
        .map(|u| format!("early-{u}"))
        .filter(|user| publisher.shard_index(user) != late)
        .take(3)
        .collect();
    for user in &early {
        stack.react(user, ITEM, ReactionState::Like).await;
    }
    stack.react("late", "kept:late", ReactionState::Like).await;
    stack.settle_leaderboard().await;
    publisher.faults().stall_shard(late);
    // Admitted before the removal; its event waits at the publisher.
    stack.react("late", ITEM, ReactionState::Dislike).await;
    let path = format!("/v1/moderation/items/{ITEM}");
    let removal = moderate(&stack, "DELETE", &path)
        .json(&json!({"reason": "counterfeit listing"}))
        .send()
        .await;
    let (id, _) = accepted(&removal);
    // Well past the time every admitted write has landed, the log still shows three.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let meanwhile = moderate(&stack, "GET", &format!("/v1/moderation/retractions/{id}"))
        .send()
        .await
        .json();
    publisher.faults().resume_shard(late);
    let done = stack.wait_for_retraction(&id).await;
    assert_eq!(
        meanwhile["status"], "running",
        "the removal ended before the log showed every reaction: {meanwhile}"
    );
    assert_eq!(done["reactions_retracted"], 4, "{done}");
    let again = moderate(&stack, "DELETE", &path)
        .json(&json!({"reason": "again"}))
        .send()
        .await;
    assert_eq!(accepted(&again).0, id);
    stack.settle().await;
    for user in [early[0].as_str(), "late"] {
        assert_eq!(state_of(&stack, user, ITEM).await, "NONE", "{user}");
    }
    let recount = stack
        .assert_counts_match_recount(&[ITEM, "kept:late"])
        .await;
    assert_eq!(
        recount.get(ITEM).copied().unwrap_or_default(),
        Default::default()
    );
    let liked = stack.liked_items("late").await;
    assert_eq!(liked.len(), 1, "{liked:?}");
    assert_eq!(liked[0]["item_id"], "kept:late");
}

/// A write admitted just before a suspension that lands after it (a slow request the SDK
/// retries for up to the function's timeout, written here through the store as the handler
/// that admitted it writes): the retraction is not done until it took that one back too.
#[tokio::test]
async fn a_suspension_retracts_a_write_admitted_before_it_that_lands_late() {
    let stack = TestStack::start().await;
    stack.react("bot2", "game:s1", ReactionState::Like).await;
    let (id, _) =
        accepted(&retract(&stack, "bot2", &json!({"reason": "bot", "suspend": true})).await);
    tokio::time::sleep(Duration::from_secs(5)).await;
    stack.react("bot2", "game:s2", ReactionState::Like).await;
    let done = stack.wait_for_retraction(&id).await;
    assert_eq!(done["reactions_retracted"], 2, "{done}");
    stack.settle().await;
    for item in ["game:s1", "game:s2"] {
        assert_eq!(state_of(&stack, "bot2", item).await, "NONE", "{item}");
    }
    stack
        .assert_counts_match_recount(&["game:s1", "game:s2"])
        .await;
}
