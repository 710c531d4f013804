//! Which score rows the leaderboard's score index holds, written through the consumer's
//! own writer: an item liked once (the long tail) keeps its rows out of the index, so its
//! like costs no index write; any later write ranks a row at its score, from a consumer
//! that knows the row or one that does not; and a refreshed board still lists the items
//! the index leaves out wherever its top reaches down to them. A shard's intent head stays
//! once done, pending no more, until the shard's next intent replaces it; one still pending
//! when its shard expires from the log is given up.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use likes_core::leaderboard::{item_shard, Board, Entry, ScoreDelta, Window};
use likes_core::reconcile::Period;
use likes_store::leaderboard::{Scored, SCORE_INDEX};
use likes_store::rows::attr::{BOARD, ITEM_ID, RANKED, RANKED_BOARD, SCORE};
use likes_store::LeaderboardStore;
use likes_tests::{eventually, TestStack};

/// Applies `likes` (item, delta) on `board` as one intent of log shard `shard`, on both
/// boards its time is on, as the leaderboard's consumer does.
async fn apply(board: &LeaderboardStore, shard: &str, at_ms: i64, likes: &[(&str, i64)]) {
    apply_on(board, shard, at_ms, likes, true).await
}

/// As [`apply`], on the day's board only where `all_time` is false: as an intent whose
/// events of an item cancel out all-time but fall on two days.
async fn apply_on(
    board: &LeaderboardStore,
    shard: &str,
    at_ms: i64,
    likes: &[(&str, i64)],
    all_time: bool,
) {
    let deltas = deltas_of(at_ms, likes, all_time);
    let intent = board
        .begin(shard, 1, &deltas, "1", at_ms)
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    board
        .complete(shard, &intent, None, &mut Scored::default())
        .await
        .unwrap_or_else(|err| panic!("{err}"));
}

/// An intent's deltas for `likes` (item, delta) at `at_ms`: on the day's board, and
/// all-time where `all_time`.
fn deltas_of(
    at_ms: i64,
    likes: &[(&str, i64)],
    all_time: bool,
) -> BTreeMap<(Window, String), ScoreDelta> {
    // Reconciliation's default epochs (five minutes).
    let epoch = Period {
        length_ms: 300_000,
        uncertainty_ms: 60_000,
    }
    .epoch(at_ms);
    let mut deltas = BTreeMap::new();
    for (item, delta) in likes {
        if all_time {
            deltas.insert(
                (Window::All, item.to_string()),
                ScoreDelta {
                    total: *delta,
                    by_epoch: [(epoch, *delta)].into(),
                    near_cuts: Default::default(),
                },
            );
        }
        deltas.insert(
            (Window::day_of(at_ms), item.to_string()),
            ScoreDelta {
                total: *delta,
                ..ScoreDelta::default()
            },
        );
    }
    deltas
}

/// What the score index holds for `items` on the `game` namespace's `window`: item, and
/// its key there.
async fn indexed(stack: &TestStack, window: &Window, items: &[&str]) -> BTreeMap<String, i64> {
    let shards = stack.leaderboard_store().board_shards();
    let mut found = BTreeMap::new();
    for shard in items
        .iter()
        .map(|item| item_shard(item, shards))
        .collect::<std::collections::BTreeSet<_>>()
    {
        let output = stack
            .dynamodb()
            .query()
            .table_name(stack.name("LeaderboardTable"))
            .index_name(SCORE_INDEX)
            .key_condition_expression("#board = :board")
            .expression_attribute_names("#board", RANKED_BOARD)
            .expression_attribute_values(":board", AttributeValue::S(game(window).shard_key(shard)))
            .send()
            .await
            .unwrap_or_else(|err| panic!("{err:?}"));
        for entry in output.items.unwrap_or_default() {
            let item = entry[ITEM_ID].as_s().expect("item_id").clone();
            if items.contains(&item.as_str()) {
                let ranked = entry[RANKED].as_n().expect("ranked").parse().expect("n");
                found.insert(item, ranked);
            }
        }
    }
    found
}

/// The `game` namespace's board of `window`, where these tests' items are.
fn game(window: &Window) -> Board {
    Board::of_item("game:", window.clone())
}

/// An item's score on `window`, read from its row.
async fn score(stack: &TestStack, window: &Window, item: &str) -> i64 {
    let row = stack.score_row(window, item).await;
    row[SCORE].as_n().expect("score").parse().expect("n")
}

#[tokio::test]
async fn a_once_liked_items_rows_stay_out_of_the_index_and_any_later_write_ranks_them() {
    let stack = TestStack::builder().start().await;
    // Two consumers, as two log shards' containers: each knows only the rows it wrote.
    let (a, b) = (stack.leaderboard_store(), stack.leaderboard_store());
    let now = likes_core::clock::now_ms();
    let items = [
        "game:once",
        "game:twice",
        "game:again",
        "game:pair",
        "game:down",
        "game:split",
    ];
    // A day row written before the item's all-time row: that row's first write, which
    // begins the item's rows, finds its day row begun.
    apply_on(&b, "shard-b0", now, &[("game:split", 1)], false).await;
    apply(
        &a,
        "shard-a1",
        now,
        &[
            ("game:once", 1),
            ("game:twice", 1),
            ("game:again", 1),
            ("game:pair", 2),
            ("game:down", 1),
            ("game:split", 1),
        ],
    )
    .await;
    // `a` writes again to a row it began; `b` to rows it has never seen, which exist, with
    // one like or two.
    apply(&a, "shard-a2", now, &[("game:again", 1)]).await;
    apply(
        &b,
        "shard-b1",
        now,
        &[("game:twice", 1), ("game:down", -1), ("game:pair", 2)],
    )
    .await;

    // All-time, `split` was liked once; on the day, its row took both writes, the second
    // from its all-time row's first.
    let split_on_the_day = [("game:split", 2)];
    for (window, split) in [
        (Window::All, &[][..]),
        (Window::day_of(now), &split_on_the_day[..]),
    ] {
        let expected: BTreeMap<String, i64> = [
            ("game:again", 2),
            ("game:down", 0),
            ("game:pair", 4),
            ("game:twice", 2),
        ]
        .iter()
        .chain(split)
        .map(|(item, ranked)| (item.to_string(), *ranked))
        .collect();
        assert_eq!(
            indexed(&stack, &window, &items).await,
            expected,
            "{window:?}: the index holds every row but the one written once with one like, at its score"
        );
        for item in items {
            let ranked = expected.get(item).copied();
            assert_eq!(
                ranked.unwrap_or(1),
                score(&stack, &window, item).await,
                "{window:?}: {item}'s index key is its score"
            );
        }
        // The board's top reaches down to one like, so the refresh reads the rows the
        // index leaves out: the once-liked item is listed, ties by item id.
        a.refresh([&game(&window)], &BTreeSet::new(), Some(now), now)
            .await
            .unwrap_or_else(|err| panic!("{err}"));
        let board = a
            .board(&game(&window), 100)
            .await
            .unwrap_or_else(|err| panic!("{err}"));
        let listed: Vec<(&str, i64)> = board
            .entries
            .iter()
            .map(
                |Entry {
                     item_id,
                     like_count,
                 }| (item_id.as_str(), *like_count),
            )
            .collect();
        let mut ranked: Vec<(&str, i64)> = [
            ("game:pair", 4),
            ("game:again", 2),
            ("game:twice", 2),
            ("game:once", 1),
        ]
        .into_iter()
        .chain(split.iter().copied())
        .collect();
        if split.is_empty() {
            ranked.push(("game:split", 1));
        }
        ranked.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(y.0)));
        assert_eq!(listed, ranked, "{window:?}");
    }
}

/// Where the index holds all but a few places of a top, a refresh reads from each board
/// shard only as many of the rows it leaves out as there are places left, the lowest item
/// ids (ties at one like rank by item id): the top is still exact.
#[tokio::test]
async fn a_top_with_few_places_left_for_once_liked_items_fills_them_by_item_id() {
    let stack = TestStack::builder().start().await;
    let board = stack.leaderboard_store();
    let now = likes_core::clock::now_ms();
    let twice: Vec<String> = (0..95).map(|i| format!("game:twice{i:03}")).collect();
    let once: Vec<String> = (0..40).map(|i| format!("game:once{i:03}")).collect();
    let likes: Vec<(&str, i64)> = twice
        .iter()
        .map(|item| (item.as_str(), 2))
        .chain(once.iter().map(|item| (item.as_str(), 1)))
        .collect();
    apply(&board, "shard-a1", now, &likes).await;
    // Each board shard holds more once-liked rows than the five places left.
    let shards = board.board_shards();
    for shard in 0..shards {
        let on_shard = once
            .iter()
            .filter(|item| item_shard(item, shards) == shard)
            .count();
        assert!(
            on_shard > 5,
            "board shard {shard} holds {on_shard} once-liked items"
        );
    }
    let mut expected: Vec<(String, i64)> = twice.iter().map(|item| (item.clone(), 2)).collect();
    expected.extend(once.iter().take(5).map(|item| (item.clone(), 1)));
    for window in [Window::All, Window::day_of(now)] {
        board
            .refresh([&game(&window)], &BTreeSet::new(), Some(now), now)
            .await
            .unwrap_or_else(|err| panic!("{err}"));
        let listed: Vec<(String, i64)> = board
            .board(&game(&window), 100)
            .await
            .unwrap_or_else(|err| panic!("{err}"))
            .entries
            .into_iter()
            .map(|entry| (entry.item_id, entry.like_count))
            .collect();
        assert_eq!(listed, expected, "{window:?}");
    }
}

/// A shard's intent head stays once its intent is done, pending no more (the progress holds
/// its number), until the shard's next intent replaces it; a head still pending refuses
/// another begin and keeps the shard from being retired, and a retirement takes a done head
/// with the progress.
#[tokio::test]
async fn a_done_intent_head_is_pending_no_more_until_the_next_intent_replaces_it() {
    let stack = TestStack::start().await;
    let board = stack.leaderboard_store();
    let shard = "shardId-000000000042";
    let at_ms = likes_core::clock::now_ms();
    let state = board.shard_state(shard).await.unwrap();
    assert!(state.pending.is_none() && state.intents == 0);

    let first = board
        .begin(
            shard,
            1,
            &deltas_of(at_ms, &[("game:head", 1)], true),
            "10",
            at_ms,
        )
        .await
        .unwrap();
    assert_eq!(
        board.shard_state(shard).await.unwrap().pending.map(|i| i.n),
        Some(1)
    );
    board
        .complete(shard, &first, None, &mut Scored::default())
        .await
        .unwrap();
    // Records after it that score nothing move the progress past the intent.
    board
        .advance(shard, Some("10"), "20", at_ms, 1)
        .await
        .unwrap();
    let state = board.shard_state(shard).await.unwrap();
    assert_eq!(
        (
            state.pending.map(|i| i.n),
            state.intents,
            state.through_seq.as_deref()
        ),
        (None, 1, Some("20")),
        "the done head is pending no more"
    );

    let deltas = deltas_of(at_ms, &[("game:head", 2)], true);
    let second = board.begin(shard, 2, &deltas, "30", at_ms).await.unwrap();
    assert!(
        board.begin(shard, 2, &deltas, "30", at_ms).await.is_err(),
        "a pending head refuses another begin"
    );
    assert!(
        !board.retire(shard, Some("20"), 1).await.unwrap(),
        "a pending intent keeps its shard"
    );
    assert!(
        !board.abandon(shard, Some("20"), 3).await.unwrap(),
        "only the intent pending is given up"
    );
    board
        .complete(shard, &second, Some("20"), &mut Scored::default())
        .await
        .unwrap();
    assert_eq!(score(&stack, &Window::All, "game:head").await, 3);

    assert!(board.retire(shard, Some("30"), 2).await.unwrap());
    let head = stack
        .dynamodb()
        .get_item()
        .table_name(stack.name("LeaderboardTable"))
        .key(BOARD, AttributeValue::S(format!("#intent#{shard}")))
        .key(ITEM_ID, AttributeValue::S("head".into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    assert_eq!(head.item, None, "the done head went with the shard");
}

/// A log shard that expired from the log with an intent still pending (its consumer died
/// between freezing the intent and moving its progress, and no record of the shard came
/// again to finish it) is retired all the same: the refresher gives the intent up, reported
/// as `LeaderboardIntentsAbandoned`, instead of retrying a retirement the pending head
/// refuses every second for ever. Reconciliation repairs the all-time board.
#[tokio::test]
async fn an_intent_left_pending_on_an_expired_log_shard_is_abandoned_and_the_shard_retired() {
    let metrics = likes_store::metrics::capture();
    let stack = TestStack::builder().refreshing_boards().start().await;
    let board = stack.leaderboard_store();
    // Closed and gone from the listing long ago: past every replay.
    let gone = "shardId-000000009998";
    let item = "game:abandoned";
    let three_days_ago = likes_core::clock::now_ms() - 3 * 86_400_000;
    board
        .advance(gone, None, "42", three_days_ago, 7)
        .await
        .unwrap();
    board
        .begin(
            gone,
            8,
            &deltas_of(three_days_ago, &[(item, 1)], true),
            "50",
            three_days_ago,
        )
        .await
        .unwrap();
    assert_eq!(
        board.shard_state(gone).await.unwrap().pending.map(|i| i.n),
        Some(8)
    );

    eventually(Duration::from_secs(30), async || {
        let progress = board.progress().await.unwrap();
        match progress.iter().any(|p| p.shard == gone) {
            false => Ok(()),
            true => Err(format!(
                "the expired shard's progress stayed, its intent pending: {progress:?}"
            )),
        }
    })
    .await;
    eventually(Duration::from_secs(5), async || {
        let abandoned: f64 = metrics
            .so_far()
            .iter()
            .filter(|report| report.namespace() == "Likes/Leaderboard")
            .flat_map(|report| report.values_of("LeaderboardIntentsAbandoned"))
            .sum();
        match abandoned {
            1.0 => Ok(()),
            n => Err(format!("LeaderboardIntentsAbandoned reported {n} times")),
        }
    })
    .await;
    assert_eq!(
        board.retired().await.unwrap(),
        BTreeSet::from(["9998".to_owned()]),
        "its marker waits for the cleaning pass"
    );
    let state = board.shard_state(gone).await.unwrap();
    assert!(
        state.pending.is_none() && state.through_seq.is_none(),
        "the head went with the progress"
    );
    let row = stack
        .dynamodb()
        .get_item()
        .table_name(stack.name("LeaderboardTable"))
        .key(
            BOARD,
            AttributeValue::S(Window::All.board_key(item_shard(item, board.board_shards()))),
        )
        .key(ITEM_ID, AttributeValue::S(item.into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    assert_eq!(row.item, None, "given up, not applied");
    drop(metrics.finish());
}
