//! What the `live_*` tests share: how long an answer may take, a wait for a count, and the
//! counts messages of one item.

use std::time::Duration;

use likes_tests::live::Received;
use likes_tests::TestStack;

/// How long an answer that must come (a subscribe's counts, a reply to a message, a post)
/// may take: generous, since the suite shares one emulator and two cores.
pub(crate) const ANSWER: Duration = Duration::from_secs(20);

/// Waits until the public count route says `likes` (panics after 30 s).
pub(crate) async fn wait_for_count(stack: &TestStack, item: &str, likes: u64) {
    for _ in 0..150 {
        if stack.like_count(item).await.json()["like_count"] == likes {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{item} never reached {likes} likes");
}

pub(crate) fn counts_of<'a>(received: &'a [Received], item: &str) -> Vec<&'a Received> {
    received
        .iter()
        .filter(|r| r.message["type"] == "counts" && r.message["item_id"] == item)
        .collect()
}
