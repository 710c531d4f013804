//! Idempotency keys through the local HTTP front: a write retried with its key, however late,
//! is answered with the stored response; the key reused for another body is refused.

use likes_tests::TestStack;

use crate::http_reactions::{get_reaction, put_reaction};

#[tokio::test]
async fn a_replayed_key_answers_the_stored_response() {
    let stack = TestStack::start().await;
    let first = put_reaction(&stack, "alice", "k1", "LIKE").await;
    let replay = put_reaction(&stack, "alice", "k1", "LIKE").await;
    assert_eq!(replay.status, 200);
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(replay.json(), first.json());
    assert_eq!(replay.header("etag"), first.header("etag"));
}

/// That the row stays NONE is the store's to show; here: the wire answer is the original one.
#[tokio::test]
async fn a_late_retry_is_answered_with_the_original_response() {
    let stack = TestStack::start().await;
    let like = put_reaction(&stack, "alice", "k1", "LIKE").await;
    like.assert_status(200);
    put_reaction(&stack, "alice", "k2", "NONE")
        .await
        .assert_status(200);
    let retry = put_reaction(&stack, "alice", "k1", "LIKE").await;
    retry.assert_status(200);
    assert_eq!(retry.header("idempotent-replayed"), Some("true"));
    assert_eq!(retry.header("etag"), Some("\"1\""));
    assert_eq!(retry.json(), like.json());
}

#[tokio::test]
async fn the_same_key_with_another_body_is_422() {
    let stack = TestStack::start().await;
    put_reaction(&stack, "alice", "k1", "LIKE")
        .await
        .assert_status(200);
    put_reaction(&stack, "alice", "k1", "DISLIKE")
        .await
        .problem(422);
    assert_eq!(get_reaction(&stack, "alice").await["state"], "LIKE");
}
