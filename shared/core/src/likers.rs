//! Who liked an item: the read model's layout and the decisions made on it, free of AWS types.
//!
//! An item's likers live in [`LIKER_BUCKETS`] buckets (`item_id#<hash(user) mod B>`), so a
//! viral item's liker writes spread over that many partition keys instead of melting one.
//! Each (item, user) is one entry holding the order (the row's creation, then `op_id`) of the
//! last flip applied to it: a flip applies only over an older one, so duplicates, retries and
//! out-of-order deliveries of the event log leave the entry as the newest flip says, also
//! across an erasure (a row written again is a newer life of it). An unlike keeps the entry as a
//! tombstone without a position (out of the index) until the log can no longer deliver an
//! older flip.
//!
//! A dislike keeps the entry too, without a position and without expiring, so the users who
//! react to an item at all can be found through its buckets (a moderator's removal of the
//! item turns each of their reactions to NONE) without an index on the item.
//!
//! A page is the newest `limit` entries over every bucket ([`newest_first`]), read with one
//! Query of each bucket that ever held a like: the item's occupancy row lists them (written
//! before a bucket's first liked entry), so an item with a few likers costs a few Queries,
//! and a viral one 64.

use crate::pipeline::{user_hash, ReactionEvent, REPLAY_HORIZON_MS};
use crate::{ItemId, ReactionState};

/// Buckets per item. A viral item's 50,000 likes/s put about 780 writes/s on each bucket's
/// index partition, under DynamoDB's 1,000 per partition key; a page reads every bucket
/// once (a Query each, concurrently). Fixed: entries are found by it.
pub const LIKER_BUCKETS: u32 = 64;

/// The number of the bucket holding `user_id`'s entries.
pub fn bucket_of(user_id: &str) -> u32 {
    user_hash(user_id) % LIKER_BUCKETS
}

/// Bucket `n` of `item`: `item_id#<n>`.
pub fn bucket_key(item: &ItemId, n: u32) -> String {
    format!("{item}#{n}")
}

/// The bucket holding `user_id`'s entry for `item`.
pub fn bucket(item: &ItemId, user_id: &str) -> String {
    bucket_key(item, bucket_of(user_id))
}

/// Every bucket of `item`, in bucket order.
pub fn buckets(item: &ItemId) -> Vec<String> {
    (0..LIKER_BUCKETS).map(|n| bucket_key(item, n)).collect()
}

/// The row listing which of `item`'s buckets ever held a liked entry: `item_id#occupied`
/// (item ids hold no `#`, so it is no bucket's key).
pub fn occupancy_key(item: &ItemId) -> String {
    format!("{item}#occupied")
}

/// An entry's place in its bucket's index, ordered as a string: liked_at (epoch ms, fixed
/// width) then the user id, so descending order is newest first and ties are broken.
pub fn position(liked_at_ms: i64, user_id: &str) -> String {
    format!("{liked_at_ms:015}#{user_id}")
}

/// What a flip does to an item's likers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LikerChange {
    /// The user likes the item since this time (epoch ms).
    Liked { liked_at_ms: i64 },
    /// The user no longer likes it; the tombstone is kept until this time (epoch ms).
    Unliked { keep_until_ms: i64 },
    /// The user dislikes it: no position (no liker), kept for as long as it holds.
    Disliked,
}

/// One flip's write to the likers model: the entry of (item, user), at the flip's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LikerUpdate {
    pub item_id: ItemId,
    /// The entry's bucket ([`bucket_of`] the user).
    pub bucket: u32,
    pub user_id: String,
    /// When the flip's row was created, then its `op_id` ([`ReactionEvent::order`]).
    pub row_created_ms: i64,
    pub op_id: u64,
    pub change: LikerChange,
}

/// The update a flip's event makes to its entry: the entry holds the newest flip's state,
/// liked (with its position), disliked, or a tombstone. `None` for an event that flips
/// nothing.
pub fn liker_update(event: &ReactionEvent, now_ms: i64) -> Option<LikerUpdate> {
    if event.like_delta == 0 && event.dislike_delta == 0 {
        return None;
    }
    let item = ItemId::parse(&event.item_id).ok()?;
    let change = match event.new_state {
        ReactionState::Like => LikerChange::Liked {
            liked_at_ms: event.event_time_ms,
        },
        ReactionState::Dislike => LikerChange::Disliked,
        ReactionState::None => LikerChange::Unliked {
            keep_until_ms: now_ms + REPLAY_HORIZON_MS,
        },
    };
    Some(LikerUpdate {
        bucket: bucket_of(&event.user_id),
        item_id: item,
        user_id: event.user_id.clone(),
        row_created_ms: event.row_created_ms,
        op_id: event.op_id,
        change,
    })
}

/// One (item, user) like at a flip's order: a liked entry as the Likers table holds it, or a
/// reaction row in LIKE as an export of the Reactions table holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LikeAt {
    pub row_created_ms: i64,
    pub op_id: u64,
    pub liked_at_ms: i64,
}

impl LikeAt {
    fn order(&self) -> (i64, u64) {
        (self.row_created_ms, self.op_id)
    }
}

/// The write that repairs `user_id`'s entry for `item` from an export at a cut, if any:
/// `listed` is the entry when it is liked, `exported` the row when the export has it in LIKE.
///
/// - Exported but not listed, or listed at an older flip: the exported like is applied at
///   its own order, so a newer entry (a flip after the cut, a tombstone) refuses it.
/// - Listed but not exported: the like was undone before the cut (an unlike or an erasure
///   whose event was lost), unless it was given too near the cut for the export to be sure
///   of it (`liked_at` at or after `settled_before_ms`). It is undone at the order of the
///   flip right after it, as the lost event would have been.
/// - Listed at the exported flip or a newer one: in sync, or live work after the cut.
pub fn repair(
    item: &ItemId,
    user_id: &str,
    listed: Option<LikeAt>,
    exported: Option<LikeAt>,
    settled_before_ms: i64,
    now_ms: i64,
) -> Option<LikerUpdate> {
    let update = |at: (i64, u64), change| LikerUpdate {
        item_id: item.clone(),
        bucket: bucket_of(user_id),
        user_id: user_id.to_owned(),
        row_created_ms: at.0,
        op_id: at.1,
        change,
    };
    match (listed, exported) {
        (listed, Some(exported)) if listed.is_none_or(|l| l.order() < exported.order()) => {
            Some(update(
                exported.order(),
                LikerChange::Liked {
                    liked_at_ms: exported.liked_at_ms,
                },
            ))
        }
        (Some(listed), None) if listed.liked_at_ms < settled_before_ms => Some(update(
            (listed.row_created_ms, listed.op_id + 1),
            LikerChange::Unliked {
                keep_until_ms: now_ms + REPLAY_HORIZON_MS,
            },
        )),
        _ => None,
    }
}

impl LikerUpdate {
    /// The entry's bucket key.
    pub fn bucket_key(&self) -> String {
        bucket_key(&self.item_id, self.bucket)
    }
}

/// One liker as a page lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Liker {
    pub user_id: String,
    pub liked_at_ms: i64,
}

impl Liker {
    pub fn position(&self) -> String {
        position(self.liked_at_ms, &self.user_id)
    }
}

/// The newest `limit` entries over every bucket, and whether entries follow them. Each run
/// is a bucket's newest entries after the page's start, newest first, at most `limit + 1`
/// of them: no bucket can hold more of the page plus the one past it, so one read of each
/// bucket is always enough.
pub fn newest_first(runs: Vec<Vec<Liker>>, limit: usize) -> (Vec<Liker>, bool) {
    let mut all: Vec<Liker> = runs.into_iter().flatten().collect();
    all.sort_by_cached_key(|liker| std::cmp::Reverse(liker.position()));
    let more = all.len() > limit;
    all.truncate(limit);
    (all, more)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repair_adds_what_the_export_likes_and_undoes_what_it_does_not() {
        let item = ItemId::parse("game:r").unwrap();
        let at = |row_created_ms, op_id, liked_at_ms| LikeAt {
            row_created_ms,
            op_id,
            liked_at_ms,
        };
        let repair = |listed, exported| repair(&item, "u", listed, exported, 1_000, 5_000);
        // A lost like: added at its flip.
        let added = repair(None, Some(at(10, 3, 500))).unwrap();
        assert_eq!(
            (added.row_created_ms, added.op_id, added.change.clone()),
            (10, 3, LikerChange::Liked { liked_at_ms: 500 })
        );
        // A like listed at an older flip moves to the exported one.
        assert_eq!(
            repair(Some(at(10, 1, 100)), Some(at(10, 3, 500))),
            Some(added)
        );
        // In sync, or live work after the cut: nothing.
        assert_eq!(repair(Some(at(10, 3, 500)), Some(at(10, 3, 500))), None);
        assert_eq!(repair(Some(at(20, 1, 1_500)), Some(at(10, 3, 500))), None);
        // A lost unlike or erasure: undone at the next flip's order.
        let undone = repair(Some(at(10, 3, 500)), None).unwrap();
        assert_eq!(
            (undone.row_created_ms, undone.op_id, undone.change),
            (
                10,
                4,
                LikerChange::Unliked {
                    keep_until_ms: 5_000 + REPLAY_HORIZON_MS
                }
            )
        );
        // Liked too near the cut for the export to know: left alone.
        assert_eq!(repair(Some(at(10, 3, 1_000)), None), None);
        assert_eq!(repair(None, None), None);
    }
    use crate::ReactionState::{Dislike, Like, None as Neutral};
    use proptest::prelude::*;

    fn event(old: ReactionState, new: ReactionState, op_id: u64) -> ReactionEvent {
        let like = |s| i64::from(s == Like);
        let dislike = |s| i64::from(s == Dislike);
        ReactionEvent {
            event_id: format!("u1#game:1#{op_id}"),
            user_id: "u1".into(),
            item_id: "game:1".into(),
            op_id,
            old_state: old,
            new_state: new,
            like_delta: like(new) - like(old),
            dislike_delta: dislike(new) - dislike(old),
            event_time_ms: 1_700_000_000_000 + op_id as i64,
            source_sequence_number: op_id.to_string(),
            row_created_ms: 1_700_000_000_000,
            cause: None,
            reason: None,
            moderation_id: None,
        }
    }

    #[test]
    fn every_flip_updates_its_entry_and_only_likes_are_listed() {
        let now = 1_800_000_000_000;
        let liked = liker_update(&event(Neutral, Like, 1), now).unwrap();
        assert_eq!(
            liked.change,
            LikerChange::Liked {
                liked_at_ms: 1_700_000_000_001
            }
        );
        assert_eq!(
            bucket_key(&liked.item_id, liked.bucket),
            bucket(&ItemId::parse("game:1").unwrap(), "u1")
        );
        assert_eq!(liked.op_id, 1);
        for old in [Like, Dislike] {
            assert_eq!(
                liker_update(&event(old, Neutral, 2), now).unwrap().change,
                LikerChange::Unliked {
                    keep_until_ms: now + REPLAY_HORIZON_MS
                }
            );
        }
        for old in [Like, Neutral] {
            assert_eq!(
                liker_update(&event(old, Dislike, 3), now).unwrap().change,
                LikerChange::Disliked
            );
        }
        assert_eq!(liker_update(&event(Like, Like, 3), now), None);
    }

    #[test]
    fn users_spread_over_every_bucket_and_positions_sort_newest_last() {
        let item = ItemId::parse("viral").unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for n in 0..2_000 {
            seen.insert(bucket(&item, &format!("user{n}")));
        }
        assert_eq!(seen.len(), LIKER_BUCKETS as usize);
        assert_eq!(seen, buckets(&item).into_iter().collect());
        assert!(position(999, "b") < position(1_000, "a"));
        assert!(position(1_000, "a") < position(1_000, "b"));
    }

    /// Reads every bucket as the store does: its newest `limit + 1` entries.
    fn read_page(buckets: &[Vec<Liker>], limit: usize) -> (Vec<Liker>, bool) {
        let runs = buckets
            .iter()
            .map(|b| b.iter().take(limit + 1).cloned().collect())
            .collect();
        newest_first(runs, limit)
    }

    fn sorted(mut likers: Vec<Liker>) -> Vec<Liker> {
        likers.sort_by_key(|l| std::cmp::Reverse(l.position()));
        likers
    }

    proptest! {
        #[test]
        fn pages_are_exactly_the_newest_entries_of_all_buckets(
            entries in proptest::collection::vec((0u8..6, 0i64..50, 0u16..400), 0..300),
            limit in 1usize..30,
        ) {
            let mut all: Vec<(usize, Liker)> = Vec::new();
            for (bucket, at, user) in entries {
                let user_id = format!("user{user}");
                if all.iter().any(|(_, l)| l.user_id == user_id) {
                    continue;
                }
                all.push((usize::from(bucket), Liker { user_id, liked_at_ms: at }));
            }
            let mut buckets = vec![Vec::new(); 6];
            for (bucket, liker) in &all {
                buckets[*bucket].push(liker.clone());
            }
            let buckets: Vec<Vec<Liker>> = buckets.into_iter().map(sorted).collect();
            let expected = sorted(all.into_iter().map(|(_, l)| l).collect());
            // Page through as a client would: each page starts after the last one's end.
            let mut listed = Vec::new();
            let mut rest = buckets;
            loop {
                let (page, more) = read_page(&rest, limit);
                prop_assert!(page.len() <= limit);
                listed.extend(page.iter().cloned());
                let Some(last) = page.last() else {
                    prop_assert!(!more);
                    break;
                };
                let after = last.position();
                rest = rest
                    .into_iter()
                    .map(|b| b.into_iter().filter(|l| l.position() < after).collect())
                    .collect();
                let left: usize = rest.iter().map(Vec::len).sum();
                prop_assert_eq!(more, left > 0, "more says whether entries follow");
                if !more {
                    break;
                }
            }
            prop_assert_eq!(listed, expected);
        }
    }
}
