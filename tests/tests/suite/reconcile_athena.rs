//! The compare in Athena (infra/athena/*.sql, as the reconcile function sends it), run by the
//! emulator's Athena in DuckDB over the data files of real local exports: it judges the
//! items and scores the function's own compare judges, lists only the drifted ones, fails
//! rather than half-reads a corrupt export, and carries a whole reconciliation run, paused
//! and resumed, and started over after a failed attempt, when the template selects it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use likes_core::clock::now_ms;
use likes_core::likers::{self, LikeAt};
use likes_core::pipeline::Counts;
use likes_core::reconcile::{judge, CountRowState, Verdict};
use likes_core::ItemId;
use likes_core::ReactionState::{Dislike, Like, None as Neutral};
use likes_reconcile::{
    AthenaConfig, AthenaJudge, Export, ExportReader, Judged, JudgedExports, JudgedLine, Judgement,
    ReconcileError, Step, ATTEMPTS,
};
use likes_store::reconciliation::{Phase, ReconciliationStore};
use likes_tests::exports::create_bucket;
use likes_tests::{unique_prefix, until, TestStack};

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
    lose_and_invent_likers(stack, ("exp.4_b-c", "erin"), ("place:2", "zed")).await;
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

/// Drops `lost`'s entry (item, user) from its likers list, as a lost like event leaves it,
/// and lists `invented` as a like given a day ago, as a lost unlike leaves it.
async fn lose_and_invent_likers(stack: &TestStack, lost: (&str, &str), invented: (&str, &str)) {
    let (item, user) = lost;
    let item = ItemId::parse(item).unwrap();
    stack
        .dynamodb()
        .delete_item()
        .table_name(stack.name("LikersTable"))
        .key(
            "bucket",
            AttributeValue::S(likers::bucket_key(&item, likers::bucket_of(user))),
        )
        .key("user_id", AttributeValue::S(user.into()))
        .send()
        .await
        .unwrap();
    let (item, user) = invented;
    let day_ago = now_ms() - 86_400_000;
    let like = LikeAt {
        row_created_ms: day_ago,
        op_id: 1,
        liked_at_ms: day_ago,
    };
    let update = likers::repair(&ItemId::parse(item).unwrap(), user, None, Some(like), 0, 0)
        .expect("an unlisted like is written");
    let written = likes_store::LikersStore::new(stack.dynamodb(), stack.name("LikersTable"))
        .apply(&update)
        .await
        .unwrap();
    assert!(written);
}

/// What the function's own compare makes of the same rows: each drifted item with its
/// recount, and how many were in sync. `rows` are every item's count (or score) rows.
fn function_verdicts(
    recount: &BTreeMap<ItemId, Counts>,
    rows: &BTreeMap<ItemId, Vec<CountRowState>>,
    cut: i64,
) -> (BTreeMap<ItemId, Counts>, u64) {
    let items: BTreeSet<_> = recount.keys().chain(rows.keys()).collect();
    let mut drifted = BTreeMap::new();
    let mut in_sync = 0;
    for item in items {
        let counted = recount.get(item).copied().unwrap_or_default();
        match judge(counted, rows.get(item).map_or(&[][..], Vec::as_slice), cut) {
            Verdict::InSync => in_sync += 1,
            Verdict::Deferred => panic!("nothing is near a cut in the future"),
            Verdict::Correct(_) | Verdict::Clamped(_) => {
                drifted.insert(item.clone(), counted);
            }
        }
    }
    (drifted, in_sync)
}

/// The drift lines of a result, and its totals by kind.
fn split(lines: Vec<JudgedLine>) -> (BTreeMap<ItemId, Counts>, BTreeMap<String, u64>) {
    let mut drifted = BTreeMap::new();
    let mut totals = BTreeMap::new();
    for line in lines {
        match line {
            JudgedLine::Drift { item, recount } => {
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
            liker @ JudgedLine::Liker { .. } => panic!("{liker:?} in a counts result"),
        }
    }
    (drifted, totals)
}

/// The users `item`'s likers list shows (its first page, which holds them all here).
async fn listed(stack: &TestStack, item: &str) -> BTreeSet<String> {
    stack.likers_page(item, "").await["items"]
        .as_array()
        .expect("a likers page")
        .iter()
        .map(|liker| liker["user_id"].as_str().unwrap().to_owned())
        .collect()
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
    let cut_ms = cut * period.length_ms;
    let inputs = JudgedExports {
        reactions: &exports.reactions,
        counts: &exports.counts,
        board: Some(&exports.board),
        likers: &exports.likers,
        cut_epoch: cut,
        last_epoch: cut + 1,
        settled_before_ms: cut_ms - period.uncertainty_ms,
    };
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
        count_rows.insert(item, rows.into_iter().map(|(_, row)| row).collect());
    }
    let (expected, in_sync) = function_verdicts(&recount.per_item, &count_rows, cut);
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
    let (expected, in_sync) = function_verdicts(&liked, &score_rows, cut);
    let (drifted, totals) =
        split(lines(&athena, result.scores.as_ref().unwrap(), Judgement::Scores).await);
    assert_eq!(drifted, expected);
    assert_eq!(
        drifted.keys().map(ItemId::as_str).collect::<Vec<_>>(),
        ["exp.4_b-c"]
    );
    assert_eq!(
        totals,
        BTreeMap::from([
            ("in_sync".to_owned(), in_sync),
            ("deferred".to_owned(), 0),
            ("drifted".to_owned(), 1),
        ])
    );

    // The likers: every pair the function's repair would write, and no other.
    let mut exported = recount.likes.clone().expect("the likes were kept");
    let mut expected = BTreeSet::new();
    let store = likes_store::LikersStore::new(stack.dynamodb(), stack.name("LikersTable"));
    let mut start = None;
    loop {
        let (entries, next) = store.liked_page(start).await.unwrap();
        for (item, user, listed) in entries {
            let export = exported.remove(&(item.clone(), user.clone()));
            if likers::repair(
                &item,
                &user,
                Some(listed),
                export,
                inputs.settled_before_ms,
                0,
            )
            .is_some()
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
    let mut unreadable = None;
    for line in lines(&athena, &result.likers, Judgement::Likers).await {
        match line {
            JudgedLine::Liker { item, user_id, .. } => {
                assert!(listed.insert((item, user_id)), "a pair listed twice");
            }
            JudgedLine::Total { kind, n } if kind == "unreadable" => unreadable = Some(n),
            other => panic!("{other:?} in a likers result"),
        }
    }
    assert_eq!(listed, expected);
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

#[tokio::test]
async fn a_run_judged_by_athena_corrects_counts_and_the_board_once_across_paused_invocations() {
    let stack = TestStack::builder()
        .for_reconciliation("athena")
        .refreshing_boards()
        .start()
        .await;
    let items = ["game:a1", "game:a2", "game:a3"];
    for u in 0..9 {
        stack.react(&format!("u{u}"), items[u % 3], Like).await;
    }
    stack.settle().await;
    stack.settle_leaderboard().await;
    // Likes nobody gave on two items' count rows, and a score that lost two likes.
    for item in &items[..2] {
        stack.edit_count_row(item, "D#0", 3).await;
    }
    stack.edit_all_time_score(items[2], -2).await;
    lose_and_invent_likers(&stack, (items[0], "u0"), (items[1], "zed")).await;
    let cut = stack.next_cut(0);
    until(stack.clear_of(cut)).await;
    // Likes from many users after the cut move every log shard's progress, and so the
    // board's `as_of`, past it.
    for n in 0..40 {
        stack.react(&format!("crowd{n}"), "game:crowd", Like).await;
    }
    stack.settle().await;
    stack.settle_leaderboard().await;

    // Each invocation has no time left past its first judged item: the compare pauses
    // after each and the next goes on from its checkpoint.
    let reconciler = stack.reconciler();
    let mut paused = 0;
    let give_up_at = now_ms() + 120_000;
    let report = loop {
        assert!(now_ms() < give_up_at, "the run did not finish in 120 s");
        match reconciler
            .run_at(Some(cut), true, now_ms(), &mut |_| {})
            .await
            .expect("an invocation")
        {
            Step::Reconciled(report) => break *report,
            Step::Comparing { .. } => paused += 1,
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    assert_eq!(report.recounted_by, "athena");
    assert_eq!(paused, 1, "two drifted items, one per invocation");
    assert_eq!(
        (
            report.items_drifted,
            report.items_corrected,
            report.items_already_corrected
        ),
        (2, 2, 0),
        "{report:?}"
    );
    assert_eq!(report.items_checked, 4, "{report:?}");
    assert!(!report.leaderboard_behind, "{report:?}");
    assert_eq!(report.leaderboard_corrected, 1, "{report:?}");
    assert_eq!(
        (report.likers_added, report.likers_removed),
        (1, 1),
        "{report:?}"
    );
    assert!(listed(&stack, items[0]).await.contains("u0"));
    assert!(!listed(&stack, items[1]).await.contains("zed"));
    stack.assert_counts_match_recount(&items).await;
    let score = stack
        .leaderboard_store()
        .all_time_row(items[2])
        .await
        .unwrap()
        .expect("a score row")
        .total
        .like;
    assert_eq!(score, 3);

    let rerun = reconciler
        .run_at(Some(cut), true, now_ms() + 60_000, &mut |_| {})
        .await
        .expect("the rerun finishes");
    let Step::Reconciled(rerun) = rerun else {
        panic!("the rerun stopped at {rerun:?}")
    };
    assert_eq!(
        (
            rerun.items_drifted,
            rerun.leaderboard_corrected,
            rerun.likers_added + rerun.likers_removed
        ),
        (0, 0, 0),
        "the corrections are part of what was applied before the cut now: {rerun:?}"
    );
    stack.assert_counts_match_recount(&items).await;
}

/// An attempt whose judgement fails (a data file of its export corrupt) starts the cut over
/// from new exports, and Athena runs the new attempt's statements afresh: the run completes
/// and corrects once.
#[tokio::test]
async fn a_failed_athena_attempt_starts_over_and_the_next_is_judged_afresh() {
    let stack = TestStack::builder()
        .for_reconciliation("athena")
        .refreshing_boards()
        .start()
        .await;
    let item = "game:retried";
    for u in 0..3 {
        stack.react(&format!("u{u}"), item, Like).await;
    }
    stack.settle().await;
    stack.edit_count_row(item, "D#0", 2).await;
    let cut = stack.next_cut(0);
    until(stack.clear_of(cut)).await;

    // Invocations with no time to wait, until the run has all its exports asked for.
    let reconciler = stack.reconciler();
    let runs = ReconciliationStore::new(stack.dynamodb(), stack.name("CountsTable"));
    let give_up_at = now_ms() + 60_000;
    let first = loop {
        assert!(
            now_ms() < give_up_at,
            "the run did not reach its exports in 60 s"
        );
        match reconciler
            .run_at(Some(cut), true, now_ms(), &mut |_| {})
            .await
        {
            Ok(_) | Err(ReconcileError::NotYetRestorable { .. }) => {}
            Err(err) => panic!("an invocation failed: {err}"),
        }
        let phase = runs.state().await.unwrap().map(|state| state.phase);
        if let Some(Phase::Comparing {
            export_arn,
            derived: Some(derived),
        }) = phase
        {
            if derived.exports.len() == derived.tables.len() {
                break export_arn;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let manifest = stack
        .dynamodb()
        .describe_export()
        .export_arn(&first)
        .send()
        .await
        .unwrap()
        .export_description
        .and_then(|d| d.export_manifest)
        .expect("a manifest");
    let bucket = stack
        .stack
        .function_environment("ReconcileFunction")
        .unwrap()["EXPORT_BUCKET"]
        .clone();
    let export = ExportReader::new(stack.s3())
        .open(&bucket, &manifest)
        .await
        .unwrap();
    for file in export.files.iter().filter(|f| f.item_count > 0) {
        stack
            .s3()
            .put_object()
            .bucket(&bucket)
            .key(&file.data_file_s3_key)
            .body(b"\x1f\x8b\x08\x00 not a gzip stream".to_vec().into())
            .send()
            .await
            .unwrap();
    }

    let mut failed = Vec::new();
    let report = loop {
        assert!(now_ms() < give_up_at + 120_000, "the run did not finish");
        match reconciler
            .run_at(Some(cut), true, now_ms() + 60_000, &mut |_| {})
            .await
        {
            Ok(Step::Reconciled(report)) => break *report,
            Ok(_) => {}
            Err(err) => failed.push(err),
        }
    };
    assert!(
        matches!(failed.as_slice(), [ReconcileError::Query { .. }]),
        "the first attempt failed on its corrupt export, and only it: {failed:?}"
    );
    assert_ne!(report.export_arn, first, "{report:?}");
    assert_eq!(
        (report.items_drifted, report.items_corrected),
        (1, 1),
        "{report:?}"
    );
    stack.assert_counts_match_recount(&[item]).await;
}
