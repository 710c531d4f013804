//! Removed items against the export: a reaction to an item a moderator removed, which the
//! removal's job never saw (written behind the service), is retracted by the next run.

use aws_sdk_dynamodb::types::AttributeValue;
use likes_core::clock::now_ms;
use likes_core::ReactionState::Like;
use likes_tests::TestStack;
use serde_json::json;

use crate::reconcile_support::reconcile_next;

/// The state of `user`'s Reactions row for `item`, read strongly consistent.
async fn state_of(stack: &TestStack, user: &str, item: &str) -> String {
    let row = stack
        .dynamodb()
        .get_item()
        .table_name(stack.name("ReactionsTable"))
        .key("user_id", AttributeValue::S(user.into()))
        .key("item_id", AttributeValue::S(item.into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
        .expect("the row exists");
    row["state"].as_s().unwrap().clone()
}

/// A LIKE row of a removed item, put behind the service after its removal finished, is
/// counted by the pipeline; the next run finds it in its export and turns it to NONE by
/// the removal's own retract write, and the count drops back to zero: recounted in the
/// function, and judged in Athena.
#[tokio::test]
async fn a_reaction_to_a_removed_item_found_in_the_export_is_retracted() {
    a_reaction_to_a_removed_item_is_retracted_by("function").await;
}

#[tokio::test]
async fn a_reaction_to_a_removed_item_found_in_the_export_is_retracted_in_athena() {
    a_reaction_to_a_removed_item_is_retracted_by("athena").await;
}

async fn a_reaction_to_a_removed_item_is_retracted_by(engine: &str) {
    let stack = TestStack::builder()
        .for_reconciliation(engine)
        .start()
        .await;
    let (removed, kept) = ("game:removed", "game:kept");
    stack.react("fan", removed, Like).await;
    stack.react("fan", kept, Like).await;
    stack.settle().await;
    let removal = stack
        .request("DELETE", &format!("/v1/moderation/items/{removed}"), None)
        .header(
            "authorization",
            &format!("Bearer {}", stack.moderator_token("moderator")),
        )
        .json(&json!({"reason": "counterfeit listing"}))
        .send()
        .await;
    removal.assert_status(202);
    let id = removal.json()["retraction_id"].as_str().unwrap().to_owned();
    stack.wait_for_retraction(&id).await;
    assert_eq!(state_of(&stack, "fan", removed).await, "NONE");
    // Behind the service, after the removal: a like it never saw.
    let now = now_ms().to_string();
    stack
        .put_reaction_row(
            "sneak",
            removed,
            &[
                ("state", AttributeValue::S("LIKE".into())),
                ("op_id", AttributeValue::N("1".into())),
                ("created_at", AttributeValue::N(now.clone())),
                ("updated_at", AttributeValue::N(now.clone())),
                ("liked_at", AttributeValue::N(now)),
            ],
        )
        .await;
    stack.settle().await;
    let item = likes_core::ItemId::parse(removed).unwrap();
    assert_eq!(
        stack.counts_store().read(&item).await.unwrap().like_count,
        1,
        "the pipeline counted it"
    );

    let report = reconcile_next(&stack).await;
    assert_eq!(report.removed_reactions_retracted, 1, "{report:?}");
    assert_eq!(state_of(&stack, "sneak", removed).await, "NONE");
    assert_eq!(state_of(&stack, "fan", kept).await, "LIKE");
    stack.settle().await;
    assert_eq!(
        stack.counts_store().read(&item).await.unwrap().like_count,
        0
    );
    stack.assert_counts_match_recount(&[removed, kept]).await;
    let rerun = reconcile_next(&stack).await;
    assert_eq!(rerun.removed_reactions_retracted, 0, "{rerun:?}");
}
