//! The compare in Athena (infra/athena/*.sql, as the reconcile function sends it), run by the
//! emulator's Athena in DuckDB over the data files of real local exports: it judges the
//! items and scores the function's own compare judges, lists only the drifted ones, and fails
//! rather than half-reads a corrupt export.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use likes_core::clock::now_ms;
use likes_core::likers;
use likes_core::pipeline::Counts;
use likes_core::reconcile::{judge, subtotal_attributes, CountRowState, Period, Verdict};
use likes_core::ItemId;
use likes_core::ReactionState::{Dislike, Like, None as Neutral};
use likes_reconcile::{
    AthenaConfig, AthenaJudge, Export, ExportReader, Judged, JudgedExports, JudgedLine, Judgement,
    ReconcileError, ATTEMPTS,
};
use likes_store::reconciliation::ReconciliationStore;
use likes_tests::exports::create_bucket;
use likes_tests::{unique_prefix, TestStack};

use crate::reconcile_athena_runs::lose_and_invent_likers;

/// An Athena judge as the stack's reconcile function is configured for it.
fn athena_judge(stack: &TestStack) -> AthenaJudge {
    let environment = stack
        .stack
        .function_environment("ReconcileFunction")
        .unwrap();
    AthenaJudge::new(
        stack.athena(),
        stack.s3(),
        AthenaConfig {
            workgroup: environment["ATHENA_WORKGROUP"].clone(),
            database: environment["GLUE_DATABASE"].clone(),
            counts_table_arn: environment["COUNTS_TABLE_ARN"].clone(),
            leaderboard_table_arn: environment["LEADERBOARD_TABLE_ARN"].clone(),
            likers_table_arn: environment["LIKERS_TABLE_ARN"].clone(),
        },
    )
}

/// Polls the judgement to its end (at most 30 s).
async fn judged(
    athena: &AthenaJudge,
    run_id: &str,
    exports: &JudgedExports<'_>,
) -> Result<Judged, ReconcileError> {
    for _ in 0..300 {
        if let Some(judged) = athena.poll(run_id, exports).await? {
            return Ok(judged);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("Athena's judgement did not finish in 30 s");
}

/// Every line of a result.
async fn lines(athena: &AthenaJudge, location: &str, judgement: Judgement) -> Vec<JudgedLine> {
    let mut result = athena.lines(location, judgement).await.unwrap();
    let mut all = Vec::new();
    while let Some(line) = result.next().await.unwrap() {
        all.push(line);
    }
    all
}

/// The exports of one stack at one moment: its Reactions, Counts, Leaderboard and Likers
/// tables.
struct Exports {
    reactions: Export,
    counts: Export,
    board: Export,
    likers: Export,
}

impl Exports {
    /// The exports as a judgement at cut `cut` of `period` reads them.
    fn judged_at(&self, cut: i64, period: Period) -> JudgedExports<'_> {
        JudgedExports {
            reactions: &self.reactions,
            counts: &self.counts,
            board: Some(&self.board),
            likers: &self.likers,
            cut_epoch: cut,
            last_epoch: cut + 1,
            settled_before_ms: cut * period.length_ms - period.uncertainty_ms,
            removed: &[],
        }
    }
}

/// Reactions in every state (one a state the service never writes), a probe row and a
/// foreign row; counts, scores and likers settled, then put off by hand: game:1 counts three
/// likes too many, ghost:1 has count rows and no reaction, exp.4_b-c's score holds five
/// likes too many, erin's like of exp.4_b-c is missing from its likers (a lost event) and
/// zed is listed as liking place:2 (a lost unlike). Each table exported now.
async fn drifted_exports(stack: &TestStack) -> Exports {
    for (user, item, state) in [
        ("alice", "game:1", Like),
        ("bob", "game:1", Like),
        ("carol", "game:1", Dislike),
        ("dave", "game:1", Neutral),
        ("alice", "avatar:9", Dislike),
        ("bob", "avatar:9", Dislike),
        ("carol", "place:2", Like),
        ("carol", "place:2", Neutral),
        ("erin", "exp.4_b-c", Like),
        ("frank", "game:1", Dislike),
        ("frank", "game:1", Like),
    ] {
        stack.react(user, item, state).await;
    }
    likes_store::FreshnessStore::new(stack.dynamodb(), stack.name("CountsTable"))
        .probe(
            &stack.name("ReactionsTable"),
            &["#probe#7".to_owned()],
            now_ms(),
        )
        .await
        .unwrap();
    // Rows no writer of the service makes: one foreign, one a reaction in no known state.
    for (user, item, state) in [("import", "batch/7", "LIKE"), ("mallory", "game:1", "LOVE")] {
        stack
            .put_reaction_row(user, item, &[("state", AttributeValue::S(state.into()))])
            .await;
    }
    stack.settle().await;
    stack.settle_leaderboard().await;
    for (item, likes) in [("game:1", 3), ("ghost:1", 2)] {
        stack.edit_count_row(item, "D#0", likes).await;
    }
    stack.edit_all_time_score("exp.4_b-c", 5).await;
    first_written_after_the_first_cut(stack).await;
    lose_and_invent_likers(stack, ("exp.4_b-c", "erin"), ("place:2", "zed")).await;
    export_all(stack).await
}

/// Every table the judging reads, exported now: a judgement's tables are named by their
/// exports, so each cut judged needs exports of its own.
async fn export_all(stack: &TestStack) -> Exports {
    // The moment is in whole milliseconds; the emulator times writes finer, so a write in
    // the same millisecond may fall after it.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let at = now_ms();
    let bucket = create_bucket(&stack.s3()).await;
    let mut opened = Vec::new();
    for table in [
        "ReactionsTable",
        "CountsTable",
        "LeaderboardTable",
        "LikersTable",
    ] {
        let finished = stack
            .export_table(table, &bucket, &format!("athena/{table}"), at)
            .await;
        opened.push(
            ExportReader::new(stack.s3())
                .open(&bucket, finished.description.export_manifest().unwrap())
                .await
                .unwrap(),
        );
    }
    let [reactions, counts, board, likers] = <[Export; 4]>::try_from(opened).unwrap();
    Exports {
        reactions,
        counts,
        board,
        likers,
    }
}

/// Rows first written in an epoch after the cut the test judges first: a count row (which
/// applied nothing before the cut: in sync, there being no reaction), rows at the edges of
/// a later first epoch, the cut the test judges second (see below), and an all-time score row
/// that also took 2 likes from an epoch before its first (a lagging shard's), which it
/// applied before the cut though no reaction holds them: a drift.
async fn first_written_after_the_first_cut(stack: &TestStack) {
    let first = stack.reconcile_period().epoch(now_ms()) + 1000;
    // Rows whose first epoch opens at EDGE_CUT, or closes there, with changes near that cut
    // in the attributes a row keeps them in for its first epoch (`nf0`, `nf1`); and one
    // whose near changes are at the cut before, which a judgement at EDGE_CUT passes over.
    let edge = first + EDGE_CUT_AFTER;
    for (item, fe, near, likes) in [
        ("edge:opens", edge, ("nf0", 1), 1),
        ("edge:closes", edge - 1, ("nf1", 1), 2),
        ("edge:before", edge - 1, ("nf0", 1), 0),
    ] {
        stack
            .dynamodb()
            .put_item()
            .table_name(stack.name("CountsTable"))
            .item("item_id", AttributeValue::S(item.to_owned()))
            .item("shard", AttributeValue::S("D#3".to_owned()))
            .item("like_count", AttributeValue::N(likes.to_string()))
            .item("dislike_count", AttributeValue::N("0".to_owned()))
            .item("fe", AttributeValue::N(fe.to_string()))
            .item(near.0, AttributeValue::N(near.1.to_string()))
            .send()
            .await
            .unwrap();
    }
    let n = |value: i64| AttributeValue::N(value.to_string());
    let s = |value: &str| AttributeValue::S(value.to_owned());
    let (lagging, _) = subtotal_attributes(first - 1010);
    for (table, attributes) in [
        (
            "CountsTable",
            vec![
                ("item_id", s("late:count")),
                ("shard", s("D#5")),
                ("like_count", n(4)),
                ("dislike_count", n(0)),
            ],
        ),
        (
            "LeaderboardTable",
            vec![
                ("board", s(&stack.all_time_board("late:score"))),
                ("item_id", s("late:score")),
                ("score", n(5)),
                (lagging.as_str(), n(2)),
                ("bfl", n(2)),
            ],
        ),
    ] {
        let mut put = stack.dynamodb().put_item().table_name(stack.name(table));
        for (name, value) in attributes {
            put = put.item(name, value);
        }
        put.item("fe", n(first)).send().await.unwrap();
    }
}

/// The cut, this many epochs after the crafted rows' first epoch, where the edge rows'
/// first epoch opens.
const EDGE_CUT_AFTER: i64 = 10;

/// What the function's own compare makes of the same rows: each drifted item with its
/// recount, how many were in sync, and which it deferred. `rows` are every item's count
/// (or score) rows.
fn function_verdicts(
    recount: &BTreeMap<ItemId, Counts>,
    rows: &BTreeMap<ItemId, Vec<CountRowState>>,
    cut: i64,
) -> (BTreeMap<ItemId, Counts>, u64, BTreeSet<ItemId>) {
    let items: BTreeSet<_> = recount.keys().chain(rows.keys()).collect();
    let mut drifted = BTreeMap::new();
    let mut in_sync = 0;
    let mut deferred = BTreeSet::new();
    for item in items {
        let counted = recount.get(item).copied().unwrap_or_default();
        match judge(counted, rows.get(item).map_or(&[][..], Vec::as_slice), cut) {
            Verdict::InSync => in_sync += 1,
            Verdict::Deferred => {
                deferred.insert(item.clone());
            }
            Verdict::Correct(_) | Verdict::Clamped(_) => {
                drifted.insert(item.clone(), counted);
            }
        }
    }
    (drifted, in_sync, deferred)
}

/// The drift lines of a result, and its totals by kind.
fn split(lines: Vec<JudgedLine>) -> (BTreeMap<ItemId, Counts>, BTreeMap<String, u64>) {
    let mut drifted = BTreeMap::new();
    let mut totals = BTreeMap::new();
    for line in lines {
        match line {
            JudgedLine::Drift { item, recount, .. } => {
                assert!(
                    drifted.insert(item, recount).is_none(),
                    "an item listed twice"
                );
            }
            JudgedLine::Total { kind, n } => {
                totals.insert(kind, n);
            }
            JudgedLine::Unknown { item_id, rows } => {
                totals.insert(format!("unknown {item_id}"), rows);
            }
            liker @ (JudgedLine::Liker { .. }
            | JudgedLine::Unlisted { .. }
            | JudgedLine::Removed { .. }) => panic!("{liker:?} in a counts result"),
        }
    }
    (drifted, totals)
}

#[tokio::test]
async fn athena_judges_counts_and_scores_as_the_functions_compare_does() {
    let stack = TestStack::builder()
        .for_reconciliation("athena")
        .refreshing_boards()
        .start()
        .await;
    let exports = drifted_exports(&stack).await;
    // A cut after every write: what a row applied before it is all it holds.
    let period = stack.reconcile_period();
    let cut = period.epoch(now_ms()) + 1;
    let athena = athena_judge(&stack);
    let inputs = exports.judged_at(cut, period);
    let result = judged(&athena, &unique_prefix(), &inputs).await.unwrap();

    let recount = ExportReader::new(stack.s3())
        .recount_with_likes(&exports.reactions, |_| {})
        .await
        .unwrap();
    let mut count_rows = BTreeMap::new();
    for (item, rows) in ReconciliationStore::new(stack.dynamodb(), stack.name("CountsTable"))
        .count_rows()
        .await
        .unwrap()
    {
        count_rows.insert(item, rows.states());
    }
    let (expected, in_sync, deferred) = function_verdicts(&recount.per_item, &count_rows, cut);
    assert!(
        deferred.is_empty(),
        "nothing is near a cut after every write"
    );
    let (drifted, totals) = split(lines(&athena, &result.counts, Judgement::Counts).await);
    assert_eq!(drifted, expected);
    assert_eq!(
        drifted.keys().map(ItemId::as_str).collect::<Vec<_>>(),
        ["game:1", "ghost:1"]
    );
    let unknown: u64 = recount.unknown_states.iter().map(|row| row.rows).sum();
    assert_eq!(unknown, 1, "{:?}", recount.unknown_states);
    assert_eq!(
        totals,
        BTreeMap::from([
            ("in_sync".to_owned(), in_sync),
            ("deferred".to_owned(), 0),
            ("drifted".to_owned(), 2),
            ("rows".to_owned(), exports.reactions.summary.item_count),
            ("probes".to_owned(), recount.probes),
            ("foreign".to_owned(), recount.foreign_rows),
            ("unknown game:1".to_owned(), unknown),
        ])
    );
    assert!(
        recount.probes >= 1 && recount.foreign_rows == 1,
        "{recount:?}"
    );

    // The same tables exported again (a judgement's tables are named by their exports) and
    // judged at the cut that opens the edge rows' first epoch: Athena reads a row's changes
    // near the cuts opening and closing its first epoch as the function does, deferring
    // those two items and no other.
    let edge = ItemId::parse("edge:opens").unwrap();
    let edge_cut = count_rows[&edge][0]
        .first_epoch
        .expect("the row keeps its first epoch");
    let again = export_all(&stack).await;
    let at_edge = again.judged_at(edge_cut, period);
    let judged_at_edge = judged(&athena, &unique_prefix(), &at_edge).await.unwrap();
    let (expected, in_sync, deferred) = function_verdicts(&recount.per_item, &count_rows, edge_cut);
    assert_eq!(
        deferred.iter().map(ItemId::as_str).collect::<Vec<_>>(),
        ["edge:closes", "edge:opens"]
    );
    let (drifted, totals) = split(lines(&athena, &judged_at_edge.counts, Judgement::Counts).await);
    assert_eq!(drifted, expected);
    assert_eq!(
        (totals["in_sync"], totals["deferred"]),
        (in_sync, deferred.len() as u64)
    );

    let shards = stack.leaderboard_store();
    let (scores, whole) = shards.all_time_rows(|| false).await.unwrap();
    assert!(whole);
    let score_rows: BTreeMap<_, _> = scores
        .into_iter()
        .map(|(item, row)| (ItemId::parse(&item).unwrap(), vec![row]))
        .collect();
    let liked: BTreeMap<_, _> = recount
        .per_item
        .iter()
        .filter(|(_, counts)| counts.like_count > 0)
        .map(|(item, counts)| {
            let likes = Counts {
                like_count: counts.like_count,
                dislike_count: 0,
            };
            (item.clone(), likes)
        })
        .collect();
    let (expected, in_sync, deferred) = function_verdicts(&liked, &score_rows, cut);
    assert!(
        deferred.is_empty(),
        "nothing is near a cut after every write"
    );
    let (drifted, totals) =
        split(lines(&athena, result.scores.as_ref().unwrap(), Judgement::Scores).await);
    assert_eq!(drifted, expected);
    assert_eq!(
        drifted.keys().map(ItemId::as_str).collect::<Vec<_>>(),
        ["exp.4_b-c", "late:score"]
    );
    assert_eq!(
        totals,
        BTreeMap::from([
            ("in_sync".to_owned(), in_sync),
            ("deferred".to_owned(), 0),
            ("drifted".to_owned(), 2),
        ])
    );

    // The likers: every pair the function's repair would write, and no other.
    let mut exported = recount.likes.clone().expect("the likes were kept");
    let mut expected = BTreeSet::new();
    let store = likes_store::LikersStore::new(stack.dynamodb(), stack.name("LikersTable"));
    // And every bucket holding a liked entry that no count row of its item lists.
    let mut expected_unlisted = BTreeSet::new();
    let mut start = None;
    loop {
        let (entries, next) = store.liked_page(start).await.unwrap();
        for (item, user, listed) in entries {
            let bucket = likes_core::likers::bucket_of(&user);
            let buckets = stack.counts_store().liked_buckets(&item).await.unwrap();
            if !buckets.contains(&bucket) {
                expected_unlisted.insert((item.clone(), bucket));
            }
            let key = (item.clone(), user.clone());
            let export = exported.get(&key).copied();
            if export.is_some_and(|export| listed.order() >= export.order()) {
                exported.remove(&key);
            }
            if !likers::repair(
                &item,
                &user,
                Some(listed),
                export,
                inputs.settled_before_ms,
                0,
            )
            .is_empty()
            {
                expected.insert((item, user));
            }
        }
        match next {
            Some(next) => start = Some(next),
            None => break,
        }
    }
    expected.extend(exported.into_keys());
    let mut listed = BTreeSet::new();
    let mut unlisted = BTreeSet::new();
    let mut unreadable = None;
    for line in lines(&athena, &result.likers, Judgement::Likers).await {
        match line {
            JudgedLine::Liker { item, user_id, .. } => {
                assert!(listed.insert((item, user_id)), "a pair listed twice");
            }
            JudgedLine::Unlisted { item, bucket } => {
                assert!(unlisted.insert((item, bucket)), "a bucket listed twice");
            }
            JudgedLine::Total { kind, n } if kind == "unreadable" => unreadable = Some(n),
            other => panic!("{other:?} in a likers result (no item is removed)"),
        }
    }
    assert_eq!(listed, expected);
    assert_eq!(unlisted, expected_unlisted);
    assert_eq!(
        listed
            .iter()
            .map(|(item, user)| (item.as_str(), user.as_str()))
            .collect::<Vec<_>>(),
        [("exp.4_b-c", "erin"), ("place:2", "zed")]
    );
    assert_eq!(unreadable, Some(recount.unreadable_likes));
}

#[tokio::test]
async fn a_corrupt_data_file_fails_the_athena_judgement_after_its_retries() {
    let stack = TestStack::builder()
        .for_reconciliation("athena")
        .refreshing_boards()
        .start()
        .await;
    let exports = drifted_exports(&stack).await;
    let file = exports
        .reactions
        .files
        .iter()
        .find(|f| f.item_count > 0)
        .expect("a data file with rows");
    stack
        .s3()
        .put_object()
        .bucket(&exports.reactions.bucket)
        .key(&file.data_file_s3_key)
        .body(b"\x1f\x8b\x08\x00 not a gzip stream".to_vec().into())
        .send()
        .await
        .unwrap();
    let cut = stack.reconcile_period().epoch(now_ms()) + 1;
    let inputs = JudgedExports {
        reactions: &exports.reactions,
        counts: &exports.counts,
        board: None,
        likers: &exports.likers,
        cut_epoch: cut,
        last_epoch: cut + 1,
        settled_before_ms: 0,
        removed: &[],
    };

    match judged(&athena_judge(&stack), &unique_prefix(), &inputs).await {
        Err(ReconcileError::Query { step, failures }) => {
            // Both queries read the corrupt file; either may run out of attempts first.
            assert!(
                ["judge-counts", "judge-likers"].contains(&step.as_str()),
                "{step}"
            );
            assert_eq!(failures.len(), ATTEMPTS, "{failures:?}");
            assert!(failures.iter().all(|f| f.contains("gzip")), "{failures:?}");
        }
        other => panic!("a corrupt export was judged: {other:?}"),
    }
}
