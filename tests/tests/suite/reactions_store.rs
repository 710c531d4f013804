//! The reactions store against the emulator: every outcome of the one conditional write, the
//! idempotency keys a row keeps, and the liked-items page.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use likes_core::write::{KEYS_KEPT, KEYS_TRIM_ABOVE};
use likes_core::{
    IdempotencyKey, ItemId, ReactionChange, ReactionState, UserId, WriteOutcome, WriteRequest,
};
use likes_store::ReactionsStore;
use likes_tests::TestStack;
use ReactionState::{Dislike, Like, None as Neutral};

pub(crate) struct Fixture {
    pub(crate) stack: TestStack,
    pub(crate) store: ReactionsStore,
}

impl Fixture {
    pub(crate) async fn new() -> Self {
        let stack = TestStack::start().await;
        let store = ReactionsStore::new(stack.dynamodb(), stack.name("ReactionsTable"));
        Self { stack, store }
    }

    /// The raw stored row.
    async fn row(&self, user: &UserId, item: &ItemId) -> HashMap<String, AttributeValue> {
        self.stack
            .dynamodb()
            .get_item()
            .table_name(self.store.table())
            .key("user_id", AttributeValue::S(user.as_str().into()))
            .key("item_id", AttributeValue::S(item.as_str().into()))
            .consistent_read(true)
            .send()
            .await
            .unwrap()
            .item
            .unwrap_or_default()
    }
}

pub(crate) fn user(id: &str) -> UserId {
    UserId::parse(id).unwrap()
}

pub(crate) fn item(id: &str) -> ItemId {
    ItemId::parse(id).unwrap()
}

pub(crate) fn keyed(target: ReactionState, key: &str) -> WriteRequest {
    WriteRequest {
        target,
        key: Some(IdempotencyKey::parse(key).unwrap().hash()),
        if_match: None,
    }
}

fn applied(outcome: WriteOutcome) -> ReactionChange {
    match outcome {
        WriteOutcome::Applied(change) => change,
        other => panic!("{other:?} is not an applied write"),
    }
}

fn replayed(outcome: WriteOutcome) -> ReactionChange {
    match outcome {
        WriteOutcome::Replayed(change) => change,
        other => panic!("{other:?} is not a replay"),
    }
}

fn unchanged(outcome: WriteOutcome) -> ReactionChange {
    match outcome {
        WriteOutcome::Unchanged(change) => change,
        other => panic!("{other:?} is not an unchanged write"),
    }
}

#[tokio::test]
async fn a_first_like_creates_the_row_at_version_one() {
    let f = Fixture::new().await;
    let (u, i) = (user("alice"), item("game:1"));
    let change = applied(
        f.store
            .set(&u, &i, &keyed(Like, "k1"), 1_000)
            .await
            .unwrap(),
    );
    assert_eq!((change.state, change.previous_state), (Like, Neutral));
    assert_eq!(change.version, 1);
    let row = f.row(&u, &i).await;
    assert_eq!(row["state"], AttributeValue::S("LIKE".into()));
    assert_eq!(row["op_id"], AttributeValue::N("1".into()));
    assert_eq!(row["liked_at"], AttributeValue::N("1000".into()));
    let read = f.store.get(&u, &i).await.unwrap();
    assert_eq!((read.state, read.version), (Like, 1));
}

#[tokio::test]
async fn a_replayed_key_answers_the_stored_change_without_writing() {
    let f = Fixture::new().await;
    let (u, i) = (user("alice"), item("game:1"));
    let first = applied(
        f.store
            .set(&u, &i, &keyed(Dislike, "k1"), 1_000)
            .await
            .unwrap(),
    );
    let replay = replayed(
        f.store
            .set(&u, &i, &keyed(Dislike, "k1"), 2_000)
            .await
            .unwrap(),
    );
    assert_eq!(
        (
            replay.state,
            replay.previous_state,
            replay.version,
            replay.updated_at_ms
        ),
        (
            first.state,
            first.previous_state,
            first.version,
            first.updated_at_ms
        )
    );
    assert_eq!(f.row(&u, &i).await["op_id"], AttributeValue::N("1".into()));
}

/// Which answer a late retry gets is the core's decision; here: DynamoDB refuses it on the
/// recorded key, so the row that moved on stays as it is.
#[tokio::test]
async fn a_late_retry_writes_nothing_to_a_row_that_moved_on() {
    let f = Fixture::new().await;
    let (u, i) = (user("alice"), item("game:1"));
    f.store
        .set(&u, &i, &keyed(Like, "k1"), 1_000)
        .await
        .unwrap();
    f.store
        .set(&u, &i, &keyed(Neutral, "k2"), 2_000)
        .await
        .unwrap();
    let before = f.row(&u, &i).await;
    replayed(
        f.store
            .set(&u, &i, &keyed(Like, "k1"), 3_000)
            .await
            .unwrap(),
    );
    let row = f.store.get(&u, &i).await.unwrap();
    assert_eq!((row.state, row.version), (Neutral, 2));
    let after = f.row(&u, &i).await;
    assert!(!after.contains_key("liked_at"));
    assert_eq!(after, before, "the refused retry wrote nothing");
}

#[tokio::test]
async fn a_key_reused_for_another_state_is_refused() {
    let f = Fixture::new().await;
    let (u, i) = (user("alice"), item("game:1"));
    f.store
        .set(&u, &i, &keyed(Like, "k1"), 1_000)
        .await
        .unwrap();
    let outcome = f
        .store
        .set(&u, &i, &keyed(Dislike, "k1"), 2_000)
        .await
        .unwrap();
    assert_eq!(outcome, WriteOutcome::KeyReused { original: Like });
    assert_eq!(f.store.get(&u, &i).await.unwrap().state, Like);
}

#[tokio::test]
async fn a_stale_if_match_is_refused_and_a_current_one_applies() {
    let f = Fixture::new().await;
    let (u, i) = (user("alice"), item("game:1"));
    let mut request = keyed(Like, "k1");
    request.if_match = Some(0);
    assert_eq!(
        applied(f.store.set(&u, &i, &request, 1_000).await.unwrap()).version,
        1
    );
    let mut stale = keyed(Dislike, "k2");
    stale.if_match = Some(0);
    let outcome = f.store.set(&u, &i, &stale, 2_000).await.unwrap();
    assert_eq!(outcome, WriteOutcome::Stale { current: 1 });
    stale.if_match = Some(1);
    let change = applied(f.store.set(&u, &i, &stale, 3_000).await.unwrap());
    assert_eq!(
        (change.state, change.previous_state, change.version),
        (Dislike, Like, 2)
    );
}

#[tokio::test]
async fn the_same_state_again_is_unchanged_and_writes_nothing() {
    let f = Fixture::new().await;
    let (u, i) = (user("alice"), item("game:1"));
    f.store
        .set(&u, &i, &keyed(Like, "k1"), 1_000)
        .await
        .unwrap();
    let again = unchanged(
        f.store
            .set(&u, &i, &keyed(Like, "k2"), 2_000)
            .await
            .unwrap(),
    );
    assert_eq!(
        (again.state, again.previous_state, again.version),
        (Like, Like, 1)
    );
    let row = f.row(&u, &i).await;
    assert_eq!(row["updated_at"], AttributeValue::N("1000".into()));
    assert_eq!(row["liked_at"], AttributeValue::N("1000".into()));
}

#[tokio::test]
async fn none_on_a_row_never_written_creates_nothing() {
    let f = Fixture::new().await;
    let (u, i) = (user("alice"), item("game:1"));
    let change = unchanged(
        f.store
            .set(&u, &i, &keyed(Neutral, "k1"), 1_000)
            .await
            .unwrap(),
    );
    assert_eq!((change.state, change.version), (Neutral, 0));
    assert!(f.row(&u, &i).await.is_empty());
}

#[tokio::test]
async fn writes_without_a_key_flip_once() {
    let f = Fixture::new().await;
    let (u, i) = (user("alice"), item("game:1"));
    let unkeyed = |target| WriteRequest {
        target,
        key: None,
        if_match: None,
    };
    assert_eq!(
        applied(f.store.set(&u, &i, &unkeyed(Like), 1_000).await.unwrap()).version,
        1
    );
    unchanged(f.store.set(&u, &i, &unkeyed(Like), 2_000).await.unwrap());
    let off = applied(f.store.set(&u, &i, &unkeyed(Neutral), 3_000).await.unwrap());
    assert_eq!((off.previous_state, off.version), (Like, 2));
}

#[tokio::test]
async fn many_keyed_flips_keep_the_row_small_and_the_newest_keys_replayable() {
    let f = Fixture::new().await;
    let longest_user = "u".repeat(likes_core::ids::USER_ID_MAX_LEN);
    let longest_item = "i".repeat(likes_core::ids::ITEM_ID_MAX_LEN);
    for (u, i) in [
        (user("toggler"), item("game:toggle")),
        (user(&longest_user), item(&longest_item)),
    ] {
        let flips = 3 * KEYS_TRIM_ABOVE;
        let mut largest = 0;
        for n in 0..flips {
            let target = if n % 2 == 0 { Like } else { Neutral };
            f.store
                .set(
                    &u,
                    &i,
                    &keyed(target, &format!("k{n}")),
                    1_700_000_000_000 + n as i64,
                )
                .await
                .unwrap();
            largest = largest.max(item_size(&f.row(&u, &i).await));
        }
        let row = f.row(&u, &i).await;
        let keys = row.keys().filter(|name| name.starts_with("k#")).count();
        assert!(
            (KEYS_KEPT..=KEYS_TRIM_ABOVE).contains(&keys),
            "{keys} keys kept"
        );
        // The row just before a trim holds one key more than any row read back here.
        let key_bytes = 3 * 13 + "L|1700000000000".len() + 2 + "DISLIKE".len();
        assert!(
            largest + key_bytes < 1024,
            "row of {} + {} B peaks at {largest} + {key_bytes} B",
            u.as_str().len(),
            i.as_str().len()
        );
        for n in flips - KEYS_KEPT..flips {
            let target = if n % 2 == 0 { Like } else { Neutral };
            let outcome = f
                .store
                .set(&u, &i, &keyed(target, &format!("k{n}")), 9_999)
                .await
                .unwrap();
            assert!(
                matches!(outcome, WriteOutcome::Replayed(_)),
                "key k{n} is still replayable: {outcome:?}"
            );
            let replay = replayed(outcome);
            assert_eq!(replay.version, n as u64 + 1);
        }
    }
}

/// DynamoDB's size of an item: attribute names plus values.
fn item_size(row: &HashMap<String, AttributeValue>) -> usize {
    row.iter()
        .map(|(name, value)| name.len() + attribute_size(value))
        .sum()
}

/// DynamoDB's size of a value: string bytes, or about one byte per two digits of a number.
fn attribute_size(value: &AttributeValue) -> usize {
    match value {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => n.len().div_ceil(2) + 1,
        other => panic!("unexpected attribute {other:?}"),
    }
}

#[tokio::test]
async fn liked_items_page_newest_first_and_skip_unliked_rows() {
    let f = Fixture::new().await;
    let u = user("lister");
    for n in 0..5 {
        f.store
            .set(
                &u,
                &item(&format!("game:{n}")),
                &keyed(Like, &format!("l{n}")),
                1_000 + n,
            )
            .await
            .unwrap();
    }
    f.store
        .set(&u, &item("game:1"), &keyed(Neutral, "u1"), 2_000)
        .await
        .unwrap();
    f.store
        .set(&u, &item("game:3"), &keyed(Dislike, "d3"), 2_001)
        .await
        .unwrap();
    f.store
        .set(
            &user("someone-else"),
            &item("game:9"),
            &keyed(Like, "x"),
            3_000,
        )
        .await
        .unwrap();

    let first = f.store.liked_page(&u, 2, None).await.unwrap();
    let ids: Vec<&str> = first.items.iter().map(|l| l.item_id.as_str()).collect();
    assert_eq!(ids, ["game:4", "game:2"]);
    let second = f
        .store
        .liked_page(&u, 2, first.next.as_ref())
        .await
        .unwrap();
    let ids: Vec<&str> = second.items.iter().map(|l| l.item_id.as_str()).collect();
    assert_eq!(ids, ["game:0"]);
    assert_eq!(second.items[0].liked_at_ms, 1_000);
    assert!(second.next.is_none(), "the last page has no cursor");
}
