//! `make bench-moderation`: what a moderator's retraction of a bot's likes costs and how
//! long it takes. A bot likes `LIKES_BENCH_RETRACTED` (500) cold items, each its own, and a
//! moderator retracts every one of its reactions (`POST
//! /v1/moderation/users/{user_id}/retractions`, no suspension). The production functions
//! run unchanged on the simulator (`likes-simulator`), which bills every request as
//! DynamoDB bills it and meters Kinesis, through the local stack's event source mappings
//! as template.yaml configures them: the handlers, the retractor's paced slices, and the
//! pipelines that take each retracted like out of the counts, the leaderboard, the likers
//! and the live counts.
//!
//! Then an item's removal: `LIKES_BENCH_REMOVED` (500) users react to one viral item, a
//! fifth of them DISLIKE and the rest LIKE, and a moderator removes it (`DELETE
//! /v1/moderation/items/{item_id}`); the job finds its reactors bucket by bucket in the
//! likers read model and turns each reaction to NONE.
//!
//! Two stacks: one at the template's `ModerationRowsPerSecond`, where the pace bounds the
//! job, and one at the most the template allows, where the work of each slice does; the
//! removal runs on the first. Each phase's units are read off the simulator's bill before
//! and after it, every consumer settled. The section is written into docs/performance.md
//! between its markers.

use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};
use likes_core::jobs::{paced, slice_rows};
use likes_core::likers::LIKER_BUCKETS;
use likes_core::moderation::{
    RetractionJob, REMOVAL_CACHE_MS, REMOVAL_SETTLE_MS, SUSPENSION_SETTLE_MS,
};
use likes_core::{JobId, JobStatus};
use likes_simulator::{table_resource, Unit, Usage};
use likes_store::ModerationStore;
use likes_tests::billing::{self, units, Billed, Resources};
use likes_tests::docs::{take_said, write_section};
use likes_tests::{env_count, say, Aws, TestStack, RETRACT_FUNCTION};
use serde_json::json;

const BOT: &str = "bot";
/// The item a moderator removes.
const REMOVED_ITEM: &str = "viral:removed";
const MODERATOR: &str = "moderator";
/// Likes the bot sends at once.
const CLIENTS: usize = 16;
/// The bot writes far faster than the template's write limit lets one user: deployed with a
/// limit it never reaches, its likes all go in (the limiter's own writes are still billed).
/// A lease is a second of the rate, so the burst holds a hundred of them: requests at once
/// that each take one find the bucket far from empty.
const UNLIMITED_WRITES: [(&str, &str); 2] =
    [("WriteRatePerSecond", "10000"), ("WriteBurst", "1000000")];
/// `ModerationRowsPerSecond` at the template's `MaxValue`.
const RAISED_RATE: &str = "10000";
/// The retraction time is projected to this many reactions.
const PROJECTED: usize = 10_000;

/// One stack's run: the bot's likes, then their retraction.
struct Run {
    /// `ModerationRowsPerSecond` as the stack deployed it.
    rows_per_second: u32,
    /// Units per like, and per retracted reaction.
    likes: Billed,
    retraction: Billed,
    /// From the retraction's request to the retractor's last invocation.
    took: Duration,
    /// The slices the job committed (its last step).
    slices: u64,
    throttled: u64,
}

/// An item's removal: its reactions going in, then the job that turns them to NONE.
struct Removal {
    /// `ModerationRowsPerSecond` as the stack deployed it.
    rows_per_second: u32,
    /// Units per reaction going in, and per reaction removed.
    reactions: Billed,
    removal: Billed,
    /// From the removal's request to the job's last write of a reaction row.
    retracted_in: Duration,
    /// From the removal's request to the retractor's last invocation.
    took: Duration,
    /// The slices the job committed, the sweeps that waited out its settle among them.
    slices: u64,
    throttled: u64,
}

#[tokio::main]
async fn main() {
    let reactions = env_count("LIKES_BENCH_RETRACTED", 500);
    let reactors = env_count("LIKES_BENCH_REMOVED", 500);
    let started = Instant::now();
    let (at_default, removal) = {
        let stack = stack(&[]).await;
        (
            retraction(&stack, reactions).await,
            removal(&stack, reactors).await,
        )
    };
    let raised = retraction(
        &stack(&[("ModerationRowsPerSecond", RAISED_RATE)]).await,
        reactions,
    )
    .await;

    say!(
        "{reactions} likes by one user (a bot), each of a cold item of its own, then a \
         moderator's retraction of all of them, through the production functions on the \
         simulator. Units per like going in, and per reaction retracted, by the part of the \
         service that spent them (the retraction's at the template's pace):"
    );
    say!();
    units_table(
        ("like", &at_default.likes),
        ("retraction", &at_default.retraction),
    );
    say!();
    times_table(&[&at_default, &raised], reactions);
    say!();
    say!(
        "- Retraction reads: on ReactionsTable the sweep's strongly consistent Queries, \
         billed for every row a page passes (the last sweep, from the start, passes the \
         retracted rows again); on ModerationTable the retractor's GetItem of the job for \
         each stream record of its row. Writes on ModerationTable: the job and its guard, a \
         checkpoint per slice, the finishing transaction."
    );
    say!(
        "- The retraction's time runs from its request to the retractor's last invocation: \
         a slice retracts the rows it planned, reads the next page, waits out the pace and \
         checkpoints, and the checkpoint's stream record starts the next slice, once the \
         mapping reads it (the local mapping reads an idle stream shard a few times a \
         second, as Lambda polls). The first slice plans and the last finds nothing left: \
         neither retracts, so the linear projection errs high."
    );
    say!(
        "- Without `suspend`. With it, the job also sets the user's RateLimits row in its \
         starting transaction, and does not finish before {} ms after the request.",
        SUSPENSION_SETTLE_MS
    );
    say!(
        "- What the simulation leaves out: network latency to DynamoDB and Kinesis (the \
         simulator answers in the process), Lambda cold starts and invoke overhead, and the \
         stream's delay on AWS (here a record is readable as soon as it is written, and the \
         polling is the local mapping's, at a fixed interval); reconciliation's cleaning \
         pass too, which the ledger prices. Times are a debug build's on this machine's 2 \
         shared cores. Requests throttled: {}.",
        at_default.throttled + raised.throttled
    );
    say!();
    removal_section(&removal, reactors, &at_default.likes);
    say!();
    say!("(bench took {:.1} s)", started.elapsed().as_secs_f64());
    write_section("moderation", &take_said());
}

/// A stack on the simulator with `parameters`, its pulse publishing the counts' `as_of` (a
/// removal ends on it).
async fn stack(parameters: &[(&str, &str)]) -> TestStack {
    TestStack::builder()
        .on(Aws::Simulator)
        .fire("PulseFunction")
        .parameters(&UNLIMITED_WRITES)
        .parameters(parameters)
        .start()
        .await
}

/// `ModerationRowsPerSecond` as `stack` deployed it.
fn rows_per_second(stack: &TestStack) -> u32 {
    let environment = stack
        .stack
        .function_environment(RETRACT_FUNCTION)
        .unwrap_or_else(|err| panic!("{err}"));
    environment["MODERATION_ROWS_PER_SECOND"]
        .parse()
        .expect("MODERATION_ROWS_PER_SECOND is a number")
}

/// The bot's likes and then their retraction, each billed.
async fn retraction(stack: &TestStack, reactions: usize) -> Run {
    let names = Resources::of(stack);
    let before = stack.usage();
    let likes = (0..reactions).map(|i| (BOT.to_owned(), format!("retracted:{i:05}")));
    stack.like_all(CLIENTS, likes).await;
    stack.settle_consumers().await;
    let liked = stack.usage();

    let invocations = stack.retractor().counters().invocations;
    let asked = Instant::now();
    let id = start_retraction(stack).await;
    retractor_quiet(stack, invocations).await;
    let took = asked.elapsed();
    stack.settle_consumers().await;
    let retracted = stack.usage();
    // Read after the bill: this read is not the job's work.
    let job = finished(stack, &id, reactions).await;

    Run {
        rows_per_second: rows_per_second(stack),
        likes: names.per(&before, &liked, reactions),
        retraction: names.per(&liked, &retracted, reactions),
        took,
        slices: job.step,
        throttled: retracted.throttled.values().sum(),
    }
}

/// `reactors` users' reactions to one item, a fifth DISLIKE and the rest LIKE, and then the
/// item's removal, each billed.
async fn removal(stack: &TestStack, reactors: usize) -> Removal {
    let names = Resources::of(stack);
    let before = stack.usage();
    stream::iter(0..reactors)
        .for_each_concurrent(CLIENTS, |u| async move {
            let state = if u % 5 == 0 { "DISLIKE" } else { "LIKE" };
            react(stack, &format!("fan{u:05}"), state).await;
        })
        .await;
    stack.settle_consumers().await;
    let reacted = stack.usage();

    let invocations = stack.retractor().counters().invocations;
    let asked = Instant::now();
    let ((id, took), retracted_in) = tokio::join!(
        async {
            let id = remove_item(stack).await;
            retractor_quiet(stack, invocations).await;
            (id, asked.elapsed())
        },
        last_retraction(stack, &reacted, reactors, asked),
    );
    stack.settle_consumers().await;
    let removed = stack.usage();
    let job = finished(stack, &id, reactors).await;

    Removal {
        rows_per_second: rows_per_second(stack),
        reactions: names.per(&before, &reacted, reactors),
        removal: names.per(&reacted, &removed, reactors),
        retracted_in,
        took,
        slices: job.step,
        throttled: removed.throttled.values().sum::<u64>() - before.throttled.values().sum::<u64>(),
    }
}

/// `user` sets `state` on the removed item, through the API.
async fn react(stack: &TestStack, user: &str, state: &str) {
    stack
        .request(
            "PUT",
            &format!("/v1/items/{REMOVED_ITEM}/reaction"),
            Some(user),
        )
        .header("Idempotency-Key", &format!("react-{user}"))
        .json(&json!({ "state": state }))
        .send()
        .await
        .assert_status(200);
}

/// When, since `asked`, the Reactions table has been billed a write unit per reactor more
/// than in `reacted`: each retraction writes one reaction row of under 1 KB, so that is the
/// job's last retraction. Read off the simulator's meter, which bills nothing itself.
async fn last_retraction(
    stack: &TestStack,
    reacted: &Usage,
    reactors: usize,
    asked: Instant,
) -> Duration {
    let table = table_resource(&stack.name("ReactionsTable"));
    let target = reacted.billed(&table, Unit::Writes) + reactors as f64;
    while stack.usage().billed(&table, Unit::Writes) < target {
        assert!(
            asked.elapsed() < Duration::from_secs(300),
            "the removal retracted too few reactions"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    asked.elapsed()
}

/// Asks, as a moderator, for the removal of the item; its job's id. The answer comes once
/// every container's read of the item's mark would see it ([`REMOVAL_CACHE_MS`]).
async fn remove_item(stack: &TestStack) -> String {
    moderate(
        stack,
        "DELETE",
        &format!("/v1/moderation/items/{REMOVED_ITEM}"),
        "counterfeit listing",
    )
    .await
}

/// Asks, as a moderator, for the retraction of every reaction of the bot; its id.
async fn start_retraction(stack: &TestStack) -> String {
    moderate(
        stack,
        "POST",
        &format!("/v1/moderation/users/{BOT}/retractions"),
        "bought likes",
    )
    .await
}

/// A moderator's request for a job with `reason`: the 202's job id.
async fn moderate(stack: &TestStack, method: &str, path: &str, reason: &str) -> String {
    let response = stack
        .request(method, path, None)
        .header(
            "authorization",
            &format!("Bearer {}", stack.moderator_token(MODERATOR)),
        )
        .json(&json!({ "reason": reason }))
        .send()
        .await;
    response.assert_status(202);
    response.json()["retraction_id"]
        .as_str()
        .expect("a retraction id")
        .to_owned()
}

/// Waits until the retractor has nothing left to do, from its count of invocations before
/// the request. A running job always leaves its next record on the Moderation stream before
/// the invocation that wrote it ends, so a settle that invoked nothing after the last one
/// means the job is done. No GET of the job meanwhile: its reads would be billed as the
/// job's.
async fn retractor_quiet(stack: &TestStack, mut invocations: u64) {
    loop {
        let settled = stack
            .retractor()
            .settle(Duration::from_secs(60))
            .await
            .unwrap_or_else(|err| panic!("{err}"));
        if settled.invocations == invocations {
            return;
        }
        invocations = settled.invocations;
    }
}

/// The job's row: done, every reaction retracted.
async fn finished(stack: &TestStack, id: &str, reactions: usize) -> RetractionJob {
    let id = JobId::parse(id).expect("the answer's retraction id parses");
    let job = ModerationStore::new(stack.dynamodb(), stack.name("ModerationTable"))
        .retraction(&id)
        .await
        .expect("the job reads")
        .expect("the job is kept");
    assert_eq!(
        (job.status, job.reactions_retracted),
        (JobStatus::Done, reactions as u64),
        "the retractor went quiet before the job was done: {job:?}"
    );
    job
}

/// Units per thing done in two phases (what went in, and what took it out), by part and
/// resource, and their totals.
fn units_table((first, going_in): (&str, &Billed), (second, taken_out): (&str, &Billed)) {
    let rows = billing::side_by_side(going_in, taken_out);
    say!(
        "| part | table, index or stream | {first} WCU | {second} WCU | {first} RCU | \
         {second} RCU | {first} records | {second} records |"
    );
    say!("|---|---|---|---|---|---|---|---|");
    for ((part, label), v) in &rows {
        say!(
            "| {part} | {label} | {} | {} | {} | {} | {} | {} |",
            units(v[0]),
            units(v[1]),
            units(v[2]),
            units(v[3]),
            units(v[4]),
            units(v[5])
        );
    }
    let (in_writes, out_writes) = (
        total(going_in, Unit::Writes),
        total(taken_out, Unit::Writes),
    );
    say!(
        "| **all** | **per reaction** | **{}** | **{}** | **{}** | **{}** | | |",
        units(in_writes),
        units(out_writes),
        units(total(going_in, Unit::Reads)),
        units(total(taken_out, Unit::Reads)),
    );
    say!(
        "| | {second} / {first} | | {:.2}× | | | | |",
        out_writes / in_writes
    );
}

/// The removal's units, its time and what it adds to every write.
fn removal_section(removal: &Removal, reactors: usize, cold_likes: &Billed) {
    say!(
        "{reactors} users' reactions to one viral item (a fifth DISLIKE, the rest LIKE), then \
         a moderator's removal of the item, at the template's pace. Units per reaction going \
         in, and per reaction removed:"
    );
    say!();
    units_table(
        ("reaction", &removal.reactions),
        ("removal", &removal.removal),
    );
    say!();
    let projected = format!("{}K", PROJECTED / 1000);
    let retracted_in = removal.retracted_in.as_secs_f64();
    let settle = Duration::from_millis(REMOVAL_SETTLE_MS as u64).as_secs_f64();
    say!(
        "| `ModerationRowsPerSecond` | pace bound per {projected} | settle floor | \
         {reactors} retracted in | done in | slices (rows each) | per {projected}, projected \
         | WCU / RCU per reaction |"
    );
    say!("|---|---|---|---|---|---|---|---|");
    say!(
        "| {} | {:.0} s | {settle:.0} s | {retracted_in:.1} s | {:.1} s | {} ({}) | {:.0} s | \
         {} / {} |",
        removal.rows_per_second,
        paced(PROJECTED, removal.rows_per_second).as_secs_f64(),
        removal.took.as_secs_f64(),
        removal.slices,
        slice_rows(removal.rows_per_second),
        (retracted_in * PROJECTED as f64 / reactors as f64).max(settle),
        units(total(&removal.removal, Unit::Writes)),
        units(total(&removal.removal, Unit::Reads)),
    );
    say!();
    say!(
        "- Removal reads: on LikersTable the sweep's strongly consistent Queries of the \
         item's {LIKER_BUCKETS} buckets, bucket by bucket, billed for every entry a page \
         passes (the unliked ones too, kept as tombstones). A sweep that finds nothing left \
         before the settle has passed waits up to 2 s for it, checkpoints, and its record \
         starts another sweep from the first bucket: the slices above past the {} a job of {reactors} needs (one that \
         plans, those that retract, a last sweep) are such sweeps, and they are most of a \
         small item's Likers reads. On ModerationTable the \
         retractor's GetItem of the job for each stream record of its row. ReactionsTable \
         writes past one per reaction: reactors a sweep found again before the likers read \
         model had dropped them, each a conditional write refused (and billed).",
        reactors.div_ceil(slice_rows(removal.rows_per_second) as usize) + 2
    );
    say!(
        "- A removal cannot finish before its settle: its job ends no sooner than {settle:.0} \
         s after the request (`REMOVAL_SETTLE_MS`, by when every write admitted before it \
         has landed), and only once the item's counts, as of after its last sweep began, \
         hold nothing (so a reaction the likers read model has not shown yet is swept \
         later), so a small item's time is that floor however few its reactors. \"Retracted in\" runs from the request to the job's last \
         retraction (read off the simulator's meter), \"done in\" to the retractor's last \
         invocation; the request itself is answered only after {REMOVAL_CACHE_MS} ms. The \
         projection scales the time to the last retraction, or is the floor where that is \
         longer."
    );
    say!(
        "- What a removal adds to every write, and to every read of an item's count or \
         likers: before it, the item's removal mark, one strongly consistent GetItem on \
         ModerationTable of a row under 4 KB, so 1 RCU whether the mark is there or not. A \
         container trusts what it read for {REMOVAL_CACHE_MS} ms, so that is 1 RCU per \
         container and item each {REMOVAL_CACHE_MS} ms: 1 RCU per write of an item its container has not \
         read within that (the cold likes above pay {} RCU each on ModerationTable), and at \
         most {:.0} RCU a second per warm container for a viral item, whatever its rate of \
         writes and reads.",
        units(
            cold_likes
                .iter()
                .filter(|((_, label, unit), _)| label == "ModerationTable" && *unit == Unit::Reads)
                .map(|(_, value)| value)
                .sum()
        ),
        1000.0 / REMOVAL_CACHE_MS as f64,
    );
    say!(
        "- What the simulation leaves out, beside what it leaves out of the retraction: the \
         event log's delay in feeding the likers read model on AWS (here it is fed as soon \
         as the stream is polled; the settle floor is what covers it), and the many warm \
         containers of a viral item on AWS, each reading the mark for itself (here the \
         reads of the mark are the local stack's), which the figure above prices from the \
         code's constants instead. Requests throttled: {}.",
        removal.throttled
    );
}

/// The retraction's time at each rate: the pace's bound for [`PROJECTED`] reactions, what
/// the job took, its slices, and its time projected to [`PROJECTED`] reactions.
fn times_table(runs: &[&Run], reactions: usize) {
    let projected = format!("{}K", PROJECTED / 1000);
    say!(
        "| `ModerationRowsPerSecond` | pace bound per {projected} | {reactions} retracted in | \
         slices (rows each) | a slice, on average | per {projected}, projected | WCU / RCU \
         per reaction |"
    );
    say!("|---|---|---|---|---|---|---|");
    for run in runs {
        let took = run.took.as_secs_f64();
        say!(
            "| {} | {:.0} s | {took:.1} s | {} ({}) | {:.2} s | {:.0} s | {} / {} |",
            run.rows_per_second,
            paced(PROJECTED, run.rows_per_second).as_secs_f64(),
            run.slices,
            slice_rows(run.rows_per_second),
            took / run.slices as f64,
            took * PROJECTED as f64 / reactions as f64,
            units(total(&run.retraction, Unit::Writes)),
            units(total(&run.retraction, Unit::Reads)),
        );
    }
}

fn total(billed: &Billed, unit: Unit) -> f64 {
    billed
        .iter()
        .filter(|((_, _, u), _)| *u == unit)
        .map(|(_, value)| value)
        .sum()
}
