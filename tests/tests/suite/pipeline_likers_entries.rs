//! Who liked an item, written as the event log's consumer writes it (its own decisions,
//! `liker_updates`, and its store's conditional writes, a like's and its end's as the claim
//! of the log record that brought it): one user's flips delivered in every order, then all
//! again in other records, then in the first records once more (a retry), leave the likes
//! as the newest flip says, and each like and each end is claimed, so scored, once: by its
//! first record, out of order too, and again by a retry of that record, never by another.
//! Each ended like is a tombstone at its own position, the like the row holds is listed
//! once at its position, and the dislike entry holds or not as the newest flip says, so an
//! item's removal finds the user exactly when they react to it. A page reads past the
//! tombstones in its way.
//! Pages read the buckets the items' count rows list: each test lists its user's bucket, as
//! the aggregator's count write of the like does.

use std::collections::BTreeMap;

use likes_core::likers::{
    bucket_of, dislike_entry, entry_user, liker_updates, position, LikeAt, LIKES_END,
};
use likes_core::pipeline::ReactionEvent;
use likes_core::ItemId;
use likes_core::ReactionState::{self, Dislike, Like, None as Neutral};
use likes_store::LikersStore;
use likes_tests::TestStack;

/// When the row was created.
const CREATED: i64 = 1_790_000_000_000;
const USER: &str = "flipper";

/// The row's flip `op_id` from `old` to `new`, made at `CREATED + op_id`; a flip that begins
/// or ends a like carries that like's time.
fn flip(
    item: &str,
    op_id: u64,
    old: ReactionState,
    new: ReactionState,
    liked_at: i64,
) -> ReactionEvent {
    let count = |state, of| i64::from(state == of);
    ReactionEvent {
        event_id: format!("{USER}#{item}#{op_id}"),
        user_id: USER.into(),
        item_id: item.into(),
        op_id,
        old_state: old,
        new_state: new,
        like_delta: count(new, Like) - count(old, Like),
        dislike_delta: count(new, Dislike) - count(old, Dislike),
        event_time_ms: CREATED + op_id as i64,
        source_sequence_number: op_id.to_string(),
        row_created_ms: CREATED,
        liked_at_ms: (old == Like || new == Like).then_some(liked_at),
        cause: None,
        reason: None,
        moderation_id: None,
    }
}

/// Like, unlike, like again, switch to a dislike, and back to a like: each like at the
/// time of the flip that began it.
fn history(item: &str) -> Vec<ReactionEvent> {
    vec![
        flip(item, 1, Neutral, Like, CREATED + 1),
        flip(item, 2, Like, Neutral, CREATED + 1),
        flip(item, 3, Neutral, Like, CREATED + 3),
        flip(item, 4, Like, Dislike, CREATED + 3),
        flip(item, 5, Dislike, Like, CREATED + 5),
    ]
}

/// Every order of `0..n`.
fn orders(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut all = Vec::new();
    for shorter in orders(n - 1) {
        for at in 0..=shorter.len() {
            let mut order = shorter.clone();
            order.insert(at, n - 1);
            all.push(order);
        }
    }
    all
}

/// Writes `event`'s entries as the log's consumer does, for the log record `by`: whether
/// the record claimed the event (`None` for an event that begins or ends no like).
async fn deliver(store: &LikersStore, event: &ReactionEvent, by: &str) -> Option<bool> {
    let mut claimed = None;
    for update in liker_updates(event, CREATED) {
        if update.change.claims() {
            claimed = Some(store.claim(&update, by).await.expect("a likers claim"));
        } else {
            store.apply(&update).await.expect("a likers write");
        }
    }
    claimed
}

#[tokio::test]
async fn a_users_flips_in_every_order_and_twice_leave_one_like_listed_at_the_newest_flip() {
    let stack = TestStack::start().await;
    let store = LikersStore::new(stack.dynamodb(), stack.name("LikersTable"));
    // Histories that end disliked (the first four flips) and liked (all five), each
    // delivered in every order and then again, newest first.
    let mut items = Vec::new();
    let mut writes = tokio::task::JoinSet::new();
    for flips in [4, 5] {
        for (n, order) in orders(flips).into_iter().enumerate() {
            let item = format!("flips:{flips}-{n}");
            let events = history(&item);
            // Each flip in record `first:<k>`, then again in record `again:<k>` (the event
            // on the log twice), then in `first:<k>` once more (a retry of its record).
            let deliveries: Vec<(ReactionEvent, String, bool)> = order
                .iter()
                .map(|&at| (at, "first", true))
                .chain(order.iter().rev().map(|&at| (at, "again", false)))
                .chain(order.iter().map(|&at| (at, "first", true)))
                .map(|(at, record, claims)| (events[at].clone(), format!("{record}:{at}"), claims))
                .collect();
            stack.list_likers_buckets(&item, &[USER]).await;
            items.push((item, flips));
            let store = store.clone();
            writes.spawn(async move {
                for (event, by, claims) in &deliveries {
                    let claimed = deliver(&store, event, by).await;
                    let expected = (event.like_delta != 0).then_some(*claims);
                    assert_eq!(
                        claimed, expected,
                        "{} in {by}, delivered {order:?}",
                        event.event_id
                    );
                }
            });
            while writes.len() >= 16 {
                writes.join_next().await.expect("a task").expect("writes");
            }
        }
    }
    while let Some(done) = writes.join_next().await {
        done.expect("writes");
    }
    assert_eq!(items.len(), 24 + 120);

    // The liked entries: one per history that ends liked, the newest like at its flip.
    let mut liked: BTreeMap<String, Vec<LikeAt>> = BTreeMap::new();
    let mut start = None;
    loop {
        let (entries, next) = store.liked_page(start).await.expect("a Scan page");
        for (item, user, like) in entries {
            assert_eq!(user, USER);
            liked
                .entry(item.as_str().to_owned())
                .or_default()
                .push(like);
        }
        match next {
            Some(next) => start = Some(next),
            None => break,
        }
    }
    let newest = LikeAt {
        row_created_ms: CREATED,
        op_id: 5,
        liked_at_ms: CREATED + 5,
    };
    for (item, flips) in &items {
        let expected = if *flips == 5 { vec![newest] } else { vec![] };
        assert_eq!(
            liked.get(item).cloned().unwrap_or_default(),
            expected,
            "{item}'s liked entries"
        );
    }
    // An item's removal finds the user by the like or the dislike it holds (a sample: each
    // sweep Queries all 256 buckets).
    for (item, flips) in items.iter().step_by(12) {
        let id = ItemId::parse(item).expect("a valid item id");
        let reactors = store.reactors(&id, None, 10).await.expect("reactors");
        let expected = if *flips == 5 {
            position(CREATED + 5, USER)
        } else {
            dislike_entry(USER)
        };
        assert_eq!(reactors, [expected], "{item}'s reactors");
        assert!(reactors.iter().all(|entry| entry_user(entry) == USER));
        assert_eq!(reactors[0].as_str() < LIKES_END, *flips == 5);
    }

    // The route lists the user once where the history ends liked, at the newest like.
    for (item, flips) in items.iter().step_by(7) {
        let page = stack.likers_page(item, "").await;
        let listed: Vec<(String, String)> = page["items"]
            .as_array()
            .expect("a page")
            .iter()
            .map(|liker| {
                (
                    liker["user_id"].as_str().expect("a user").to_owned(),
                    liker["liked_at"].as_str().expect("a time").to_owned(),
                )
            })
            .collect();
        let expected = if *flips == 5 {
            vec![(USER.to_owned(), likes_core::clock::rfc3339(CREATED + 5))]
        } else {
            vec![]
        };
        assert_eq!(listed, expected, "{item}: {page}");
    }
}

#[tokio::test]
async fn a_page_reads_past_the_tombstones_above_an_older_like_in_its_bucket() {
    let stack = TestStack::start().await;
    let store = LikersStore::new(stack.dynamodb(), stack.name("LikersTable"));
    let item = "flips:buried";
    // Five users of one bucket: the first likes, the four after like and unlike, so the
    // bucket's four newest entries are tombstones.
    let bucket = bucket_of("fan0");
    stack.list_likers_buckets(item, &["fan0"]).await;
    let users: Vec<String> = (0..)
        .map(|n| format!("fan{n}"))
        .filter(|user| bucket_of(user) == bucket)
        .take(5)
        .collect();
    for (n, user) in users.iter().enumerate() {
        let liked_at = CREATED + 10 * n as i64;
        let mut like = flip(item, 1, Neutral, Like, liked_at);
        let mut unlike = flip(item, 2, Like, Neutral, liked_at);
        for event in [&mut like, &mut unlike] {
            event.user_id = user.clone();
        }
        let events = if n == 0 {
            vec![like]
        } else {
            vec![like, unlike]
        };
        for event in &events {
            for update in liker_updates(event, CREATED) {
                assert!(store.apply(&update).await.expect("a likers write"));
            }
        }
    }
    // A page of one Queries its bucket for two entries at a time: two Queries of
    // tombstones before the like.
    let page = stack.likers_page(item, "limit=1").await;
    assert_eq!(
        likes_tests::liker_ids(&page),
        [users[0].clone()],
        "the like under the tombstones: {page}"
    );
    assert_eq!(page["next_cursor"], serde_json::Value::Null);
}
