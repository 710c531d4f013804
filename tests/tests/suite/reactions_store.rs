//! The reactions store against the emulator: every outcome of the one conditional write.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use likes_core::write::{KEYS_KEPT, KEYS_TRIM_ABOVE};
use likes_core::{
    IdempotencyKey, ItemId, ReactionChange, ReactionState, UserId, WriteOutcome, WriteRequest,
};
use likes_store::ReactionsStore;
use likes_tests::TestStack;
use ReactionState::{Dislike, Like, None as Neutral};

struct Fixture {
    stack: TestStack,
    store: ReactionsStore,
}

impl Fixture {
    async fn new() -> Self {
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

fn user(id: &str) -> UserId {
    UserId::parse(id).unwrap()
}

fn item(id: &str) -> ItemId {
    ItemId::parse(id).unwrap()
}

fn keyed(target: ReactionState, key: &str) -> WriteRequest {
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

/// Sixteen writers, each with its own client (connection), released together by a barrier,
/// race the same conditional write on a row, on many fresh rows: each row must have exactly
/// one winner. Against stock `moto_server` (no global lock) some rows get two, which is why
/// the emulator serializes requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_racing_likes_on_one_row_have_exactly_one_winner() {
    let f = Fixture::new().await;
    let u = user("racer");
    let writers: Vec<ReactionsStore> = (0..16)
        .map(|_| ReactionsStore::new(f.stack.dynamodb(), f.store.table()))
        .collect();
    for round in 0..24 {
        let i = item(&format!("game:race-{round}"));
        let start = std::sync::Arc::new(tokio::sync::Barrier::new(writers.len()));
        let writes = writers.iter().enumerate().map(|(n, store)| {
            let (store, start) = (store.clone(), start.clone());
            let (u, i) = (u.clone(), i.clone());
            tokio::spawn(async move {
                start.wait().await;
                store
                    .set(&u, &i, &keyed(Like, &format!("k{n}")), 1_000)
                    .await
            })
        });
        let mut winners = 0;
        for write in writes.collect::<Vec<_>>() {
            let outcome = write.await.unwrap().unwrap();
            if matches!(outcome, WriteOutcome::Applied(_)) {
                winners += 1;
            }
        }
        assert_eq!(
            winners, 1,
            "row {round}: one conditional write wins, the others see LIKE"
        );
        assert_eq!(f.store.get(&u, &i).await.unwrap().version, 1, "row {round}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_concurrent_writers_leave_a_gap_free_op_id_sequence() {
    let f = Fixture::new().await;
    let (u, i) = (user("busy"), item("game:busy"));
    let writers = (0..16).map(|writer| {
        let store = f.store.clone();
        let (u, i) = (u.clone(), i.clone());
        tokio::spawn(async move {
            let mut applied = Vec::new();
            for n in 0..6 {
                let target = ReactionState::ALL[(writer + n) % 3];
                let outcome = store
                    .set(&u, &i, &keyed(target, &format!("w{writer}-{n}")), 1_000)
                    .await
                    .unwrap();
                if let WriteOutcome::Applied(change) = outcome {
                    applied.push((change.version, change.previous_state, change.state));
                }
            }
            applied
        })
    });
    let mut applied = Vec::new();
    for writer in writers {
        applied.extend(writer.await.unwrap());
    }
    applied.sort_by_key(|(version, _, _)| *version);
    let final_row = f.store.get(&u, &i).await.unwrap();
    let versions: Vec<u64> = applied.iter().map(|(v, _, _)| *v).collect();
    assert_eq!(versions, (1..=final_row.version).collect::<Vec<_>>());
    // Each flip starts from the state the previous one left: a chain with no lost update.
    let mut state = Neutral;
    for (version, previous, next) in &applied {
        assert_eq!(
            *previous,
            state,
            "flip {version} starts where {} ended",
            version - 1
        );
        state = *next;
    }
    assert_eq!(final_row.state, state);
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

/// `(name, type)` pairs of a template key schema.
fn template_keys(schema: &serde_yaml::Value) -> Vec<(String, String)> {
    schema
        .as_sequence()
        .unwrap()
        .iter()
        .map(|k| {
            let field = |f: &str| k[f].as_str().unwrap().to_owned();
            (field("AttributeName"), field("KeyType"))
        })
        .collect()
}

fn described_keys(schema: &[aws_sdk_dynamodb::types::KeySchemaElement]) -> Vec<(String, String)> {
    schema
        .iter()
        .map(|k| {
            (
                k.attribute_name().to_owned(),
                k.key_type().as_str().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn every_created_table_matches_the_template() {
    let stack = TestStack::start().await;
    let tables = stack.stack.template.resources_of("AWS::DynamoDB::Table");
    assert!(tables.contains_key("ReactionsTable"));
    for (logical_id, resource) in tables {
        let props = &resource["Properties"];
        let table = stack
            .dynamodb()
            .describe_table()
            .table_name(stack.name(&logical_id))
            .send()
            .await
            .unwrap()
            .table
            .unwrap();
        assert_eq!(
            described_keys(table.key_schema()),
            template_keys(&props["KeySchema"]),
            "{logical_id} keys"
        );
        let lsis = props["LocalSecondaryIndexes"]
            .as_sequence()
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            table.local_secondary_indexes().len(),
            lsis.len(),
            "{logical_id} LSIs"
        );
        for (created, declared) in table.local_secondary_indexes().iter().zip(&lsis) {
            assert_eq!(created.index_name(), declared["IndexName"].as_str());
            assert_eq!(
                described_keys(created.key_schema()),
                template_keys(&declared["KeySchema"])
            );
            assert_eq!(
                created
                    .projection()
                    .and_then(|p| p.projection_type())
                    .map(|p| p.as_str()),
                declared["Projection"]["ProjectionType"].as_str()
            );
        }
        assert_eq!(
            table
                .stream_specification()
                .and_then(|s| s.stream_view_type())
                .map(|v| v.as_str()),
            props["StreamSpecification"]["StreamViewType"].as_str(),
            "{logical_id} stream"
        );
    }
}

#[tokio::test]
async fn the_reactions_table_is_shaped_as_designed() {
    let stack = TestStack::start().await;
    let table = stack
        .dynamodb()
        .describe_table()
        .table_name(stack.name("ReactionsTable"))
        .send()
        .await
        .unwrap()
        .table
        .unwrap();
    assert_eq!(
        described_keys(table.key_schema()),
        [
            ("user_id".into(), "HASH".into()),
            ("item_id".into(), "RANGE".into())
        ]
    );
    let lsi = &table.local_secondary_indexes()[0];
    assert_eq!(lsi.index_name(), Some(likes_store::LIKED_AT_INDEX));
    assert_eq!(
        described_keys(lsi.key_schema()),
        [
            ("user_id".into(), "HASH".into()),
            ("liked_at".into(), "RANGE".into())
        ]
    );
    assert_eq!(
        table
            .stream_specification()
            .and_then(|s| s.stream_view_type())
            .map(|v| v.as_str()),
        Some("NEW_AND_OLD_IMAGES")
    );
}
