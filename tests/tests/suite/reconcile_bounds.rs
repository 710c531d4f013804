//! Rows bounded over a deployment's life: a busy item's count and score rows hold no
//! subtotal older than the horizon while no run completes, and a gone shard leaves no
//! progress, watermark or intent number behind.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use likes_core::clock::now_ms;
use likes_core::ReactionState::Like;
use likes_tests::{eventually, until, TestStack};

use crate::reconcile_support::{reconcile, subtotal_epochs};

/// While no run completes (every export fails), the count rows of a busy item still hold no
/// subtotal older than the horizon: the scheduled invocations prune them on their own, and the
/// next run that completes finds the counts exact.
/// Count rows and all-time score rows alike.
#[tokio::test]
async fn count_rows_stay_within_the_horizon_while_no_run_completes() {
    let stack = TestStack::builder()
        .for_reconciliation("function")
        .start()
        .await;
    let period = stack.reconcile_period();
    let horizon_ms = 4 * period.length_ms;
    let horizon = (horizon_ms / 1000).to_string();
    let stalled = stack.reconciler_with(&[
        ("RECONCILE_HORIZON_SECONDS", &horizon),
        ("EXPORT_BUCKET", "likes-no-such-bucket"),
    ]);
    let item = "game:busy";
    let epochs = 10;
    let started = now_ms();
    let mut user = 0;
    let mut prunes = 0;
    while now_ms() < started + epochs * period.length_ms {
        for _ in 0..3 {
            stack.react(&format!("b{user}"), item, Like).await;
            user += 1;
        }
        // A scheduled invocation: its run fails, its pruning goes on.
        if stalled
            .advance(now_ms() + 2_000, &mut |_| {})
            .await
            .is_err()
        {
            prunes += 1;
        }
    }
    // A last invocation with the time to finish the pass it finds going (an invocation on
    // a loaded machine may leave one half done): the bound holds as of a finished pass.
    let last_invocation = now_ms();
    // Its run's outcome is the stall's, as above; what counts here is its pruning.
    let _stalled = stalled.advance(now_ms() + 30_000, &mut |_| {}).await;
    assert!(prunes > 0, "the stalled runs failed as arranged");
    stack.settle().await;
    stack.settle_leaderboard().await;
    // The bound holds as of the last invocation: rows age between two of them.
    let oldest_kept = period.epoch(last_invocation - horizon_ms - horizon_ms / 2) - 1;
    let epochs_held = subtotal_epochs(&stack, item).await;
    assert!(
        !epochs_held.is_empty(),
        "the busy item's rows hold subtotals"
    );
    for epoch in &epochs_held {
        assert!(
            *epoch >= oldest_kept,
            "epoch {epoch} outlived the horizon (oldest kept {oldest_kept})"
        );
    }
    stack.assert_counts_match_recount(&[item]).await;

    // The next run that can complete finds nothing to correct.
    let cut = stack.next_cut(0);
    until(stack.clear_of(cut)).await;
    let report = reconcile(&stack, cut).await;
    assert_eq!(
        (report.items_checked, report.items_drifted),
        (1, 0),
        "{report:?}"
    );
    // Its cleaning pass ran to the end with it: nothing before the cut is left.
    let cut_epoch = period.epoch(cut);
    for epoch in subtotal_epochs(&stack, item).await {
        assert!(
            epoch >= cut_epoch,
            "epoch {epoch} is before the cut {cut_epoch}"
        );
    }
}

/// The shards of the logs come and go (a stream's roll over every few hours, an on-demand
/// log's reshard with its traffic), and what each leaves goes after it: a stream shard's
/// watermark row expires by TTL past the stream's retention from its last write; a log shard
/// that expired from the log (listed no more, its last record older than any replay) has its
/// progress row retired by the refresher, and the next cleaning pass drops its intent number
/// from every all-time score row, then forgets it.
#[tokio::test]
async fn a_gone_shard_leaves_no_progress_watermark_or_intent_number_behind() {
    let stack = TestStack::builder()
        .for_reconciliation("function")
        .refreshing_boards()
        .start()
        .await;
    let item = "game:kept";
    for u in 0..3 {
        stack.react(&format!("u{u}"), item, Like).await;
    }
    let wrote_ms = now_ms();
    stack.settle().await;
    stack.settle_leaderboard().await;
    let watermarks: Vec<_> = stack
        .rows("CountsTable")
        .await
        .into_iter()
        .filter(|row| matches!(row.get("item_id"), Some(AttributeValue::S(id)) if id.starts_with("#wm#")))
        .collect();
    assert!(!watermarks.is_empty(), "the aggregator wrote watermarks");
    let horizon_s = likes_core::pipeline::REPLAY_HORIZON_MS / 1000;
    for row in &watermarks {
        let Some(AttributeValue::N(expires)) = row.get("expires_at") else {
            panic!("a watermark row without expiry: {row:?}");
        };
        let expires: i64 = expires.parse().unwrap();
        assert!(
            (wrote_ms / 1000 - 60 + horizon_s..=now_ms() / 1000 + horizon_s).contains(&expires),
            "a watermark expires a replay horizon after its last write: {row:?}"
        );
    }

    // A log shard a reshard closed long ago: its progress, its last intent's head (done:
    // the progress holds its number), and its intent number on the item's score row, as its
    // consumer left them.
    let gone = "shardId-000000009999";
    let leaderboard = stack.name("LeaderboardTable");
    let three_days_ago = now_ms() - 3 * 86_400_000;
    stack
        .dynamodb()
        .put_item()
        .table_name(&leaderboard)
        .item("board", AttributeValue::S("#progress".into()))
        .item("item_id", AttributeValue::S(gone.into()))
        .item("through_seq", AttributeValue::S("42".into()))
        .item(
            "applied_through",
            AttributeValue::N(three_days_ago.to_string()),
        )
        .item("intents", AttributeValue::N("7".into()))
        .send()
        .await
        .unwrap();
    let head = || {
        HashMap::from([
            (
                "board".to_owned(),
                AttributeValue::S(format!("#intent#{gone}")),
            ),
            ("item_id".to_owned(), AttributeValue::S("head".into())),
        ])
    };
    stack
        .dynamodb()
        .put_item()
        .table_name(&leaderboard)
        .set_item(Some(head()))
        .item("n", AttributeValue::N("7".into()))
        .send()
        .await
        .unwrap();
    stack
        .dynamodb()
        .update_item()
        .table_name(&leaderboard)
        .set_key(Some(stack.all_time_score_key(item)))
        .update_expression("SET #n = :n")
        .expression_attribute_names("#n", "n#9999")
        .expression_attribute_values(":n", AttributeValue::N("7".into()))
        .send()
        .await
        .unwrap();
    let markers = || async {
        stack
            .all_time_score_row(item)
            .await
            .into_keys()
            .filter(|name| name.starts_with("n#"))
            .collect::<BTreeSet<_>>()
    };
    let live = markers().await;
    assert!(
        live.len() > 1,
        "live shards' numbers beside the gone one's: {live:?}"
    );

    // The refresher, ticking once a second, retires it.
    let store = stack.leaderboard_store();
    eventually(Duration::from_secs(30), async || {
        let progress = store.progress().await.unwrap();
        match progress.iter().any(|p| p.shard == gone) {
            false => Ok(()),
            true => Err(format!("the gone shard's progress stayed: {progress:?}")),
        }
    })
    .await;
    assert_eq!(
        store.retired().await.unwrap(),
        BTreeSet::from(["9999".to_owned()])
    );
    let left = stack
        .dynamodb()
        .get_item()
        .table_name(&leaderboard)
        .set_key(Some(head()))
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    assert_eq!(left.item, None, "the done head went with the progress");

    // A scheduled invocation's cleaning pass drops its number, and then forgets it.
    let _run = stack
        .reconciler()
        .advance(now_ms() + 60_000, &mut |_| {})
        .await;
    let kept = markers().await;
    assert_eq!(
        kept,
        live.iter()
            .filter(|m| *m != "n#9999")
            .cloned()
            .collect::<BTreeSet<_>>(),
        "only the gone shard's number went"
    );
    assert!(
        store.retired().await.unwrap().is_empty(),
        "the retired shard is forgotten"
    );
    stack.react("u9", item, Like).await;
    stack.settle().await;
    stack.settle_leaderboard().await;
    stack
        .leaderboard_until(
            "window=all",
            &serde_json::json!([{"item_id": item, "like_count": 4}]),
        )
        .await;
}
