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
//! Two stacks: one at the template's `ModerationRowsPerSecond`, where the pace bounds the
//! job, and one at the most the template allows, where the work of each slice does. Each
//! phase's units are read off the simulator's bill before and after it, every consumer
//! settled. The section is written into docs/performance.md between its markers.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use likes_core::jobs::{paced, slice_rows};
use likes_core::moderation::{RetractionJob, SUSPENSION_SETTLE_MS};
use likes_core::{JobId, JobStatus};
use likes_simulator::Unit;
use likes_store::ModerationStore;
use likes_tests::billing::{self, units, Billed, Resources};
use likes_tests::docs::{take_said, write_section};
use likes_tests::{env_count, say, Aws, TestStack, RETRACT_FUNCTION};
use serde_json::json;

const BOT: &str = "bot";
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

#[tokio::main]
async fn main() {
    let reactions = env_count("LIKES_BENCH_RETRACTED", 500);
    let started = Instant::now();
    let at_default = run(&[], reactions).await;
    let raised = run(&[("ModerationRowsPerSecond", RAISED_RATE)], reactions).await;

    say!(
        "{reactions} likes by one user (a bot), each of a cold item of its own, then a \
         moderator's retraction of all of them, through the production functions on the \
         simulator. Units per like going in, and per reaction retracted, by the part of the \
         service that spent them (the retraction's at the template's pace):"
    );
    say!();
    units_table(&at_default);
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
    say!("(bench took {:.1} s)", started.elapsed().as_secs_f64());
    write_section("moderation", &take_said());
}

/// A stack with `parameters`: the bot's likes and then their retraction, each billed.
async fn run(parameters: &[(&str, &str)], reactions: usize) -> Run {
    let stack = TestStack::builder()
        .on(Aws::Simulator)
        .parameters(&UNLIMITED_WRITES)
        .parameters(parameters)
        .start()
        .await;
    let names = Resources::of(&stack);
    let environment = stack
        .stack
        .function_environment(RETRACT_FUNCTION)
        .unwrap_or_else(|err| panic!("{err}"));
    let rows_per_second = environment["MODERATION_ROWS_PER_SECOND"]
        .parse()
        .expect("MODERATION_ROWS_PER_SECOND is a number");

    let before = stack.usage();
    let likes = (0..reactions).map(|i| (BOT.to_owned(), format!("retracted:{i:05}")));
    stack.like_all(CLIENTS, likes).await;
    stack.settle_consumers().await;
    let liked = stack.usage();

    let invocations = stack.retractor().counters().invocations;
    let asked = Instant::now();
    let id = start_retraction(&stack).await;
    retractor_quiet(&stack, invocations).await;
    let took = asked.elapsed();
    stack.settle_consumers().await;
    let retracted = stack.usage();
    // Read after the bill: this read is not the job's work.
    let job = finished(&stack, &id, reactions).await;

    Run {
        rows_per_second,
        likes: names.per(&before, &liked, reactions),
        retraction: names.per(&liked, &retracted, reactions),
        took,
        slices: job.step,
        throttled: retracted.throttled.values().sum(),
    }
}

/// Asks, as a moderator, for the retraction of every reaction of the bot; its id.
async fn start_retraction(stack: &TestStack) -> String {
    let response = stack
        .request(
            "POST",
            &format!("/v1/moderation/users/{BOT}/retractions"),
            None,
        )
        .header(
            "authorization",
            &format!("Bearer {}", stack.moderator_token(MODERATOR)),
        )
        .json(&json!({"reason": "bought likes"}))
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

/// Units per like and per retracted reaction, by part and resource, and their totals.
fn units_table(run: &Run) {
    let mut rows = BTreeMap::<(String, String), [f64; 6]>::new();
    for (phase, billed) in [(0, &run.likes), (1, &run.retraction)] {
        for ((part, label, unit), value) in billed {
            let column = match unit {
                Unit::Writes => 0,
                Unit::Reads => 2,
                Unit::RecordsIn => 4,
                Unit::BytesIn | Unit::BytesOut => continue,
            };
            rows.entry((part.clone(), label.clone())).or_default()[column + phase] += value;
        }
    }
    let mut rows: Vec<_> = rows.into_iter().collect();
    rows.sort_by_key(|((part, label), _)| (billing::order(part), label.clone()));
    say!(
        "| part | table, index or stream | like WCU | retraction WCU | like RCU | \
         retraction RCU | like records | retraction records |"
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
    let (like_writes, retraction_writes) = (
        total(&run.likes, Unit::Writes),
        total(&run.retraction, Unit::Writes),
    );
    say!(
        "| **all** | **per reaction** | **{}** | **{}** | **{}** | **{}** | | |",
        units(like_writes),
        units(retraction_writes),
        units(total(&run.likes, Unit::Reads)),
        units(total(&run.retraction, Unit::Reads)),
    );
    say!(
        "| | retraction / like | | {:.2}× | | | | |",
        retraction_writes / like_writes
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
