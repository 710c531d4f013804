//! What the bench writes, through the real write path (`ReactionsStore::set`, as PUT
//! reaction calls it) at a steady offered rate, and the readers that watch the writes become
//! visible in count reads, for the design and the naive counter alike.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use likes_core::clock::now_ms;
use likes_core::{
    IdempotencyKey, ItemId, ReactionState, Transition, UserId, WriteOutcome, WriteRequest,
};
use likes_store::{CountsStore, ReactionsStore};
use likes_tests::TestStack;
use tokio::task::JoinSet;

use crate::naive::{self, Naive};

/// Writer tasks: enough to hold the offered rate against the emulator's round trip.
const WRITERS: usize = 8;
/// How often the hot item's count is read. The readers share the emulator's one lock with
/// the writers and both counters: read more often and the writes fall behind their rate.
pub const HOT_READ_EVERY: Duration = Duration::from_millis(50);
/// How often each cold sample item waiting to be seen is read.
pub const COLD_READ_EVERY: Duration = Duration::from_millis(100);

#[derive(Debug, Clone)]
pub struct Reaction {
    pub user: String,
    pub item: String,
    pub state: ReactionState,
    /// A cold sample: a fresh item liked once, watched until a count read shows it.
    pub sample: bool,
}

/// One reaction as the write path answered it.
#[derive(Debug, Clone)]
pub struct Written {
    pub item: String,
    pub transition: Transition,
    /// The row's `updated_at`, for a real flip.
    pub event_time_ms: Option<i64>,
    pub sample: bool,
}

/// The hot item: `users` distinct users like it.
pub fn hot(item: &str, users: usize) -> Vec<Reaction> {
    (0..users)
        .map(|n| Reaction {
            user: format!("fan-{n}"),
            item: item.to_owned(),
            state: ReactionState::Like,
            sample: false,
        })
        .collect()
}

/// `reactions` reactions over `items` cold items by a few users each, in random states (so
/// first likes and dislikes, switches, unlikes and no-ops), with `samples` fresh sample
/// items liked once each, spread evenly among them.
pub fn cold(reactions: usize, items: usize, samples: usize) -> Vec<Reaction> {
    // xorshift64: the same workload on every run.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |bound: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % bound as u64) as usize
    };
    let every = reactions / samples.max(1);
    let mut all = Vec::with_capacity(reactions + samples);
    for n in 0..reactions {
        if samples > 0 && n % every == 0 && n / every < samples {
            all.push(Reaction {
                user: "sampler".to_owned(),
                item: format!("cold:sample-{}", n / every),
                state: ReactionState::Like,
                sample: true,
            });
        }
        let states = [
            ReactionState::Like,
            ReactionState::Like,
            ReactionState::Dislike,
            ReactionState::None,
        ];
        all.push(Reaction {
            user: format!("player-{}", next(3)),
            item: format!("cold:{}", next(items)),
            state: states[next(states.len())],
            sample: false,
        });
    }
    all
}

/// Writes `reactions` in order at `rate` per second (reaction n is due `n / rate` after the
/// start); returns what each did, in the order sent, and the time the writes took.
pub async fn write_paced(
    store: &ReactionsStore,
    phase: &str,
    reactions: Vec<Reaction>,
    rate: f64,
    on_sample: impl Fn(&Written) + Send + Sync + 'static,
) -> (Vec<Written>, Duration) {
    let reactions = Arc::new(reactions);
    let written = Arc::new(Mutex::new(vec![None; reactions.len()]));
    let next = Arc::new(AtomicUsize::new(0));
    let on_sample = Arc::new(on_sample);
    let started = Instant::now();
    let mut writers = JoinSet::new();
    for _ in 0..WRITERS {
        let (store, reactions, written, next, on_sample) = (
            store.clone(),
            reactions.clone(),
            written.clone(),
            next.clone(),
            on_sample.clone(),
        );
        let phase = phase.to_owned();
        writers.spawn(async move {
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let Some(reaction) = reactions.get(n) else {
                    return;
                };
                let due = started + Duration::from_secs_f64(n as f64 / rate);
                tokio::time::sleep_until(due.into()).await;
                let request = WriteRequest {
                    target: reaction.state,
                    key: Some(
                        IdempotencyKey::parse(&format!("{phase}-{n}"))
                            .expect("a valid key")
                            .hash(),
                    ),
                    if_match: None,
                };
                let outcome = store
                    .set(
                        &UserId::parse(&reaction.user).expect("a valid user id"),
                        &ItemId::parse(&reaction.item).expect("a valid item id"),
                        &request,
                        now_ms(),
                    )
                    .await
                    .expect("the reaction is written");
                let (WriteOutcome::Applied(change) | WriteOutcome::Unchanged(change)) = outcome
                else {
                    panic!("a write with a fresh key applies or is unchanged: {outcome:?}");
                };
                let transition = Transition::new(change.previous_state, change.state);
                let done = Written {
                    item: reaction.item.clone(),
                    transition,
                    event_time_ms: transition
                        .is_flip()
                        .then_some(change.updated_at_ms)
                        .flatten(),
                    sample: reaction.sample,
                };
                if done.sample {
                    on_sample(&done);
                }
                written.lock().expect("written")[n] = Some(done);
            }
        });
    }
    while let Some(done) = writers.join_next().await {
        done.expect("writer task");
    }
    let elapsed = started.elapsed();
    let written = std::mem::take(&mut *written.lock().expect("written"));
    (
        written
            .into_iter()
            .map(|w| w.expect("every reaction written"))
            .collect(),
        elapsed,
    )
}

/// One count read of the hot item, by each counter.
#[derive(Debug, Clone, Copy)]
pub struct HotRead {
    /// When the answer arrived (epoch millis).
    pub at_ms: i64,
    pub likes: u64,
    /// The design's `as_of` (epoch millis), when it gave one.
    pub as_of_ms: Option<i64>,
}

#[derive(Debug, Default)]
pub struct HotSeries {
    pub design: Vec<HotRead>,
    pub naive: Vec<HotRead>,
}

/// Reads the hot item's count every [`HOT_READ_EVERY`] until both counters show `likes`
/// (or the deadline passed): the design through `GET /v1/items/{item_id}/like-count` on the local
/// front, the naive counter by its row.
pub async fn watch_hot(
    stack: &TestStack,
    naive: &Naive,
    item: &str,
    likes: u64,
    deadline: Instant,
) -> HotSeries {
    let mut series = HotSeries::default();
    let path = format!("/v1/items/{item}/like-count");
    let (mut design_done, mut naive_done) = (false, false);
    while !(design_done && naive_done) && Instant::now() < deadline {
        let design = async {
            if design_done {
                return None;
            }
            let response = stack.request("GET", &path, Some("watcher")).send().await;
            assert_eq!(response.status, 200, "like-count answers");
            let body = response.json();
            Some(HotRead {
                at_ms: now_ms(),
                likes: body["like_count"].as_u64().expect("like_count"),
                as_of_ms: body["as_of"]
                    .as_str()
                    .map(|t| likes_core::clock::parse_rfc3339(t).expect("as_of")),
            })
        };
        let baseline = async {
            if naive_done {
                return None;
            }
            let row = naive.counter.row(item).await;
            Some(HotRead {
                at_ms: now_ms(),
                likes: naive::like_count(&row),
                as_of_ms: None,
            })
        };
        let (design, baseline) = tokio::join!(design, baseline);
        if let Some(read) = design {
            design_done = read.likes >= likes;
            series.design.push(read);
        }
        if let Some(read) = baseline {
            naive_done = read.likes >= likes;
            series.naive.push(read);
        }
        tokio::time::sleep(HOT_READ_EVERY).await;
    }
    series
}

/// A cold sample's like, and when each counter first showed it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sighting {
    pub event_time_ms: i64,
    pub design_ms: Option<i64>,
    pub naive_ms: Option<i64>,
}

/// The cold samples written so far, by item, and when they were seen.
pub type Samples = Arc<Mutex<Vec<(String, Sighting)>>>;

/// Reads every cold sample not yet seen every [`COLD_READ_EVERY`], by each counter: the
/// design through `CountsStore::read` (the call the like-count handler makes), the naive
/// counter by its row. Returns once `writing` is clear and every sample was seen by both.
pub async fn watch_samples(
    counts: &CountsStore,
    naive: &Naive,
    samples: &Samples,
    writing: &AtomicBool,
    deadline: Instant,
) {
    loop {
        let waiting: Vec<(usize, String, Sighting)> = samples
            .lock()
            .expect("samples")
            .iter()
            .enumerate()
            .filter(|(_, (_, s))| s.design_ms.is_none() || s.naive_ms.is_none())
            .map(|(at, (item, s))| (at, item.clone(), *s))
            .collect();
        if waiting.is_empty() && !writing.load(Ordering::SeqCst) {
            return;
        }
        if Instant::now() > deadline {
            eprintln!(
                "  {} cold samples were not seen before the deadline",
                waiting.len()
            );
            return;
        }
        let mut reads = JoinSet::new();
        for (at, item, sighting) in waiting {
            let id = ItemId::parse(&item).expect("a valid item id");
            if sighting.design_ms.is_none() {
                let counts = counts.clone();
                let id = id.clone();
                reads.spawn(async move {
                    let seen = counts.read(&id).await.expect("count read").like_count >= 1;
                    (at, true, seen.then(now_ms))
                });
            }
            if sighting.naive_ms.is_none() {
                let counter = naive.counter.clone();
                reads.spawn(async move {
                    let seen = naive::like_count(&counter.row(&item).await) >= 1;
                    (at, false, seen.then(now_ms))
                });
            }
        }
        let mut seen = Vec::new();
        while let Some(done) = reads.join_next().await {
            seen.push(done.expect("sample read"));
        }
        {
            let mut samples = samples.lock().expect("samples");
            for (at, design, when) in seen {
                let sighting = &mut samples[at].1;
                match (design, when) {
                    (true, Some(t)) => sighting.design_ms = Some(t),
                    (false, Some(t)) => sighting.naive_ms = Some(t),
                    _ => {}
                }
            }
        }
        tokio::time::sleep(COLD_READ_EVERY).await;
    }
}
