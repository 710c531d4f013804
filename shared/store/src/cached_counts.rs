//! A container's short memory of count reads, so a viral item read a million times a second
//! costs each container about one Query per second, not one per request.
//!
//! Each entry keeps the `as_of` that was read *before* its counts, so it stays exactly as
//! honest as the read it came from: an answer's `as_of` is the oldest among the entries it
//! uses, never a newer `as_of` read later. An entry is served only while it is younger than
//! [`COUNT_CACHE_TTL`], counted from before its Query was sent, and the cache holds at most
//! [`COUNT_CACHE_ITEMS`] items (the oldest reads go first).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use likes_core::pipeline::Counts;
use likes_core::ItemId;

use crate::{CountsStore, StoreError};

/// How long a read count may be served again. The answers' own `Cache-Control` lets shared
/// caches keep them longer; this bounds what one container adds on top.
pub const COUNT_CACHE_TTL: Duration = Duration::from_secs(1);
/// Items one container remembers: a couple of MB of entries, far more than the items a container
/// sees in a second.
pub const COUNT_CACHE_ITEMS: usize = 10_000;

/// Counts of some items, with the `as_of` every one of them is honest for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountsAsOf {
    pub counts: BTreeMap<ItemId, Counts>,
    /// Epoch millis before which every flip is counted in all of `counts`; `None`: unknown.
    pub as_of: Option<i64>,
}

/// Reads counts through the container's cache. Cheap to clone; clones share the cache.
#[derive(Debug, Clone)]
pub struct CachedCounts {
    store: CountsStore,
    cache: Arc<Mutex<CountCache>>,
}

impl CachedCounts {
    pub fn new(store: CountsStore) -> Self {
        Self {
            store,
            cache: Arc::default(),
        }
    }

    /// The likers buckets `item`'s count rows list ([`CountsStore::liked_buckets`]), read
    /// afresh: a likers page's reads follow them.
    pub async fn liked_buckets(&self, item: &ItemId) -> Result<Vec<u32>, StoreError> {
        self.store.liked_buckets(item).await
    }

    /// The counts of `items` (every one present in the answer) and their `as_of`. Items read
    /// less than [`COUNT_CACHE_TTL`] ago come from the cache; the rest are read in one
    /// concurrent batch of Queries.
    pub async fn read(&self, items: &[ItemId]) -> Result<CountsAsOf, StoreError> {
        let mut counts = BTreeMap::new();
        let mut as_ofs = Vec::new();
        let mut missing = Vec::new();
        {
            let cache = self.cache.lock().expect("cache lock");
            let now = Instant::now();
            for item in items {
                match cache.fresh(item, now) {
                    Some(entry) => {
                        counts.insert(item.clone(), entry.counts);
                        as_ofs.push(entry.as_of);
                    }
                    None => missing.push(item.clone()),
                }
            }
        }
        if !missing.is_empty() {
            // `as_of` first: it was published once the counts it promises were applied, so
            // rows read after it hold every flip before it. (Read together, the rows could
            // be read just before a newer `as_of` is published, and miss flips it promises.)
            let as_of = self.store.as_of().await;
            let read_at = Instant::now();
            let read = self.store.read_many(&missing).await?;
            let mut cache = self.cache.lock().expect("cache lock");
            for (item, item_counts) in read {
                cache.insert(
                    item.clone(),
                    Entry {
                        read_at,
                        counts: item_counts,
                        as_of,
                    },
                );
                counts.insert(item, item_counts);
            }
            as_ofs.push(as_of);
        }
        Ok(CountsAsOf {
            counts,
            // `None` (unknown) orders first, so one unknown makes the answer unknown.
            as_of: as_ofs.into_iter().min().flatten(),
        })
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// When the Query that read `counts` was sent.
    read_at: Instant,
    counts: Counts,
    as_of: Option<i64>,
}

/// A map with a queue of its reads in arrival order, so the oldest go first in O(1) each.
#[derive(Debug, Default)]
struct CountCache {
    entries: HashMap<ItemId, Entry>,
    /// Every insert; a slot whose read is no longer its item's entry is skipped when popped.
    order: VecDeque<(Instant, ItemId)>,
}

impl CountCache {
    fn fresh(&self, item: &ItemId, now: Instant) -> Option<&Entry> {
        self.entries
            .get(item)
            .filter(|entry| now.duration_since(entry.read_at) < COUNT_CACHE_TTL)
    }

    fn insert(&mut self, item: ItemId, entry: Entry) {
        // Two reads of one item in flight at once: the one sent later holds newer counts.
        if self
            .entries
            .get(&item)
            .is_some_and(|held| held.read_at > entry.read_at)
        {
            return;
        }
        self.order.push_back((entry.read_at, item.clone()));
        self.entries.insert(item, entry);
        self.evict(Instant::now());
    }

    /// Drops expired reads from the front of the queue, and the oldest ones beyond the cap.
    fn evict(&mut self, now: Instant) {
        while let Some((read_at, _)) = self.order.front() {
            let expired = now.duration_since(*read_at) >= COUNT_CACHE_TTL;
            if !expired && self.entries.len() <= COUNT_CACHE_ITEMS {
                break;
            }
            let (read_at, item) = self.order.pop_front().expect("the front exists");
            if self
                .entries
                .get(&item)
                .is_some_and(|entry| entry.read_at == read_at)
            {
                self.entries.remove(&item);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(n: usize) -> ItemId {
        ItemId::parse(&format!("game:{n}")).unwrap()
    }

    fn entry(read_at: Instant, like_count: u64, as_of: Option<i64>) -> Entry {
        Entry {
            read_at,
            counts: Counts {
                like_count,
                dislike_count: 0,
            },
            as_of,
        }
    }

    #[test]
    fn an_entry_is_served_only_while_younger_than_the_ttl() {
        let mut cache = CountCache::default();
        let read_at = Instant::now();
        cache.insert(item(1), entry(read_at, 1, Some(7)));
        let served = cache
            .fresh(&item(1), read_at + COUNT_CACHE_TTL / 2)
            .unwrap();
        assert_eq!((served.counts.like_count, served.as_of), (1, Some(7)));
        assert!(cache.fresh(&item(1), read_at + COUNT_CACHE_TTL).is_none());
    }

    #[test]
    fn a_late_answer_of_an_older_read_never_replaces_a_newer_one() {
        let mut cache = CountCache::default();
        let older = Instant::now();
        let newer = older + Duration::from_millis(10);
        cache.insert(item(1), entry(newer, 2, Some(20)));
        cache.insert(item(1), entry(older, 1, Some(10)));
        let served = cache.fresh(&item(1), newer).unwrap();
        assert_eq!((served.counts.like_count, served.as_of), (2, Some(20)));
    }

    #[test]
    fn the_cache_never_holds_more_than_its_cap_and_drops_the_oldest_first() {
        let mut cache = CountCache::default();
        let start = Instant::now();
        for n in 0..COUNT_CACHE_ITEMS + 5 {
            cache.insert(item(n), entry(start, n as u64, None));
            assert!(cache.entries.len() <= COUNT_CACHE_ITEMS);
        }
        assert!(cache.fresh(&item(0), start).is_none());
        assert!(cache.fresh(&item(COUNT_CACHE_ITEMS + 4), start).is_some());
        // Re-reads of one item leave one entry; their old queue slots are dropped as they expire.
        for _ in 0..3 {
            cache.insert(item(1), entry(Instant::now(), 9, None));
        }
        cache.evict(Instant::now() + COUNT_CACHE_TTL);
        assert!(cache.entries.is_empty() && cache.order.is_empty());
    }
}
