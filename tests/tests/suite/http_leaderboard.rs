//! `GET /v1/leaderboard` through the local front: the exact ranking from the Kinesis event
//! log, each event counted once however often it is delivered or its invocation dies.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use likes_local::faults::Recut;
use likes_tests::{clear_of_utc_midnight, clear_of_window_end, eventually, TestStack};
use serde_json::{json, Value};

async fn board(stack: &TestStack, query: &str) -> Value {
    // Public: no token.
    let response = stack
        .request("GET", &format!("/v1/leaderboard?{query}"), None)
        .send()
        .await;
    response.assert_status(200);
    assert_eq!(
        response.header("cache-control"),
        Some("public, max-age=5, s-maxage=5, stale-while-revalidate=5")
    );
    response.json()
}

fn items(board: &Value) -> Value {
    board["items"].clone()
}

#[tokio::test]
async fn duplicated_and_crashed_deliveries_keep_the_ranking_exact_with_ties_by_item_id() {
    // The hour's end is a day's at midnight.
    clear_of_window_end(
        likes_core::leaderboard::Window::hour_of,
        Duration::from_secs(120),
    )
    .await;
    let stack = TestStack::builder().refreshing_boards().start().await;
    // The items' namespace keeps every window, so each of its boards takes the faults too.
    stack
        .set_namespace_rules(
            "game",
            &json!({"leaderboard_windows": ["hour", "day", "week", "all"]}),
        )
        .await;
    // The event log holds some events twice (the publisher's batch delivered again), the
    // leaderboard gets batches twice, one invocation dies after its third UpdateItem of the
    // Leaderboard table (a score row of its intent, or the refresh lease it took, left held;
    // the likers entries it writes first are not counted) and the next one to write dies
    // right after its first score row took its intent (the intent is left half applied),
    // and the retries are cut shorter, then longer.
    stack.publisher().faults().duplicate_next_batches(2);
    let faults = stack.leaderboard().faults();
    faults.count_chunks_of(&stack.name("LeaderboardTable"));
    faults.duplicate_next_batches(3);
    faults.crash_after_chunks(3);
    faults.crash_after_chunks(1);
    faults.recut_next_retries([Recut::Shorter(2), Recut::Longer(5)]);
    // The board reads the log only once it holds every event: six items on fewer log shards
    // put two or more items, four or more score rows, in some shard's first batch, so the
    // crash after a third UpdateItem always finds one (a crash is played only by an
    // invocation whose count of UpdateItems reaches it exactly).
    stack.leaderboard().pause();
    let scores = [
        ("game:hot", 12),
        ("game:c", 3),
        ("game:b", 3),
        ("game:a", 2),
        ("game:d", 1),
        ("game:e", 1),
    ];
    // The items' score rows are on more than one board shard, so ranking merges shards.
    let shards: u32 = stack
        .stack
        .function_environment("LeaderboardFunction")
        .unwrap_or_else(|err| panic!("{err}"))["LEADERBOARD_SHARDS"]
        .parse()
        .expect("a number");
    let used: BTreeSet<u32> = scores
        .iter()
        .map(|(item, _)| likes_core::leaderboard::item_shard(item, shards))
        .collect();
    assert!(used.len() > 1, "{shards} board shards, items on {used:?}");
    for (item, likers) in scores {
        // A burst of likes on one item at once, as a popular item gets them.
        futures_util::future::join_all((0..likers).map(|n| {
            let stack = &stack;
            async move { stack.like(&format!("user{n}"), item).await }
        }))
        .await;
    }
    // An unlike lowers a score: b ties a at 2; e falls to 0 and leaves the board.
    for (user, item) in [("user0", "game:b"), ("user0", "game:e")] {
        stack
            .request("DELETE", &format!("/v1/items/{item}/like"), Some(user))
            .send()
            .await
            .assert_status(200);
    }
    stack.settle_events().await;
    stack.leaderboard().resume();
    let counters = stack.settle_leaderboard().await;
    assert!(
        counters.duplicate_deliveries >= 3 && counters.crashes >= 2 && !faults.armed(),
        "the faults were played: {counters:?}"
    );
    assert!(
        stack.publisher().counters().duplicate_deliveries >= 2,
        "the log holds duplicates"
    );

    let expected = json!([
        {"item_id": "game:hot", "like_count": 12},
        {"item_id": "game:c", "like_count": 3},
        {"item_id": "game:a", "like_count": 2},
        {"item_id": "game:b", "like_count": 2},
        {"item_id": "game:d", "like_count": 1},
    ]);
    // The refresher re-ranks the boards within about a second of the log being applied.
    let all = stack.leaderboard_until("window=all", &expected).await;
    assert_eq!(all["window"], "all");
    assert!(all["as_of"].is_string(), "as_of is stated: {all}");
    // The same answer with the route's cache policy.
    assert_eq!(items(&board(&stack, "window=all").await), expected);
    // Every event's time is today (UTC).
    let day = stack
        .leaderboard_until("window=day&limit=100", &expected)
        .await;
    assert_eq!(day["window"], "day");
    // The default window is all; a limit cuts inside a tie by item id.
    assert_eq!(
        items(&board(&stack, "limit=3").await),
        json!(expected.as_array().unwrap()[..3])
    );
    for window in ["hour", "day", "week", "all"] {
        stack
            .leaderboard_until(&format!("namespace=game&window={window}"), &expected)
            .await;
    }
}

#[tokio::test]
async fn bad_windows_and_limits_are_400_problems() {
    let stack = TestStack::start().await;
    for query in [
        "window=week",
        "window=",
        "limit=0",
        "limit=101",
        "limit=ten",
        "window=day&limit=-1",
    ] {
        stack
            .request("GET", &format!("/v1/leaderboard?{query}"), None)
            .send()
            .await
            .problem(400);
    }
    let empty = board(&stack, "window=day").await;
    assert_eq!(empty["items"], json!([]));
    assert_eq!(empty["as_of"], Value::Null);
}

/// Splits every open shard of the event log in two, as an on-demand log does as its load
/// grows: each child's id, by parent.
async fn split_every_open_log_shard(stack: &TestStack) -> BTreeMap<String, Vec<String>> {
    let stream = stack
        .stack
        .function_environment(likes_tests::LEADERBOARD_REFRESH_FUNCTION)
        .unwrap_or_else(|err| panic!("{err}"))["EVENTS_STREAM_ARN"]
        .clone();
    let kinesis = stack.kinesis();
    let list = || async {
        kinesis
            .list_shards()
            .stream_arn(&stream)
            .send()
            .await
            .unwrap()
            .shards
            .unwrap_or_default()
    };
    let shards = list().await;
    let mut children = BTreeMap::new();
    for shard in shards.iter().filter(|s| {
        s.sequence_number_range
            .as_ref()
            .is_some_and(|r| r.ending_sequence_number.is_none())
    }) {
        let range = shard.hash_key_range.as_ref().unwrap();
        let low: u128 = range.starting_hash_key.parse().unwrap();
        let high: u128 = range.ending_hash_key.parse().unwrap();
        kinesis
            .split_shard()
            .stream_arn(&stream)
            .shard_to_split(&shard.shard_id)
            .new_starting_hash_key((low + (high - low) / 2 + 1).to_string())
            .send()
            .await
            .unwrap();
        children.insert(shard.shard_id.clone(), Vec::new());
    }
    assert!(
        !children.is_empty(),
        "the log has open shards to split: {shards:?}"
    );
    for shard in list().await {
        if let Some(siblings) = shard
            .parent_shard_id
            .as_ref()
            .and_then(|parent| children.get_mut(parent))
        {
            siblings.push(shard.shard_id);
        }
    }
    children
}

/// A reshard of the event log (on demand, AWS splits shards as the load grows) closes the
/// shards it splits: their last progress must not hold the boards' `as_of` at the split for
/// ever, and the events after it, on the children, are scored once.
#[tokio::test]
async fn a_reshard_of_the_event_log_keeps_the_boards_as_of_moving() {
    let stack = TestStack::builder().refreshing_boards().start().await;
    stack.like("u0", "game:before").await;
    stack.settle_leaderboard().await;
    stack
        .leaderboard_until(
            "window=all",
            &json!([{"item_id": "game:before", "like_count": 1}]),
        )
        .await;

    split_every_open_log_shard(&stack).await;
    let split_at = likes_core::clock::now_ms();

    // Events after the split go to the children, read once their parents are done.
    for n in 0..8 {
        stack.like(&format!("v{n}"), "game:after").await;
    }
    stack.settle_leaderboard().await;
    stack
        .leaderboard_until(
            "window=all",
            &json!([
                {"item_id": "game:after", "like_count": 8},
                {"item_id": "game:before", "like_count": 1}
            ]),
        )
        .await;
    eventually(Duration::from_secs(30), async || {
        let as_of = board(&stack, "window=all").await["as_of"].clone();
        let as_of_ms = as_of
            .as_str()
            .and_then(|t| likes_core::clock::parse_rfc3339(t).ok());
        if as_of_ms.is_some_and(|t| t >= split_at) {
            return Ok(());
        }
        Err(format!(
            "as_of {as_of} stayed before the split at {split_at}"
        ))
    })
    .await;
}

/// A reshard while likes flow: a child shard the consumer has not read yet has no progress,
/// and its likes must hold the boards' `as_of` back until they are scored. One child of each
/// split shard is held back (as a slow start or a failing first batch would) while its
/// sibling scores on: every like that reached the log before a board's `as_of` is in the
/// score that board answers with, before and after the held children are read.
#[tokio::test]
async fn a_reshard_while_likes_flow_never_puts_the_boards_as_of_past_an_uncounted_like() {
    let stack = TestStack::builder().refreshing_boards().start().await;
    let item = "game:flowing";
    stack.like("w0", item).await;
    stack.settle_leaderboard().await;
    let liked_ms = likes_core::clock::now_ms();
    eventually(Duration::from_secs(30), async || {
        let board = board(&stack, "window=all").await;
        match as_of_ms(&board) {
            Some(as_of) if as_of > liked_ms => Ok(()),
            _ => Err(format!("the first like is not behind as_of yet: {board}")),
        }
    })
    .await;

    let reading = AtomicBool::new(true);
    // Every answer of the board while the log is resharded: its as_of and the item's score.
    let reads = async {
        let mut reads = Vec::new();
        while reading.load(Ordering::Relaxed) {
            let board = board(&stack, "window=all").await;
            let score = board["items"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|entry| entry["item_id"] == item)
                .map_or(0, |entry| entry["like_count"].as_i64().unwrap());
            if let Some(as_of) = as_of_ms(&board) {
                reads.push((as_of, score));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        reads
    };
    let flow = async {
        let children = split_every_open_log_shard(&stack).await;
        let held: BTreeSet<String> = children
            .values()
            .filter_map(|siblings| siblings.first().cloned())
            .collect();
        assert_eq!(held.len(), children.len(), "every split shard has children");
        for child in &held {
            stack.leaderboard().faults().stall_stream_shard(child);
        }
        for n in 1..=24 {
            stack.like(&format!("w{n}"), item).await;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        stack.settle_events().await;
        let likes = likes_of(&stack, item).await;
        let (on_held, scoring): (Vec<_>, Vec<_>) =
            likes.iter().partition(|(shard, _)| held.contains(shard));
        assert!(
            !on_held.is_empty() && !scoring.is_empty(),
            "likes went to held and to free children: {likes:?}"
        );
        // The free children score theirs and move on past the held likes (a heartbeat, once
        // quiet): their progress alone would put as_of past every held like.
        let last_held = on_held.iter().map(|(_, at)| *at).max().unwrap();
        let store = stack.leaderboard_store();
        eventually(Duration::from_secs(45), async || {
            let progress = store.progress().await.unwrap();
            let behind: Vec<_> = children
                .values()
                .flatten()
                .filter(|child| !held.contains(*child))
                .filter(|child| {
                    !progress
                        .iter()
                        .any(|p| &p.shard == *child && p.applied_through_ms > last_held)
                })
                .collect();
            match behind.is_empty() {
                true => Ok(()),
                false => Err(format!("free children behind the held likes: {behind:?}")),
            }
        })
        .await;
        // A few of the refresher's ticks (one a second) over that progress.
        tokio::time::sleep(Duration::from_secs(3)).await;
        for child in &held {
            stack.leaderboard().faults().resume_stream_shard(child);
        }
        stack.settle_leaderboard().await;
        stack
            .leaderboard_until("window=all", &json!([{"item_id": item, "like_count": 25}]))
            .await;
        let last = likes.iter().map(|(_, at)| *at).max().unwrap();
        eventually(Duration::from_secs(30), async || {
            let board = board(&stack, "window=all").await;
            match as_of_ms(&board) {
                Some(as_of) if as_of > last => Ok(()),
                _ => Err(format!(
                    "as_of did not pass the last like at {last}: {board}"
                )),
            }
        })
        .await;
        reading.store(false, Ordering::Relaxed);
    };
    let (reads, ()) = tokio::join!(reads, flow);

    let arrivals: Vec<i64> = likes_of(&stack, item)
        .await
        .into_iter()
        .map(|(_, at)| at)
        .collect();
    assert_eq!(arrivals.len(), 25);
    assert!(!reads.is_empty());
    for (as_of, score) in &reads {
        let before = arrivals.iter().filter(|at| **at < *as_of).count() as i64;
        assert!(
            *score >= before,
            "as_of {as_of} covers {before} likes on the log, but the board scores {score} \
             (arrivals {arrivals:?})"
        );
    }
}

/// Each like of `item` on the event log: its shard and its arrival (epoch ms).
async fn likes_of(stack: &TestStack, item: &str) -> Vec<(String, i64)> {
    stack
        .log_arrivals()
        .await
        .into_iter()
        .filter_map(|arrival| {
            let event = arrival.record.event()?;
            (event.item_id == item && event.like_delta > 0)
                .then_some((arrival.shard_id, arrival.arrival_ms))
        })
        .collect()
}

fn as_of_ms(board: &Value) -> Option<i64> {
    board["as_of"]
        .as_str()
        .and_then(|t| likes_core::clock::parse_rfc3339(t).ok())
}

/// The boards' `as_of` through a quiet spell: the refresher puts a heartbeat on each log
/// shard that carried nothing for a while, its consumer steps over it (the scores stay) and
/// its progress moves, so `as_of` moves past the last event instead of stopping there.
#[tokio::test]
async fn a_quiet_event_log_keeps_the_boards_as_of_moving_and_its_heartbeats_score_nothing() {
    clear_of_utc_midnight(Duration::from_secs(120)).await;
    let stack = TestStack::builder().refreshing_boards().start().await;
    for n in 0..6 {
        stack.like(&format!("q{n}"), "game:quiet").await;
    }
    stack.settle_leaderboard().await;
    let expected = json!([{"item_id": "game:quiet", "like_count": 6}]);
    stack.leaderboard_until("window=all", &expected).await;
    let last_like = likes_core::clock::now_ms();
    let as_of_ms = |board: &Value| {
        board["as_of"]
            .as_str()
            .and_then(|t| likes_core::clock::parse_rfc3339(t).ok())
    };

    let board = eventually(Duration::from_secs(45), async || {
        let board = board(&stack, "window=all").await;
        if as_of_ms(&board).is_some_and(|t| t > last_like + 2_000) {
            return Ok(board);
        }
        Err(format!("as_of stopped at the last event: {board}"))
    })
    .await;
    assert_eq!(items(&board), expected, "heartbeats score nothing");
    let day = self::board(&stack, "window=day").await;
    assert!(
        as_of_ms(&day).is_some_and(|t| t > last_like + 2_000),
        "today's board moves too: {day}"
    );
    assert_eq!(items(&day), expected);
    // The log holds heartbeats now, and still exactly the six events.
    assert_eq!(stack.events().await.len(), 6);
    stack.assert_counts_match_recount(&["game:quiet"]).await;
}

/// Each namespace ranks its own items, in the windows its rules keep (`hour` and `week`
/// where they name them, each a UTC window whose rows expire two days after it ends), and
/// the board over every namespace ranks them all; a window a namespace does not keep, or
/// one no board over every namespace has, is a 400, and a namespace whose like counts only
/// owners see has no public board (404).
#[tokio::test]
async fn each_namespace_ranks_its_own_items_in_the_windows_its_rules_keep() {
    use likes_core::leaderboard::Window;
    clear_of_window_end(Window::hour_of, Duration::from_secs(120)).await;
    let stack = TestStack::builder().refreshing_boards().start().await;
    for (namespace, rules) in [
        (
            "clip",
            json!({"leaderboard_windows": ["hour", "week", "all"]}),
        ),
        ("secret", json!({"like_count": "owner_only"})),
    ] {
        stack.set_namespace_rules(namespace, &rules).await;
    }
    // Past the consumer's catalog cache, so it reads the windows the rules now keep.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let likes = [
        ("clip:a", 3),
        ("post:a", 2),
        ("clip:b", 1),
        ("solo", 1),
        ("secret:a", 2),
    ];
    for (item, likers) in likes {
        for n in 0..likers {
            stack.like(&format!("fan{n}"), item).await;
        }
    }
    let entry = |item: &str, likes: u64| json!({"item_id": item, "like_count": likes});
    let clip = json!([entry("clip:a", 3), entry("clip:b", 1)]);
    for window in ["hour", "week", "all"] {
        let answer = stack
            .leaderboard_until(&format!("namespace=clip&window={window}"), &clip)
            .await;
        assert_eq!(
            (&answer["namespace"], &answer["window"]),
            (&json!("clip"), &json!(window))
        );
        assert!(answer["as_of"].is_string(), "{answer}");
    }
    stack
        .leaderboard_until("namespace=post&window=day", &json!([entry("post:a", 2)]))
        .await;
    stack
        .leaderboard_until("namespace=default&window=all", &json!([entry("solo", 1)]))
        .await;
    // Every namespace's, the hidden one's item left off.
    let every = json!([
        entry("clip:a", 3),
        entry("post:a", 2),
        entry("clip:b", 1),
        entry("solo", 1)
    ]);
    for window in ["day", "all"] {
        let answer = stack
            .leaderboard_until(&format!("window={window}"), &every)
            .await;
        assert!(answer.get("namespace").is_none(), "{answer}");
    }
    for query in [
        "namespace=clip&window=day",
        "namespace=post&window=hour",
        "namespace=post&window=week",
        "window=hour",
        "namespace=a%21b&window=all",
        "namespace=&window=all",
    ] {
        stack
            .request("GET", &format!("/v1/leaderboard?{query}"), None)
            .send()
            .await
            .problem(400);
    }
    stack
        .request("GET", "/v1/leaderboard?namespace=secret&window=all", None)
        .send()
        .await
        .problem(404);

    // The hour's score rows expire two days after the hour ends.
    let now = likes_core::clock::now_ms();
    let hour = Window::hour_of(now);
    let row = stack.score_row(&hour, "clip:a").await;
    let expires_at: i64 = row["expires_at"].as_n().expect("a TTL").parse().unwrap();
    let hour_ends = hour.start_ms().unwrap() / 1000 + 3_600;
    assert_eq!(expires_at, hour_ends + 2 * 86_400);
    assert_eq!(row["score"].as_n().map(String::as_str), Ok("3"));
}
