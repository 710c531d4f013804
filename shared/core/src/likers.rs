//! Who liked an item: the read model's layout and the decisions made on it, free of AWS types.
//!
//! An item's likers live in [`LIKER_BUCKETS`] buckets (`item_id#<hash(user) mod B>`), so a
//! viral item's liker writes spread over that many partition keys instead of melting one.
//! In its bucket a like is an entry keyed by its [`position`] (when it was liked, then the
//! user), so a bucket read newest first is its likers newest first, with no index to keep.
//! Each entry holds the order (the row's creation, then `op_id`) of the last flip applied to
//! it: the flip that began the like, or the one that ended it, which leaves it a tombstone
//! (no `liked_at`, a TTL) until the log can no longer deliver an older flip. A flip applies
//! only over an older one, so duplicates, retries and out-of-order deliveries of the event
//! log leave each like as its newest flip says, also across an erasure (a row written again
//! is a newer life of it). A like and its end are found by the same key: the event that ends
//! a like carries when it was liked.
//!
//! A dislike is the user's one entry after every position ([`dislike_entry`]), kept without
//! expiring while it holds, so the users who react to an item at all can be found through
//! its buckets (a moderator's removal of the item turns each of their reactions to NONE)
//! without an index on the item.
//!
//! A page is the newest `limit` entries its reader may see, merged newest first over every
//! bucket a counted like went to ([`PageFill`]): the item's count rows list them, each
//! row's write listing the buckets of the likes it counts, so an item with a few likers
//! costs a few Queries, and a viral one every bucket. A like is listed once it is counted
//! (its entry may be written before: the counts and the likers are fed apart). When the
//! reader may see every entry, one Query of each bucket is the whole read; entries hidden
//! from the reader make the merge read further, only in the buckets it ran through.

use std::collections::{HashSet, VecDeque};

use crate::pipeline::{user_hash, ReactionEvent, REPLAY_HORIZON_MS};
use crate::{ItemId, LikersCursor, ReactionState};

/// Buckets per item. A viral item's 50,000 likes/s put about 195 writes/s on each bucket's
/// partition. The event log's shards write a bucket in waves (each shard once per batch,
/// and shards that began together stay in step), so a bucket takes about four seconds of
/// its rate at once when they line up: under DynamoDB's 1,000 per partition key even then
/// (`make bench-scale` gives the worst sliding second). A page reads each bucket the item's
/// count rows list once (a Query each, concurrently). Fixed once deployed: entries are found
/// by it.
pub const LIKER_BUCKETS: u32 = 256;

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

/// A like's entry key in its bucket, ordered as a string: liked_at (epoch ms, fixed width)
/// then the user id, so descending order is newest first and ties are broken.
pub fn position(liked_at_ms: i64, user_id: &str) -> String {
    format!("{liked_at_ms:015}#{user_id}")
}

/// The key every like's position sorts under, and every dislike entry from: a read of a
/// bucket's likes starts below it.
pub const LIKES_END: &str = "~";

/// The key of `user_id`'s dislike entry in its bucket: `~#<user>`, after every position.
pub fn dislike_entry(user_id: &str) -> String {
    format!("{LIKES_END}#{user_id}")
}

/// The user an entry key names: what follows its first `#` (a position's time and the
/// dislikes' `~` hold none).
pub fn entry_user(entry: &str) -> &str {
    entry.split_once('#').map_or(entry, |(_, user)| user)
}

/// What a flip does to an entry of an item's likers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LikerChange {
    /// The user liked the item at this time (epoch ms): the like's entry is listed.
    Liked { liked_at_ms: i64 },
    /// The like given at `liked_at_ms` ended; its entry is a tombstone until `keep_until_ms`.
    Unliked {
        liked_at_ms: i64,
        keep_until_ms: i64,
    },
    /// The user dislikes it: the dislike entry (no liker), kept for as long as it holds.
    Disliked,
    /// The dislike ended; its entry is a tombstone until `keep_until_ms`.
    Undisliked { keep_until_ms: i64 },
}

impl LikerChange {
    /// Whether the write begins or ends a like: the flips the leaderboard scores, which the
    /// like's entry claims for the log record that brought them.
    pub fn claims(&self) -> bool {
        matches!(self, Self::Liked { .. } | Self::Unliked { .. })
    }
}

/// One write to the likers model: an entry of (item, user), at the order of the flip that
/// makes it.
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

/// The writes a flip's event makes, at its order: it ends the reaction it leaves (the like
/// at its position, or the dislike) and begins the one it sets. None for an event that
/// flips nothing or names no item; a like ended by an event that does not say when it was
/// liked cannot be found, so that write is left out ([`unplaced`] tells).
pub fn liker_updates(event: &ReactionEvent, now_ms: i64) -> Vec<LikerUpdate> {
    let Ok(item) = ItemId::parse(&event.item_id) else {
        return Vec::new();
    };
    if event.like_delta == 0 && event.dislike_delta == 0 {
        return Vec::new();
    }
    let keep_until_ms = now_ms + REPLAY_HORIZON_MS;
    let ended = match event.old_state {
        ReactionState::Like => event.liked_at_ms.map(|liked_at_ms| LikerChange::Unliked {
            liked_at_ms,
            keep_until_ms,
        }),
        ReactionState::Dislike => Some(LikerChange::Undisliked { keep_until_ms }),
        ReactionState::None => None,
    };
    let begun = match event.new_state {
        // The row's `liked_at` is its flip's time, which an event from before events carried
        // it still has.
        ReactionState::Like => Some(LikerChange::Liked {
            liked_at_ms: event.liked_at_ms.unwrap_or(event.event_time_ms),
        }),
        ReactionState::Dislike => Some(LikerChange::Disliked),
        ReactionState::None => None,
    };
    ended
        .into_iter()
        .chain(begun)
        .map(|change| LikerUpdate {
            bucket: bucket_of(&event.user_id),
            item_id: item.clone(),
            user_id: event.user_id.clone(),
            row_created_ms: event.row_created_ms,
            op_id: event.op_id,
            change,
        })
        .collect()
}

/// Whether `event` ends a like it does not place (no `liked_at_ms`): its entry stays listed
/// until reconciliation undoes it.
pub fn unplaced(event: &ReactionEvent) -> bool {
    event.old_state == ReactionState::Like && event.like_delta != 0 && event.liked_at_ms.is_none()
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
    /// The order of the flip that began the like.
    pub fn order(&self) -> (i64, u64) {
        (self.row_created_ms, self.op_id)
    }
}

/// The writes that repair `user_id`'s likes of `item` from an export at a cut: `listed` is
/// one of the user's liked entries (a user may have several while events are lost),
/// `exported` the row when the export has it in LIKE.
///
/// - Exported but not listed, or listed at an older flip: the exported like is applied at
///   its own order, so a newer entry (a flip after the cut, a tombstone) refuses it; the
///   older listed like was undone before the cut, and is undone as below.
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
) -> Vec<LikerUpdate> {
    let update = |at: (i64, u64), change| LikerUpdate {
        item_id: item.clone(),
        bucket: bucket_of(user_id),
        user_id: user_id.to_owned(),
        row_created_ms: at.0,
        op_id: at.1,
        change,
    };
    let undo = |listed: LikeAt| {
        update(
            (listed.row_created_ms, listed.op_id + 1),
            LikerChange::Unliked {
                liked_at_ms: listed.liked_at_ms,
                keep_until_ms: now_ms + REPLAY_HORIZON_MS,
            },
        )
    };
    match (listed, exported) {
        (listed, Some(exported)) if listed.is_none_or(|l| l.order() < exported.order()) => listed
            .map(undo)
            .into_iter()
            .chain([update(
                exported.order(),
                LikerChange::Liked {
                    liked_at_ms: exported.liked_at_ms,
                },
            )])
            .collect(),
        (Some(listed), None) if listed.liked_at_ms < settled_before_ms => vec![undo(listed)],
        _ => Vec::new(),
    }
}

impl LikerUpdate {
    /// The entry's bucket key.
    pub fn bucket_key(&self) -> String {
        bucket_key(&self.item_id, self.bucket)
    }

    /// The entry's key in its bucket: the like's position, or the user's dislike entry.
    pub fn entry(&self) -> String {
        match self.change {
            LikerChange::Liked { liked_at_ms } | LikerChange::Unliked { liked_at_ms, .. } => {
                position(liked_at_ms, &self.user_id)
            }
            LikerChange::Disliked | LikerChange::Undisliked { .. } => dislike_entry(&self.user_id),
        }
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

/// A page of an item's likers as its reader sees them, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LikersPage {
    pub likers: Vec<Liker>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<LikersCursor>,
}

/// Likers a page examines at most in a round after its first (which examines `limit + 1`):
/// their settings are one BatchGetItem of at most 100 keys.
pub const MAX_ROUND_LIKERS: usize = 100;

/// One read a page's merge asks for: bucket `run`'s newest `limit` entries after `after`
/// (a [`position`]; from the newest with `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRead {
    pub run: usize,
    pub after: Option<String>,
    pub limit: usize,
}

/// What a read found: the entries, newest first, and whether the bucket holds more past them.
pub type RunPart = (Vec<Liker>, bool);

/// One bucket in a page's merge: the entries read and not yet taken (with their positions),
/// where its next read starts, and whether it holds more past what was read.
struct Run {
    entries: VecDeque<(String, Liker)>,
    after: Option<String>,
    more: bool,
}

/// The merge of a page's buckets, newest first, each read only as far as the page needs.
struct NewestFirst {
    runs: Vec<Run>,
}

impl NewestFirst {
    fn new(runs: usize, after: Option<String>) -> Self {
        let run = || Run {
            entries: VecDeque::new(),
            after: after.clone(),
            more: true,
        };
        Self {
            runs: (0..runs).map(|_| run()).collect(),
        }
    }

    /// The reads needed before the next entry can be told: each bucket whose read entries are
    /// all taken while it holds more, for up to `limit` of them.
    fn reads(&self, limit: usize) -> Vec<RunRead> {
        self.runs
            .iter()
            .enumerate()
            .filter(|(_, run)| run.entries.is_empty() && run.more)
            .map(|(n, run)| RunRead {
                run: n,
                after: run.after.clone(),
                limit,
            })
            .collect()
    }

    fn fill(&mut self, n: usize, (likers, more): RunPart) {
        let run = &mut self.runs[n];
        // A read that found nothing ends its bucket, whatever it said: the merge always moves.
        run.more = more && !likers.is_empty();
        for liker in likers {
            let position = liker.position();
            run.after = Some(position.clone());
            run.entries.push_back((position, liker));
        }
    }

    /// The newest entry not yet taken, once [`Self::reads`] asks for nothing.
    fn take(&mut self) -> Option<Liker> {
        let newest = self
            .runs
            .iter()
            .enumerate()
            .filter_map(|(n, run)| run.entries.front().map(|(position, _)| (position, n)))
            .max()?
            .1;
        self.runs[newest]
            .entries
            .pop_front()
            .map(|(_, liker)| liker)
    }
}

/// What a page being filled needs next.
#[derive(Debug, PartialEq, Eq)]
pub enum Step<'a> {
    /// Read these buckets (all at once) and hand what they found to [`PageFill::read`].
    Read(Vec<RunRead>),
    /// Say which of these likers the reader may see, in one go, to [`PageFill::judged`].
    Judge(&'a [Liker]),
    /// The page.
    Done(LikersPage),
}

/// The next page after a cursor of the `limit` (at least 1) newest likers the reader may
/// see, merged over an item's buckets; the caller does the reads and the judging it asks for
/// ([`PageFill::step`]).
///
/// Each round takes the next candidates from the merge, has them judged at once, and keeps
/// the ones shown; it stops at the first shown entry past the page, or at the end of the
/// list. So every page but the last is full, the last is the only one without a cursor, and
/// the cursor is the last entry examined before the one past the page: the next page starts
/// right after this one's hidden tail, and pages list every shown entry exactly once. The
/// cursor's entry may be hidden from the reader: the cursor seals it ([`crate::cursor`]). A user
/// at two likes (while the event that ended the older one is late or lost) is listed once a
/// page, at the newest: the older counts as hidden. A round examines what the page still needs and the one past it, so a page nothing is
/// hidden from is one round, and a bucket read is `limit + 1` entries, as an unfiltered
/// merge reads; each round after that examines twice as many as the page still needs as the
/// one before, up to [`MAX_ROUND_LIKERS`], so a long run of hidden entries costs a few
/// rounds, not one per entry.
pub struct PageFill {
    merge: NewestFirst,
    limit: usize,
    likers: Vec<Liker>,
    /// The users listed: a user at two likes (while an unlike's event is late or lost) is
    /// listed once, at the newest.
    listed: HashSet<String>,
    /// The last entry examined: where the next page starts.
    examined: Option<Liker>,
    round: u32,
    wanted: usize,
    candidates: Vec<Liker>,
    /// The merge has no entry left.
    ended: bool,
    /// The page is decided, with its cursor or none.
    decided: Option<Option<LikersCursor>>,
}

impl PageFill {
    /// A page of `limit` over `runs` buckets, after `after` (from the newest with `None`).
    pub fn new(runs: usize, limit: usize, after: Option<&LikersCursor>) -> Self {
        Self {
            merge: NewestFirst::new(runs, after.map(|c| position(c.liked_at_ms, &c.user_id))),
            limit,
            likers: Vec::with_capacity(limit),
            listed: HashSet::new(),
            examined: None,
            round: 0,
            wanted: limit + 1,
            candidates: Vec::new(),
            ended: false,
            decided: None,
        }
    }

    pub fn step(&mut self) -> Step<'_> {
        if let Some(next) = self.decided.take() {
            return Step::Done(self.page(next));
        }
        while self.candidates.len() < self.wanted && !self.ended {
            let reads = self.merge.reads(self.wanted);
            if !reads.is_empty() {
                return Step::Read(reads);
            }
            match self.merge.take() {
                Some(liker) => self.candidates.push(liker),
                None => self.ended = true,
            }
        }
        if self.candidates.is_empty() {
            return Step::Done(self.page(None));
        }
        Step::Judge(&self.candidates)
    }

    /// What the reads [`Step::Read`] asked for found, in their order.
    pub fn read(&mut self, reads: Vec<RunRead>, parts: Vec<RunPart>) {
        for (read, part) in reads.into_iter().zip(parts) {
            self.merge.fill(read.run, part);
        }
    }

    /// Whether the reader may see each liker [`Step::Judge`] asked about, in their order.
    pub fn judged(&mut self, shown: Vec<bool>) {
        for (liker, shown) in std::mem::take(&mut self.candidates).into_iter().zip(shown) {
            if shown && !self.listed.contains(&liker.user_id) {
                if self.likers.len() == self.limit {
                    self.decided = Some(self.examined.take().map(|last| LikersCursor {
                        liked_at_ms: last.liked_at_ms,
                        user_id: last.user_id,
                    }));
                    return;
                }
                self.listed.insert(liker.user_id.clone());
                self.likers.push(liker.clone());
            }
            self.examined = Some(liker);
        }
        if self.ended {
            self.decided = Some(None);
            return;
        }
        self.round += 1;
        let needed = self.limit + 1 - self.likers.len();
        self.wanted = (needed << self.round.min(7)).min(MAX_ROUND_LIKERS);
    }

    fn page(&mut self, next: Option<LikersCursor>) -> LikersPage {
        LikersPage {
            likers: std::mem::take(&mut self.likers),
            next,
        }
    }
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
        let written = |updates: Vec<LikerUpdate>| -> Vec<(i64, u64, String, LikerChange)> {
            updates
                .into_iter()
                .map(|u| (u.row_created_ms, u.op_id, u.entry(), u.change))
                .collect()
        };
        let keep_until_ms = 5_000 + REPLAY_HORIZON_MS;
        // A lost like: added at its flip and its position.
        let added = (
            10,
            3,
            position(500, "u"),
            LikerChange::Liked { liked_at_ms: 500 },
        );
        assert_eq!(
            written(repair(None, Some(at(10, 3, 500)))),
            vec![added.clone()]
        );
        // A like listed at an older flip was undone before the cut: it is undone at the
        // flip after it, and the exported one added.
        assert_eq!(
            written(repair(Some(at(10, 1, 100)), Some(at(10, 3, 500)))),
            vec![
                (
                    10,
                    2,
                    position(100, "u"),
                    LikerChange::Unliked {
                        liked_at_ms: 100,
                        keep_until_ms
                    }
                ),
                added
            ]
        );
        // In sync, or live work after the cut: nothing.
        assert_eq!(repair(Some(at(10, 3, 500)), Some(at(10, 3, 500))), vec![]);
        assert_eq!(repair(Some(at(20, 1, 1_500)), Some(at(10, 3, 500))), vec![]);
        // A lost unlike or erasure: undone at the next flip's order, at its position.
        assert_eq!(
            written(repair(Some(at(10, 3, 500)), None)),
            vec![(
                10,
                4,
                position(500, "u"),
                LikerChange::Unliked {
                    liked_at_ms: 500,
                    keep_until_ms
                }
            )]
        );
        // Liked too near the cut for the export to know: left alone.
        assert_eq!(repair(Some(at(10, 3, 1_000)), None), vec![]);
        assert_eq!(repair(None, None), vec![]);
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
            liked_at_ms: None,
            cause: None,
            reason: None,
            moderation_id: None,
        }
    }

    #[test]
    fn a_flip_ends_the_reaction_it_leaves_and_begins_the_one_it_sets() {
        let now = 1_800_000_000_000;
        let keep_until_ms = now + REPLAY_HORIZON_MS;
        let liked_at_ms = 1_700_000_000_000 - 5;
        let writes = |old, new, op_id| -> Vec<(String, LikerChange)> {
            let mut event = event(old, new, op_id);
            if old == Like || new == Like {
                event.liked_at_ms = Some(liked_at_ms);
            }
            liker_updates(&event, now)
                .into_iter()
                .map(|u| {
                    assert_eq!((u.op_id, u.bucket), (op_id, bucket_of("u1")));
                    (u.entry(), u.change)
                })
                .collect()
        };
        let like = (
            position(liked_at_ms, "u1"),
            LikerChange::Liked { liked_at_ms },
        );
        let unlike = (
            position(liked_at_ms, "u1"),
            LikerChange::Unliked {
                liked_at_ms,
                keep_until_ms,
            },
        );
        let dislike = (dislike_entry("u1"), LikerChange::Disliked);
        let undislike = (
            dislike_entry("u1"),
            LikerChange::Undisliked { keep_until_ms },
        );
        assert_eq!(writes(Neutral, Like, 1), vec![like.clone()]);
        assert_eq!(writes(Like, Neutral, 2), vec![unlike.clone()]);
        assert_eq!(writes(Neutral, Dislike, 3), vec![dislike.clone()]);
        assert_eq!(writes(Dislike, Neutral, 4), vec![undislike.clone()]);
        assert_eq!(writes(Like, Dislike, 5), vec![unlike, dislike]);
        assert_eq!(writes(Dislike, Like, 6), vec![undislike, like]);
        assert_eq!(writes(Like, Like, 7), vec![]);
        // The dislike entry sorts after every like, and both name their user.
        assert!(position(i64::from(u32::MAX) * 1_000_000, "zz") < dislike_entry("a"));
        assert_eq!(entry_user(&position(5, "a#b")), "a#b");
        assert_eq!(entry_user(&dislike_entry("a#b")), "a#b");
        // A like ended by an event that does not say when it was liked cannot be found.
        let lost = event(Like, Neutral, 8);
        assert!(unplaced(&lost) && liker_updates(&lost, now).is_empty());
        // A like begun by one from before events carried it is at its flip's time.
        assert_eq!(
            liker_updates(&event(Neutral, Like, 9), now)[0].change,
            LikerChange::Liked {
                liked_at_ms: 1_700_000_000_009
            }
        );
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

    /// What a page read costs: the bucket reads and the entries they returned, and the
    /// rounds of judging with the entries they asked about.
    #[derive(Debug, Default)]
    struct Cost {
        reads: usize,
        read_entries: usize,
        rounds: usize,
        examined: usize,
    }

    /// One page of `buckets` (each newest first) after `after`, read as the store reads
    /// them (a bucket's newest `limit` entries after a position), with `hidden` not shown.
    fn page(
        buckets: &[Vec<Liker>],
        hidden: &std::collections::HashSet<String>,
        limit: usize,
        after: Option<&LikersCursor>,
    ) -> (LikersPage, Cost) {
        let mut cost = Cost::default();
        let mut fill = PageFill::new(buckets.len(), limit, after);
        loop {
            match fill.step() {
                Step::Read(reads) => {
                    let parts = reads
                        .iter()
                        .map(|read| {
                            cost.reads += 1;
                            let mut rest = buckets[read.run]
                                .iter()
                                .filter(|l| read.after.as_ref().is_none_or(|a| &l.position() < a));
                            let part: Vec<Liker> =
                                rest.by_ref().take(read.limit).cloned().collect();
                            cost.read_entries += part.len();
                            (part, rest.next().is_some())
                        })
                        .collect();
                    fill.read(reads, parts);
                }
                Step::Judge(likers) => {
                    cost.rounds += 1;
                    cost.examined += likers.len();
                    let shown = likers
                        .iter()
                        .map(|l| !hidden.contains(&l.user_id))
                        .collect();
                    fill.judged(shown);
                }
                Step::Done(page) => return (page, cost),
            }
        }
    }

    fn sorted(mut likers: Vec<Liker>) -> Vec<Liker> {
        likers.sort_by_key(|l| std::cmp::Reverse(l.position()));
        likers
    }

    fn liker(user: usize, liked_at_ms: i64) -> Liker {
        Liker {
            user_id: format!("user{user:04}"),
            liked_at_ms,
        }
    }

    #[test]
    fn a_page_nothing_is_hidden_from_reads_each_bucket_once_and_examines_one_past_it() {
        // 64 buckets of 30 likers each, interleaved in time.
        let buckets: Vec<Vec<Liker>> = (0..64)
            .map(|b| {
                sorted(
                    (0..30)
                        .map(|n| liker(b * 30 + n, (n * 64 + b) as i64))
                        .collect(),
                )
            })
            .collect();
        let none = std::collections::HashSet::new();
        let (first, cost) = page(&buckets, &none, 20, None);
        assert_eq!(first.likers.len(), 20);
        assert_eq!((cost.reads, cost.rounds, cost.examined), (64, 1, 21));
        assert_eq!(cost.read_entries, 64 * 21);
        let last = first.likers.last().unwrap();
        assert_eq!(
            first.next,
            Some(LikersCursor {
                liked_at_ms: last.liked_at_ms,
                user_id: last.user_id.clone()
            })
        );
        // Nobody liked it: no round at all.
        // The largest page too: one round of `limit + 1`.
        let (largest, cost) = page(&buckets, &none, 100, None);
        assert_eq!(largest.likers.len(), 100);
        assert_eq!((cost.reads, cost.rounds, cost.examined), (64, 1, 101));
        let (empty, cost) = page(&vec![Vec::new(); 3], &none, 20, None);
        assert_eq!((empty.likers.len(), empty.next, cost.rounds), (0, None, 0));
    }

    #[test]
    fn a_user_at_two_likes_is_listed_once_at_the_newest_and_the_page_stays_full() {
        // user0001's unlike of an older like is late: both likes are in the buckets.
        let buckets = vec![
            sorted(vec![liker(1, 50), liker(2, 40), liker(4, 20)]),
            sorted(vec![liker(3, 30), liker(1, 10), liker(5, 5)]),
        ];
        let none = std::collections::HashSet::new();
        let (first, _) = page(&buckets, &none, 3, None);
        assert_eq!(first.likers, [liker(1, 50), liker(2, 40), liker(3, 30)]);
        let (second, _) = page(&buckets, &none, 3, first.next.as_ref());
        assert_eq!(
            (second.likers.as_slice(), second.next),
            (&[liker(4, 20), liker(1, 10), liker(5, 5)][..], None),
            "a later page lists the older like: it does not know the earlier pages"
        );
        let (whole, _) = page(&buckets, &none, 10, None);
        assert_eq!(
            whole.likers,
            [
                liker(1, 50),
                liker(2, 40),
                liker(3, 30),
                liker(4, 20),
                liker(5, 5)
            ]
        );
    }

    #[test]
    fn a_long_run_of_hidden_likers_costs_a_few_rounds_and_no_short_page() {
        // 500 likers in 8 buckets; the newest 400 are hidden from the reader.
        let all: Vec<Liker> = (0..500).map(|n| liker(n, 10_000 - n as i64)).collect();
        let mut buckets = vec![Vec::new(); 8];
        for (n, l) in all.iter().enumerate() {
            buckets[n % 8].push(l.clone());
        }
        let hidden: std::collections::HashSet<String> =
            all[..400].iter().map(|l| l.user_id.clone()).collect();
        let (first, cost) = page(&buckets, &hidden, 20, None);
        assert_eq!(first.likers, all[400..420]);
        assert!(cost.rounds <= 7, "{cost:?}");
        assert!(cost.examined <= 400 + 21 + 100, "{cost:?}");
        // The next page starts after the last liker listed, and is full too.
        let (second, _) = page(&buckets, &hidden, 20, first.next.as_ref());
        assert_eq!(second.likers, all[420..440]);
        // Hidden likers at the end of the list make no empty page with a cursor.
        let tail: std::collections::HashSet<String> =
            all[20..].iter().map(|l| l.user_id.clone()).collect();
        let (only, _) = page(&buckets, &tail, 20, None);
        assert_eq!((only.likers.as_slice(), only.next), (&all[..20], None));
    }

    proptest! {
        #[test]
        fn pages_list_every_shown_entry_once_newest_first_and_only_the_last_is_short(
            entries in proptest::collection::vec((0u8..6, 0i64..50, 0u16..400, any::<bool>()), 0..300),
            limit in 1usize..30,
        ) {
            let mut all: Vec<(usize, Liker)> = Vec::new();
            let mut hidden = std::collections::HashSet::new();
            for (bucket, at, user, hide) in entries {
                let user_id = format!("user{user}");
                if all.iter().any(|(_, l)| l.user_id == user_id) {
                    continue;
                }
                if hide {
                    hidden.insert(user_id.clone());
                }
                all.push((usize::from(bucket), Liker { user_id, liked_at_ms: at }));
            }
            let mut buckets = vec![Vec::new(); 6];
            for (bucket, liker) in &all {
                buckets[*bucket].push(liker.clone());
            }
            let buckets: Vec<Vec<Liker>> = buckets.into_iter().map(sorted).collect();
            let expected: Vec<Liker> = sorted(all.into_iter().map(|(_, l)| l).collect())
                .into_iter()
                .filter(|l| !hidden.contains(&l.user_id))
                .collect();
            // Page through as a client would: each page starts at the last one's cursor.
            let mut listed = Vec::new();
            let mut cursor = None;
            loop {
                let (page, _) = page(&buckets, &hidden, limit, cursor.as_ref());
                listed.extend(page.likers.iter().cloned());
                match page.next {
                    Some(next) => {
                        prop_assert_eq!(page.likers.len(), limit, "only the last page is short");
                        cursor = Some(next);
                    }
                    None => {
                        prop_assert!(page.likers.len() <= limit);
                        prop_assert!(
                            !page.likers.is_empty() || listed.is_empty(),
                            "a last page is empty only when the whole list is"
                        );
                        break;
                    }
                }
            }
            prop_assert_eq!(listed, expected);
        }
    }
}
