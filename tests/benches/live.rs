//! `make bench-live`: live counts under load, as figures (not a timed test). N watchers
//! (`LIKES_BENCH_LIVE_WATCHERS`, 1,000) subscribe to one item over the local WebSocket front;
//! then distinct users like it as fast as the emulator takes writes (`LIKES_BENCH_LIVE_LIKES`
//! likes, 600, from `LIKES_BENCH_LIVE_WRITERS` concurrent writers, 16), interleaved with likes
//! of items nobody watches (`LIKES_BENCH_LIVE_QUIET`, 200, one item each), as a platform's
//! other traffic. Every watcher's messages are kept with their arrival time until each has
//! seen the final count.
//!
//! Printed: the write rate reached; messages per watcher per second and the closest two
//! messages of one watcher; push latency from event time (the like's write) to the first
//! message that includes it, p50/p99 over every (like, watcher); the broadcaster's count
//! reads, pushes and posts per second from its metrics; and what the items nobody watches
//! cost it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use likes_core::clock::now_ms;
use likes_core::ReactionState;
use likes_tests::live::Received;
use likes_tests::{env_count, percentile, say, TestStack};
use tokio::task::JoinSet;

const ITEM: &str = "game:bench-live";

#[tokio::main]
async fn main() {
    let watcher_count = env_count("LIKES_BENCH_LIVE_WATCHERS", 1000);
    let likes = env_count("LIKES_BENCH_LIVE_LIKES", 600);
    let writers = env_count("LIKES_BENCH_LIVE_WRITERS", 16);
    let quiet = env_count("LIKES_BENCH_LIVE_QUIET", 200);
    // Every metric report is kept as a value (none printed); the broadcaster's are read below.
    let capture = likes_store::metrics::capture();
    let stack = Arc::new(TestStack::builder().scheduled().start().await);
    stack
        .wait_for_as_of(now_ms(), Duration::from_secs(60))
        .await;

    let connecting = std::time::Instant::now();
    let mut watchers = Vec::with_capacity(watcher_count);
    let mut joining = JoinSet::new();
    for n in 0..watcher_count {
        let stack = stack.clone();
        joining.spawn(async move {
            let mut watcher = stack.watcher(&format!("watcher{n}")).await;
            watcher.subscribe(&[ITEM]).await;
            let first = watcher.next(Duration::from_secs(60)).await;
            assert!(first.is_some(), "watcher {n} got its counts on subscribe");
            watcher
        });
        // A few dozen handshakes at once: the emulator serializes their writes anyway.
        if joining.len() >= 32 {
            watchers.push(joining.join_next().await.unwrap().unwrap());
        }
    }
    while let Some(watcher) = joining.join_next().await {
        watchers.push(watcher.unwrap());
    }
    say!(
        "Live counts: {watcher_count} watchers of one item, {likes} likes of it and {quiet} of quiet items by {writers} writers; {} build, {} CPUs",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    say!(
        "{watcher_count} watchers connected and subscribed in {:.1} s",
        connecting.elapsed().as_secs_f64()
    );

    let started = now_ms();
    // The watched item's likes, with a like of a quiet item after every few of them.
    let mut jobs: Vec<(String, String)> = Vec::with_capacity(likes + quiet);
    for n in 0..likes.max(quiet) {
        if n < likes {
            jobs.push((format!("fan{n}"), ITEM.to_owned()));
        }
        if n < quiet {
            jobs.push((format!("quiet{n}"), format!("game:bench-quiet-{n}")));
        }
    }
    let jobs = Arc::new(jobs);
    let next = Arc::new(AtomicUsize::new(0));
    let mut writing = JoinSet::new();
    for _ in 0..writers {
        let (stack, next, jobs) = (stack.clone(), next.clone(), jobs.clone());
        writing.spawn(async move {
            let mut event_times = Vec::new();
            while let Some((user, item)) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) {
                let at = now_ms();
                stack.react(user, item, ReactionState::Like).await;
                if item == ITEM {
                    event_times.push(at);
                }
            }
            event_times
        });
    }
    let mut event_times: Vec<i64> = Vec::with_capacity(likes);
    while let Some(times) = writing.join_next().await {
        event_times.extend(times.unwrap());
    }
    event_times.sort_unstable();
    let writes_done = now_ms();

    // Every watcher until it has seen the final count.
    let mut reading = JoinSet::new();
    for mut watcher in watchers {
        reading.spawn(async move {
            watcher
                .until(Duration::from_secs(120), |m| m["like_count"] == likes)
                .await
        });
    }
    let mut seen: Vec<Vec<Received>> = Vec::with_capacity(watcher_count);
    while let Some(messages) = reading.join_next().await {
        seen.push(messages.unwrap());
    }
    let finished = seen
        .iter()
        .filter_map(|m| m.last().map(|r| r.at_ms))
        .max()
        .unwrap_or(writes_done);
    // The broadcaster's last invocations report once their pushes' as_of covers their events.
    stack
        .broadcaster()
        .settle(Duration::from_secs(60))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    let reports = capture.finish();
    // The rest of the run's reports (the pulse goes on) stay quiet too.
    let _quiet = likes_store::metrics::capture();

    let sum = |name: &str| -> f64 {
        reports
            .iter()
            .filter(|r| r.namespace() == "Likes/Live")
            .flat_map(|r| r.values_of(name).to_vec())
            .sum()
    };
    let write_seconds = (writes_done - started) as f64 / 1000.0;
    let push_seconds = (finished - started) as f64 / 1000.0;
    let mut latencies = Vec::new();
    let mut per_watcher_rate = Vec::new();
    let mut closest_gap_ms = u64::MAX;
    for messages in &seen {
        per_watcher_rate.push(messages.len() as f64 / push_seconds);
        for pair in messages.windows(2) {
            closest_gap_ms =
                closest_gap_ms.min(pair[1].at.duration_since(pair[0].at).as_millis() as u64);
        }
        // The k-th like (by event time) is in every message counting at least k likes.
        let mut at = 0;
        for (k, event_ms) in event_times.iter().enumerate() {
            while at < messages.len()
                && messages[at].message["like_count"].as_u64().unwrap_or(0) < k as u64 + 1
            {
                at += 1;
            }
            if let Some(received) = messages.get(at) {
                latencies.push((received.at_ms - event_ms).max(0) as u64);
            }
        }
    }
    let mean_rate = per_watcher_rate.iter().sum::<f64>() / per_watcher_rate.len().max(1) as f64;
    let max_rate = per_watcher_rate.iter().copied().fold(0.0, f64::max);

    say!(
        "likes: {likes} of the watched item and {quiet} of quiet items in {write_seconds:.1} s ({:.0}/s, {writers} writers)",
        (likes + quiet) as f64 / write_seconds
    );
    say!(
        "pushes end {:.1} s after the last like",
        (finished - writes_done) as f64 / 1000.0
    );
    say!(
        "messages per watcher per second: mean {mean_rate:.2}, max {max_rate:.2}; closest two messages of one watcher {closest_gap_ms} ms apart"
    );
    say!(
        "push latency from event time: p50 {} ms, p99 {} ms, max {} ms ({} samples)",
        percentile(&latencies, 50.0),
        percentile(&latencies, 99.0),
        percentile(&latencies, 100.0),
        latencies.len()
    );
    say!(
        "broadcaster: {:.0} events; {:.2} count reads/s of the item; {:.2} pushes/s reaching {:.2} buckets/s; {:.0} PostToConnection/s; {:.0} claims refused; {} stale pushes, {} posts throttled, {} failed",
        sum("EventsReceived"),
        sum("CountReads") / push_seconds,
        sum("Pushes") / push_seconds,
        sum("BucketPushes") / push_seconds,
        sum("MessagesSent") / push_seconds,
        sum("ClaimsRefused"),
        sum("StalePushes"),
        sum("PostsThrottled"),
        sum("PostsFailed"),
    );
    let (changed, watched) = (sum("ItemsChanged"), sum("ItemsWatched"));
    say!(
        "items changed in the broadcaster's batches: {changed:.0}, {watched:.0} of them watched; the {:.0} others cost one watch row read each (a BatchGetItem key) and no claim, count read or watcher Query",
        changed - watched
    );
    likes_tests::docs::write_said("live", "make bench-live");
}
