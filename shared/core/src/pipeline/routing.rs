//! Where a chunk's deltas land, and where its events go: the decisions that keep a viral item
//! from melting one partition key, on the Counts table or on the event log.
//!
//! Count rows: an item's **base** partition (partition key `item_id`, rows `D#0..D#K-1`) takes
//! the deltas of every item that is cold in a batch, so reading a cold item is one Query.
//! An item that is **hot** in a batch (at least [`HOT_ITEM_CHANGES`] changes in it) gets its
//! deltas written to one of H **overflow** partitions (`item_id#1..item_id#H`, same rows):
//! at hundreds of stream shards, every one of which commits a chunk or two a second that
//! touches the viral item, the writes spread over H partition keys instead of one. A marker
//! row in the base partition tells readers to read the overflow partitions too.
//!
//! The row and overflow partition are the stream shard's: one shard's chunks always write the
//! same row of an item, so a row carries the intent notes of the few shards that write it,
//! not of every shard of the stream.
//!
//! Why the batch, not the chunk, decides hotness: a chunk the size of a batch is the rule,
//! but an item with one change in each of several chunks would still write once per chunk.
//! An item with at most one change per batch writes its base partition at most once per
//! batch per shard.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use sha2::{Digest, Sha256};

use super::ChangeRecord;
use crate::likers::bucket_of;
use crate::reconcile::Period;
use crate::{Delta, ItemId, ReactionState};

/// An item with this many changes in one batch is hot for that batch.
pub const HOT_ITEM_CHANGES: usize = 2;

/// Which partition of an item a count row lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Lane {
    /// The item's own partition key: every cold write, and the overflow marker.
    Base,
    /// Overflow partition `h` (1-based): `item_id#h`.
    Overflow(u32),
}

/// One count row: an item, its partition, and the row `D#<row>` in it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CountTarget {
    pub item: ItemId,
    pub lane: Lane,
    pub row: u32,
}

impl CountTarget {
    /// The row's partition key on the Counts table. `#` never appears in an item id, so no
    /// overflow partition can be mistaken for another item.
    pub fn partition_key(&self) -> String {
        match self.lane {
            Lane::Base => self.item.as_str().to_owned(),
            Lane::Overflow(h) => overflow_partition(&self.item, h),
        }
    }
}

pub fn overflow_partition(item: &ItemId, h: u32) -> String {
    format!("{item}#{h}")
}

/// How an item's counts are spread: K rows per partition, H overflow partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountLayout {
    /// K: count rows per partition.
    pub rows: u32,
    /// H: overflow partitions a hot item's writes spread over.
    pub overflow_partitions: u32,
}

impl CountLayout {
    /// The row and overflow partition a stream shard's chunks write: from one hash of the
    /// shard's id, so the shards of a stream spread over all of them.
    pub fn slot(&self, shard_id: &str) -> (u32, u32) {
        let digest = Sha256::digest(shard_id.as_bytes());
        let prefix = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
        let rows = u64::from(self.rows.max(1));
        let row = (prefix % rows) as u32;
        let overflow = ((prefix / rows) % u64::from(self.overflow_partitions.max(1))) as u32 + 1;
        (row, overflow)
    }
}

/// The items hot in a batch: those with at least [`HOT_ITEM_CHANGES`] changes in it.
pub fn hot_items(batch: &[ChangeRecord]) -> BTreeSet<ItemId> {
    let mut changes: BTreeMap<&ItemId, usize> = BTreeMap::new();
    for change in batch.iter().filter_map(|r| r.change.as_ref()) {
        *changes.entry(&change.item_id).or_default() += 1;
    }
    changes
        .into_iter()
        .filter(|(_, n)| *n >= HOT_ITEM_CHANGES)
        .map(|(item, _)| item.clone())
        .collect()
}

/// What one chunk adds to one count row: the total, the same split by the epoch each change
/// was committed in, the changes that fell near a reconciliation cut (see
/// [`crate::reconcile`]), and the likers buckets its likes go to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowDelta {
    pub total: Delta,
    pub by_epoch: BTreeMap<i64, Delta>,
    pub near_cuts: BTreeMap<i64, u64>,
    /// The item's likers buckets ([`bucket_of`] the user) that a like in the chunk goes to:
    /// the row lists them, so a likers page reads the buckets an item's count rows list (a
    /// like is listed once it is counted) and no other.
    pub liked_buckets: BTreeSet<u32>,
}

impl RowDelta {
    /// True when writing it would change nothing: no count, no near-cut change, no bucket.
    /// A row whose changes cancel out still writes its near-cut changes (they make the item
    /// uncertain at that cut even when they net to zero).
    pub fn is_empty(&self) -> bool {
        self.total.is_zero() && self.near_cuts.is_empty() && self.liked_buckets.is_empty()
    }
}

/// What a chunk of stream shard `shard_id` adds to which count row: one row per item, however
/// many changes it holds, in the base partition for a cold item and in an overflow partition
/// for a hot one. Items with no change write nothing ([`RowDelta::is_empty`]).
pub fn route_chunk(
    chunk: &[ChangeRecord],
    shard_id: &str,
    hot: &BTreeSet<ItemId>,
    layout: CountLayout,
    period: Period,
) -> BTreeMap<CountTarget, RowDelta> {
    let (row, overflow) = layout.slot(shard_id);
    let mut deltas: BTreeMap<CountTarget, RowDelta> = BTreeMap::new();
    for record in chunk {
        let Some(change) = &record.change else {
            continue;
        };
        let lane = if hot.contains(&change.item_id) {
            Lane::Overflow(overflow)
        } else {
            Lane::Base
        };
        let target = CountTarget {
            item: change.item_id.clone(),
            lane,
            row,
        };
        let delta = change.transition.delta();
        let written = deltas.entry(target).or_default();
        written.total += delta;
        *written
            .by_epoch
            .entry(period.epoch(record.stream_time_ms))
            .or_default() += delta;
        if let Some(cut) = period.near_cut(record.stream_time_ms) {
            *written.near_cuts.entry(cut).or_default() += 1;
        }
        if change.transition.is_flip() && change.transition.to == ReactionState::Like {
            written.liked_buckets.insert(bucket_of(&change.user_id));
        }
    }
    for written in deltas.values_mut() {
        written.by_epoch.retain(|_, delta| !delta.is_zero());
    }
    deltas.retain(|_, written| !written.is_empty());
    deltas
}

/// The likers buckets a container's applied intents listed per item. A count row is never
/// deleted, so a bucket listed once stays listed: later chunks leave it out, and a viral
/// item's buckets are listed about once per container, not in every chunk (which would grow
/// its intents). Past [`ListedBuckets::CAPACITY`] pairs it forgets them all (a bucket
/// listed again is an idempotent ADD in a write made anyway).
#[derive(Debug, Default)]
pub struct ListedBuckets {
    listed: HashMap<ItemId, BTreeSet<u32>>,
    /// The (item, bucket) pairs `listed` holds.
    pairs: usize,
}

impl ListedBuckets {
    pub const CAPACITY: usize = 100_000;

    /// Leaves out of `deltas` the buckets listed for their items already, and a row left
    /// with no change.
    pub fn drop_listed(&self, deltas: &mut BTreeMap<CountTarget, RowDelta>) {
        for (target, delta) in deltas.iter_mut() {
            if let Some(listed) = self.listed.get(&target.item) {
                delta
                    .liked_buckets
                    .retain(|bucket| !listed.contains(bucket));
            }
        }
        deltas.retain(|_, delta| !delta.is_empty());
    }

    /// Remembers the buckets an applied intent's `deltas` listed.
    pub fn remember(&mut self, deltas: &BTreeMap<CountTarget, RowDelta>) {
        for (target, delta) in deltas {
            if delta.liked_buckets.is_empty() {
                continue;
            }
            if self.pairs + delta.liked_buckets.len() > Self::CAPACITY {
                self.listed.clear();
                self.pairs = 0;
            }
            let listed = self.listed.entry(target.item.clone()).or_default();
            let before = listed.len();
            listed.extend(&delta.liked_buckets);
            self.pairs += listed.len() - before;
        }
    }
}

/// The event log's partition key for a flip: the item and a hash of the user. One row's
/// flips share a key (so they stay in order on one Kinesis shard), while a viral item's
/// flips spread over every shard of the stream instead of saturating one. At most
/// 128 + 1 + 8 characters, inside Kinesis's 256.
pub fn event_partition_key(user_id: &str, item: &ItemId) -> String {
    format!("{item}#{:08x}", user_hash(user_id))
}

/// A short, stable name of a stream shard: 12 hex digits of its id's SHA-256. Count rows name
/// the shards that wrote them by it, one attribute each, so it is short; at 48 bits, the few
/// thousand shards a stream has in a day do not share one.
pub fn shard_tag(shard_id: &str) -> String {
    let digest = Sha256::digest(shard_id.as_bytes());
    let mut bytes = [0u8; 8];
    bytes[2..].copy_from_slice(&digest[..6]);
    format!("{:012x}", u64::from_be_bytes(bytes))
}

/// A stable, evenly spread hash of a user id: the first four bytes of its SHA-256. What
/// spreads one item's writes over the event log's shards and the likers' buckets.
pub fn user_hash(user_id: &str) -> u32 {
    let digest = Sha256::digest(user_id.as_bytes());
    u32::from_be_bytes(digest[..4].try_into().expect("4 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::Change;
    use crate::ReactionState::{Dislike, Like, None as Neutral};
    use crate::Transition;

    const LAYOUT: CountLayout = CountLayout {
        rows: 16,
        overflow_partitions: 8,
    };
    const HOUR: Period = Period {
        length_ms: 3_600_000,
        uncertainty_ms: 60_000,
    };

    fn like(n: usize, item: &str) -> ChangeRecord {
        ChangeRecord {
            event_id: format!("e{n}"),
            sequence_number: n.to_string(),
            // Mid-epoch: far from any reconciliation cut.
            stream_time_ms: 1_800_000,
            change: Some(Change {
                user_id: format!("u{n}"),
                item_id: ItemId::parse(item).unwrap(),
                transition: Transition::new(Neutral, Like),
                op_id: 1,
                event_time_ms: 0,
                row_created_ms: 0,
                liked_at_ms: None,
                moderated: None,
            }),
        }
    }

    #[test]
    fn an_item_with_several_changes_in_the_batch_is_hot() {
        let batch = vec![like(0, "viral"), like(1, "cold"), like(2, "viral")];
        let hot = hot_items(&batch);
        assert_eq!(hot, BTreeSet::from([ItemId::parse("viral").unwrap()]));
    }

    #[test]
    fn hot_items_go_to_an_overflow_partition_and_cold_ones_to_their_base() {
        let batch = vec![like(0, "viral"), like(1, "cold"), like(2, "viral")];
        let hot = hot_items(&batch);
        let routed = route_chunk(&batch, "shard-0", &hot, LAYOUT, HOUR);
        assert_eq!(routed.len(), 2, "{routed:?}");
        let (viral, viral_delta) = routed
            .iter()
            .find(|(t, _)| t.item.as_str() == "viral")
            .unwrap();
        assert!(matches!(viral.lane, Lane::Overflow(h) if (1..=8).contains(&h)));
        assert_eq!(viral_delta.total.like, 2);
        assert!(viral.partition_key().starts_with("viral#"));
        let (cold, _) = routed
            .iter()
            .find(|(t, _)| t.item.as_str() == "cold")
            .unwrap();
        assert_eq!(
            (cold.lane, cold.partition_key().as_str()),
            (Lane::Base, "cold")
        );
        assert_eq!(cold.row, viral.row, "a shard writes one row index");
    }

    #[test]
    fn deltas_are_split_by_epoch_and_changes_near_a_cut_are_counted() {
        let mut batch = vec![like(0, "game:1"), like(1, "game:1"), like(2, "game:1")];
        batch[0].stream_time_ms = 3_600_000 * 5 - 10_000; // near cut 5, epoch 4
        batch[1].stream_time_ms = 3_600_000 * 5 + 1_800_000; // epoch 5
        batch[2].stream_time_ms = 3_600_000 * 5 + 1_800_001;
        let routed = route_chunk(&batch, "shard-0", &BTreeSet::new(), LAYOUT, HOUR);
        let written = routed.values().next().unwrap();
        assert_eq!(written.total.like, 3);
        assert_eq!(
            written
                .by_epoch
                .iter()
                .map(|(e, d)| (*e, d.like))
                .collect::<Vec<_>>(),
            [(4, 1), (5, 2)]
        );
        assert_eq!(written.near_cuts, BTreeMap::from([(5, 1)]));
    }

    #[test]
    fn a_row_lists_the_likers_buckets_of_its_likes_and_no_other() {
        let mut batch = [like(0, "game:1"), like(1, "game:1"), like(2, "game:1")];
        // u1 unlikes and u2 dislikes: the likes balance out, u0's like is left.
        batch[1].change.as_mut().unwrap().transition = Transition::new(Like, Neutral);
        batch[2].change.as_mut().unwrap().transition = Transition::new(Neutral, Dislike);
        let routed = route_chunk(&batch[..2], "shard-0", &BTreeSet::new(), LAYOUT, HOUR);
        let written = routed.values().next().expect("a row with a like's bucket");
        assert!(written.total.is_zero());
        assert_eq!(written.liked_buckets, BTreeSet::from([bucket_of("u0")]));
        let routed = route_chunk(&batch[1..], "shard-0", &BTreeSet::new(), LAYOUT, HOUR);
        let written = routed.values().next().unwrap();
        assert!(written.liked_buckets.is_empty(), "{written:?}");
    }

    #[test]
    fn a_bucket_listed_for_an_item_is_left_out_of_its_later_rows_and_no_other_items() {
        let batch = [like(0, "game:1"), like(0, "game:2"), like(1, "game:1")];
        let route = |records: &[ChangeRecord]| {
            route_chunk(records, "shard-0", &BTreeSet::new(), LAYOUT, HOUR)
        };
        let mut listed = ListedBuckets::default();
        listed.remember(&route(&batch[..1]));
        let mut again = route(&batch[..1]);
        listed.drop_listed(&mut again);
        let row = again.values().next().expect("the like is counted");
        assert!(
            row.liked_buckets.is_empty() && row.total.like == 1,
            "{row:?}"
        );
        let mut rows = route(&batch[1..]);
        listed.drop_listed(&mut rows);
        let buckets: Vec<(&str, Vec<u32>)> = rows
            .iter()
            .map(|(t, d)| (t.item.as_str(), d.liked_buckets.iter().copied().collect()))
            .collect();
        assert_eq!(
            buckets,
            [
                ("game:1", vec![bucket_of("u1")]),
                ("game:2", vec![bucket_of("u0")])
            ]
        );
        assert_eq!(rows.values().map(|d| d.total.like).sum::<i64>(), 2);
    }

    #[test]
    fn shards_spread_over_every_row_and_overflow_partition() {
        let slots: BTreeSet<(u32, u32)> = (0..4000)
            .map(|n| LAYOUT.slot(&format!("shardId-{n:020}-{n:08x}")))
            .collect();
        let every: BTreeSet<(u32, u32)> =
            (0..16).flat_map(|k| (1..=8).map(move |h| (k, h))).collect();
        assert_eq!(
            slots, every,
            "4000 shards reach all 128 slots, and only those"
        );
    }

    #[test]
    fn a_viral_items_events_spread_over_many_partition_keys_and_a_rows_stay_together() {
        let item = ItemId::parse("viral").unwrap();
        let keys: BTreeSet<String> = (0..1000)
            .map(|u| event_partition_key(&format!("user-{u}"), &item))
            .collect();
        assert!(keys.len() > 990, "{} keys for 1000 users", keys.len());
        assert_eq!(
            event_partition_key("alice", &item),
            event_partition_key("alice", &item)
        );
        let longest = ItemId::parse(&"x".repeat(128)).unwrap();
        assert!(event_partition_key(&"u".repeat(128), &longest).len() <= 256);
    }
}
