//! The table the bench reconciles, made up deterministically: reaction rows in the shape the
//! write path stores them, the count rows the aggregator and the likers entries the likers
//! consumer would have written for them, and the drift injected on a known set of items.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use likes_core::likers;
use likes_core::pipeline::overflow_partition;
use likes_core::reconcile::{subtotal_attributes, FIRST_EPOCH};
use likes_core::{IdempotencyKey, ItemId, ReactionState};

use crate::capacity::Item;

/// Items that take a fifth of all reactions between them.
pub const HOT_ITEMS: usize = 5;
/// One item in this many is given drift.
const DRIFT_EVERY: usize = 100;
/// A hot item's counts spread over this many overflow partitions (the template's
/// OverflowPartitions), and this many rows in each.
const HOT_PARTITIONS: u32 = 8;
const HOT_ROWS_PER_PARTITION: u32 = 4;
/// The template's CountShards: cold rows land on one of `D#0..D#63`.
const COUNT_ROWS: u64 = 64;
/// Reactions were last written within this many days before the load.
const HISTORY_DAYS: i64 = 30;

/// How big the table is.
#[derive(Debug, Clone, Copy)]
pub struct Size {
    pub reactions: usize,
    pub items: usize,
}

/// An item's counts as the recount will find them.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    like: i64,
    dislike: i64,
}

/// What was written, and what reconciliation must find.
pub struct Dataset {
    pub count_rows: Vec<Item>,
    /// Items given drift, and Σ |drift| over them.
    pub drifted_items: u64,
    pub drift_abs_sum: u64,
}

/// splitmix64: a fixed, well-spread stream of numbers from a row's index, so every run
/// writes the same table.
fn mix(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

fn n(value: i64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

pub fn item_id(index: usize) -> String {
    if index < HOT_ITEMS {
        format!("video:hot-{index}")
    } else {
        format!("post:{index:06}")
    }
}

/// The item of reaction row `i`: every fifth row goes to a hot item, the rest spread over
/// the cold ones.
fn item_of(i: usize, items: usize) -> usize {
    if i % 5 == 0 {
        (i / 5) % HOT_ITEMS
    } else {
        HOT_ITEMS + i % (items - HOT_ITEMS)
    }
}

fn state_of(i: usize) -> ReactionState {
    match mix(i as u64) % 100 {
        0..80 => ReactionState::Like,
        80..92 => ReactionState::Dislike,
        // Unliked: the write path keeps the row, in NONE.
        _ => ReactionState::None,
    }
}

/// Reaction row `i` as `ReactionsStore::set` leaves it after its last write: a user id as
/// long as a Cognito `sub`, the state, its version and time, `liked_at` while LIKE, and
/// the idempotency key of that write with the version and state it recorded.
pub fn reaction_row(i: usize, size: Size, load_ms: i64) -> Item {
    let r = mix(i as u64);
    let user = format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        r >> 32,
        (r >> 16) & 0xffff,
        r & 0xfff,
        (r >> 12) & 0xfff,
        i
    );
    let state = state_of(i);
    let version = 1 + (r % 3) as i64;
    let updated_at = load_ms - (r % (HISTORY_DAYS as u64 * 86_400_000)) as i64;
    let previous = if version == 1 {
        ReactionState::None
    } else {
        ReactionState::Like
    };
    let key = IdempotencyKey::parse(&format!("bench-{i}"))
        .expect("a valid key")
        .hash();
    let mut row = HashMap::from([
        ("user_id".to_owned(), s(user)),
        ("item_id".to_owned(), s(item_id(item_of(i, size.items)))),
        ("state".to_owned(), s(state.as_str())),
        ("op_id".to_owned(), n(version)),
        ("updated_at".to_owned(), n(updated_at)),
        (
            format!("k#{}", key.as_str()),
            s(format!("{}|{updated_at}", state.code())),
        ),
        (format!("v#{}", key.as_str()), n(version)),
        (format!("p#{}", key.as_str()), s(previous.as_str())),
    ]);
    if state == ReactionState::Like {
        row.insert("liked_at".to_owned(), n(updated_at));
    }
    row
}

/// The reaction rows that are likes: the ones with a likers entry.
pub fn likes(size: Size) -> Vec<usize> {
    (0..size.reactions)
        .filter(|i| state_of(*i) == ReactionState::Like)
        .collect()
}

/// The likers entry of reaction row `i`, a like, as the log consumer leaves it (its
/// `LikersStore::apply`, less the claim's record name): in the user's bucket of the item,
/// at the row's order (no `created_at`: 0, then `op_id`), with its position and time.
pub fn liker_entry(i: usize, size: Size, load_ms: i64) -> Item {
    let row = reaction_row(i, size, load_ms);
    let text = |name: &str| row[name].as_s().expect("a string").clone();
    let number = |name: &str| row[name].as_n().expect("a number").clone();
    let user = text("user_id");
    let item = ItemId::parse(&text("item_id")).expect("a valid item id");
    let liked_at: i64 = number("updated_at").parse().expect("a time");
    HashMap::from([
        (
            "bucket".to_owned(),
            s(likers::bucket_key(&item, likers::bucket_of(&user))),
        ),
        ("position".to_owned(), s(likers::position(liked_at, &user))),
        ("user_id".to_owned(), s(user)),
        ("row_created".to_owned(), n(0)),
        ("op_id".to_owned(), AttributeValue::N(number("op_id"))),
        ("liked_at".to_owned(), n(liked_at)),
    ])
}

/// The count rows of every item, as the aggregator writes them: totals, the first epoch,
/// `updated_at` (every flip committed in `epoch`, none near a cut; a hot item's rows also
/// took flips in the epoch before, which net to nothing, so they keep `epoch`'s subtotals).
/// A cold item has one row in its base partition; a hot one has rows in every overflow partition
/// and the marker that tells readers so. One cold item in [`DRIFT_EVERY`] is then put off by
/// 1-3 likes, up or down, as a lost or twice-applied batch leaves it.
pub fn build(size: Size, epoch: i64, now_ms: i64) -> Dataset {
    assert!(
        size.items > HOT_ITEMS && size.reactions >= size.items,
        "the bench needs more than {HOT_ITEMS} items and at least a reaction per item"
    );
    let mut tallies = vec![Tally::default(); size.items];
    for i in 0..size.reactions {
        let tally = &mut tallies[item_of(i, size.items)];
        match state_of(i) {
            ReactionState::Like => tally.like += 1,
            ReactionState::Dislike => tally.dislike += 1,
            ReactionState::None => {}
        }
    }
    let mut dataset = Dataset {
        count_rows: Vec::new(),
        drifted_items: 0,
        drift_abs_sum: 0,
    };
    for (index, tally) in tallies.into_iter().enumerate() {
        let item = item_id(index);
        if index < HOT_ITEMS {
            dataset
                .count_rows
                .extend(hot_rows(&item, tally, epoch, now_ms));
            continue;
        }
        let mut stored = tally;
        if index % DRIFT_EVERY == DRIFT_EVERY / 2 {
            let off = 1 + (index / DRIFT_EVERY % 3) as i64;
            let lost = (index / DRIFT_EVERY) % 2 == 0 && tally.like >= off;
            stored.like += if lost { -off } else { off };
            dataset.drifted_items += 1;
            dataset.drift_abs_sum += off as u64;
        }
        let row = format!("D#{}", mix(index as u64) % COUNT_ROWS);
        dataset
            .count_rows
            .push(count_row(&item, &row, stored, Epochs::One(epoch), now_ms));
    }
    dataset
}

fn hot_rows(item: &str, tally: Tally, epoch: i64, now_ms: i64) -> Vec<Item> {
    let id = ItemId::parse(item).expect("a valid item id");
    let slots: Vec<(u32, u32)> = (1..=HOT_PARTITIONS)
        .flat_map(|h| (0..HOT_ROWS_PER_PARTITION).map(move |r| (h, r)))
        .collect();
    let share = |total: i64, slot: usize| {
        let k = slots.len() as i64;
        total / k + i64::from((slot as i64) < total % k)
    };
    let mut rows: Vec<Item> = slots
        .iter()
        .enumerate()
        .map(|(slot, (h, r))| {
            let split = Tally {
                like: share(tally.like, slot),
                dislike: share(tally.dislike, slot),
            };
            let row = format!("D#{}", mix(u64::from(h * 100 + r)) % COUNT_ROWS);
            count_row(
                &overflow_partition(&id, *h),
                &row,
                split,
                Epochs::Two(epoch),
                now_ms,
            )
        })
        .collect();
    rows.push(HashMap::from([
        ("item_id".to_owned(), s(item)),
        ("shard".to_owned(), s("H")),
        ("partitions".to_owned(), n(i64::from(HOT_PARTITIONS))),
    ]));
    rows
}

/// A count row as the aggregator leaves it: totals, its first epoch and, when it took
/// changes in a later one too (`Subtotals::After`), that epoch's subtotals.
fn count_row(partition: &str, row: &str, tally: Tally, epochs: Epochs, now_ms: i64) -> Item {
    let mut item = HashMap::from([
        ("item_id".to_owned(), s(partition)),
        ("shard".to_owned(), s(row)),
        ("like_count".to_owned(), n(tally.like)),
        ("dislike_count".to_owned(), n(tally.dislike)),
        ("updated_at".to_owned(), n(now_ms)),
    ]);
    let first = match epochs {
        Epochs::One(epoch) => epoch,
        Epochs::Two(epoch) => {
            let (like, dislike) = subtotal_attributes(epoch);
            item.insert(like, n(tally.like));
            item.insert(dislike, n(tally.dislike));
            epoch - 1
        }
    };
    item.insert(FIRST_EPOCH.to_owned(), n(first));
    item
}

/// The epochs a row took its changes in: all in one (a cold item's), or all in the last of
/// two (a hot item's rows, written in every epoch, also took some in the one before; here
/// none of them net, so the row's totals are that epoch's).
#[derive(Debug, Clone, Copy)]
enum Epochs {
    One(i64),
    Two(i64),
}
