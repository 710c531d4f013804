//! The simulator stands in for AWS in `make check`'s fast tier, so it must end where the
//! emulator ends: one history of reactions, played through the HTTP front of a stack on
//! each, leaves the same counts, likers lists, liked lists and leaderboard on both, and
//! each is what the clients set. And the simulator's bill is the ledger's, so it must be
//! the emulator's: the same history, its pipeline and its reads cost the same units on
//! each, resource by resource (the emulator prices requests in its own code).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use likes_local::event_source_mapping::StreamSource;
use likes_simulator::Unit;
use likes_tests::billing::{Billed, Resources};
use likes_tests::{Aws, TestStack};
use serde_json::{json, Value};

const USERS: usize = 9;
const ITEMS: [&str; 4] = ["game:agree0", "game:agree1", "game:agree2", "game:agree3"];

/// What every client set last, by (user, item): the history's truth.
type Truth = BTreeMap<(String, String), &'static str>;

/// What a stack serves once it has applied the history.
#[derive(Debug, PartialEq)]
struct Served {
    counts: BTreeMap<String, (u64, u64)>,
    likers: BTreeMap<String, BTreeSet<String>>,
    liked: BTreeMap<String, BTreeSet<String>>,
    board: Value,
}

/// User `u`'s writes: a like of every item up to `u % 4`, a dislike of the next, a change
/// of mind on the first for every third user, and a retry of one write with its key.
fn history() -> Vec<Write> {
    let mut writes = Vec::new();
    for u in 0..USERS {
        let user = format!("agree-user{u}");
        let liked = u % ITEMS.len();
        for (i, item) in ITEMS.iter().enumerate().take(liked + 1) {
            let state = if i == liked { "DISLIKE" } else { "LIKE" };
            writes.push((user.clone(), item.to_string(), state, format!("{user}-{i}")));
        }
        if u % 3 == 0 {
            writes.push((
                user.clone(),
                ITEMS[0].to_owned(),
                "NONE",
                format!("{user}-undo"),
            ));
        }
        // A client's retry of its first write: replayed, no second flip.
        writes.push((
            user.clone(),
            ITEMS[0].to_owned(),
            writes_first_state(u),
            format!("{user}-0"),
        ));
    }
    writes
}

fn writes_first_state(u: usize) -> &'static str {
    if u % ITEMS.len() == 0 {
        "DISLIKE"
    } else {
        "LIKE"
    }
}

/// One client's write: user, item, state and idempotency key.
type Write = (String, String, &'static str, String);

async fn play(stack: &TestStack) -> Truth {
    play_writes(stack, history()).await
}

async fn play_writes(stack: &TestStack, writes: Vec<Write>) -> Truth {
    let mut truth = Truth::new();
    for (user, item, state, key) in writes {
        let response = stack
            .request("PUT", &format!("/v1/items/{item}/reaction"), Some(&user))
            .header("idempotency-key", &key)
            .json(&json!({ "state": state }))
            .send()
            .await;
        response.assert_status(200);
        if response.header("idempotent-replayed").is_none() {
            truth.insert((user, item), state);
        }
    }
    truth
}

async fn served(stack: &TestStack) -> Served {
    stack.settle().await;
    stack.settle_leaderboard().await;
    stack.settle_leaderboard().await;
    let mut counts = BTreeMap::new();
    let mut likers = BTreeMap::new();
    for item in ITEMS {
        let body = stack.like_count(item).await.json();
        counts.insert(
            item.to_owned(),
            (
                body["like_count"].as_u64().expect("like_count"),
                body["dislike_count"].as_u64().expect("dislike_count"),
            ),
        );
        let listed = stack.all_likers(item, 3).await;
        likers.insert(
            item.to_owned(),
            listed.into_iter().map(|(u, _)| u).collect(),
        );
    }
    let mut liked = BTreeMap::new();
    for u in 0..USERS {
        let user = format!("agree-user{u}");
        let items = stack
            .liked_items(&user)
            .await
            .iter()
            .map(|i| i["item_id"].as_str().expect("item_id").to_owned())
            .collect();
        liked.insert(user, items);
    }
    let expected_board = board_of(&counts);
    let board = stack
        .leaderboard_until("window=all&limit=10", &expected_board)
        .await["items"]
        .clone();
    Served {
        counts,
        likers,
        liked,
        board,
    }
}

/// The all-time board the counts make: most liked first, ties by item id.
fn board_of(counts: &BTreeMap<String, (u64, u64)>) -> Value {
    let mut ranked: Vec<_> = counts.iter().filter(|(_, (likes, _))| *likes > 0).collect();
    ranked.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(b.0)));
    Value::Array(
        ranked
            .into_iter()
            .map(|(item, (likes, _))| json!({ "item_id": item, "like_count": likes }))
            .collect(),
    )
}

fn expected(truth: &Truth) -> Served {
    let mut counts: BTreeMap<String, (u64, u64)> =
        ITEMS.iter().map(|i| (i.to_string(), (0, 0))).collect();
    let mut likers: BTreeMap<String, BTreeSet<String>> = ITEMS
        .iter()
        .map(|i| (i.to_string(), BTreeSet::new()))
        .collect();
    let mut liked: BTreeMap<String, BTreeSet<String>> = (0..USERS)
        .map(|u| (format!("agree-user{u}"), BTreeSet::new()))
        .collect();
    for ((user, item), state) in truth {
        let count = counts.get_mut(item).expect("an item of the history");
        match *state {
            "LIKE" => {
                count.0 += 1;
                likers.get_mut(item).expect("item").insert(user.clone());
                liked.get_mut(user).expect("user").insert(item.clone());
            }
            "DISLIKE" => count.1 += 1,
            _ => {}
        }
    }
    let board = board_of(&counts);
    Served {
        counts,
        likers,
        liked,
        board,
    }
}

#[tokio::test]
async fn one_history_ends_the_same_on_the_emulator_and_the_simulator() {
    let (emulated, simulated) = tokio::join!(
        TestStack::builder()
            .on(Aws::Emulator)
            .refreshing_boards()
            .start(),
        TestStack::builder()
            .on(Aws::Simulator)
            .refreshing_boards()
            .start(),
    );
    let (emulated_truth, simulated_truth) = tokio::join!(play(&emulated), play(&simulated));
    assert_eq!(
        emulated_truth, simulated_truth,
        "both stacks replay the same keys"
    );
    let want = expected(&emulated_truth);
    assert!(
        want.counts.values().any(|(l, d)| *l > 0 && *d > 0),
        "the history moves likes and dislikes: {want:?}"
    );
    let (on_emulator, on_simulator) = tokio::join!(served(&emulated), served(&simulated));
    assert_eq!(
        on_emulator, want,
        "the emulator serves what the clients set"
    );
    assert_eq!(
        on_simulator, on_emulator,
        "the simulator serves what the emulator does"
    );
}

const SETTLED_WITHIN: Duration = Duration::from_secs(60);

/// A stack whose mappings gather before they deliver ([`deliver_gathered`]), with no
/// heartbeats on the event log (they come with time, not with the history).
async fn gathering(aws: Aws) -> TestStack {
    let stack = TestStack::builder()
        .on(aws)
        .mappings(1, &[])
        .environment(&[("HEARTBEAT_AFTER_SECONDS", "86400")])
        .start()
        .await;
    for pipeline in stack.stack.pipelines() {
        pipeline.pause();
    }
    stack
}

/// Each paused mapping reads its stream through, then delivers it one shard after another,
/// the Reactions stream's before the event log's (which the publisher fills), and is
/// paused again: every shard cuts its batches from all it holds at once, and no two shards
/// race to one row (the loser of such a race pays a refused write), so any two AWS cut and
/// write alike.
async fn deliver_gathered(stack: &TestStack) {
    for log in [false, true] {
        for pipeline in stack
            .stack
            .pipelines()
            .iter()
            .filter(|p| (p.config().source == StreamSource::Kinesis) == log)
        {
            let function = &pipeline.config().function;
            let read = pipeline.read_through(SETTLED_WITHIN).await;
            read.unwrap_or_else(|err| panic!("{function} reads its stream: {err}"));
            let shards: Vec<String> = pipeline.stream_shards().into_keys().collect();
            for shard in &shards {
                pipeline.faults().stall_stream_shard(shard);
            }
            pipeline.resume();
            for shard in &shards {
                pipeline.faults().resume_stream_shard(shard);
                let settled = pipeline.settle_running(SETTLED_WITHIN).await;
                settled.unwrap_or_else(|err| panic!("{function} settles {shard}: {err}"));
            }
            pipeline.pause();
        }
    }
}

/// Every read a client makes once the history is applied, each once: the counts, one by one
/// and all at once, a likers page of each item, each user's liked list and own reactions
/// to every item, the all-time board.
async fn read_once(stack: &TestStack) {
    for item in ITEMS {
        stack.like_count(item).await.assert_status(200);
        stack.likers_page_as("reader", item, "limit=10").await;
    }
    let every_item = json!({ "item_ids": ITEMS });
    let counts = stack
        .request("POST", "/v1/items/like-counts:batchGet", None)
        .json(&every_item)
        .send()
        .await;
    counts.assert_status(200);
    for u in 0..USERS {
        let user = format!("agree-user{u}");
        stack.liked_items(&user).await;
        let own = stack
            .request("POST", "/v1/items:batchGet", Some(&user))
            .json(&every_item)
            .send()
            .await;
        own.assert_status(200);
    }
    let board = stack
        .request("GET", "/v1/leaderboard?window=all&limit=10", None)
        .send()
        .await;
    board.assert_status(200);
}

/// The history in two rounds, each flipping a row at most once: a batch writes two flips
/// of one row at once, and whichever lands second may be refused (a unit more), so a round
/// holding both would bill by a race.
fn rounds() -> [Vec<Write>; 2] {
    let mut rounds = [Vec::new(), Vec::new()];
    let mut rows = BTreeSet::new();
    for write in history() {
        let first = rows.insert((write.0.clone(), write.1.clone()));
        rounds[usize::from(!first)].push(write);
    }
    rounds
}

/// The phases of [`billed_phases`]: each round's writes and their delivery, then the reads.
const PHASES: [&str; 5] = [
    "writes",
    "pipeline",
    "second writes",
    "second pipeline",
    "reads",
];

/// What the clock decides in the HTTP front's handlers, not the history: a container's
/// lease on a user's writes lasts `LEASE_MS`, so a slower run takes more of them, and a
/// container keeps a count, the counts' `as_of`, whether an item was removed and the
/// catalog's rules and owners for a second before it reads them again.
const CLOCKED: [(&str, Unit); 4] = [
    ("RateLimitsTable", Unit::Writes),
    ("CountsTable", Unit::Reads),
    ("ModerationTable", Unit::Reads),
    ("CatalogTable", Unit::Reads),
];

/// What each phase billed on one stack, by part of the service, template resource and
/// unit (write and read units, records put on the event log; in the front's phases, not
/// what is [`CLOCKED`]), to a millionth of a unit (the simulator shares a batch's units
/// over its items).
async fn billed_phases(stack: &TestStack) -> Vec<BTreeMap<(String, String, Unit), i64>> {
    let resources = Resources::of(stack);
    let mut readings = vec![stack.billed().await];
    for writes in rounds() {
        play_writes(stack, writes).await;
        readings.push(stack.billed().await);
        deliver_gathered(stack).await;
        readings.push(stack.billed().await);
    }
    read_once(stack).await;
    readings.push(stack.billed().await);
    readings
        .windows(2)
        .zip(PHASES)
        .map(|(pair, phase)| {
            let front = !phase.contains("pipeline");
            let billed: Billed = resources.per(&pair[0], &pair[1], 1);
            billed
                .into_iter()
                .filter(|((_, label, unit), _)| {
                    matches!(unit, Unit::Writes | Unit::Reads | Unit::RecordsIn)
                        && !(front && CLOCKED.contains(&(label.as_str(), *unit)))
                })
                .map(|(key, units)| (key, (units * 1e6).round() as i64))
                .collect()
        })
        .collect()
}

/// Waits, if need be, for the aggregator's next tumbling window, so `within` from now
/// falls in one window: a window's end cuts a batch, and its final invocation writes.
async fn in_one_window(stack: &TestStack, within: Duration) {
    let left = stack
        .window_left()
        .expect("the aggregator counts in tumbling windows");
    if left < within {
        tokio::time::sleep(left + Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn one_history_bills_the_same_units_on_the_emulator_and_the_simulator() {
    let (emulated, simulated) = tokio::join!(gathering(Aws::Emulator), gathering(Aws::Simulator));
    in_one_window(&emulated, Duration::from_secs(40)).await;
    let (on_emulator, on_simulator) =
        tokio::join!(billed_phases(&emulated), billed_phases(&simulated));
    let billed = |phase: &BTreeMap<(String, String, Unit), i64>, part: &str, unit| {
        phase
            .iter()
            .any(|((p, _, u), units)| p == part && *u == unit && *units > 0)
    };
    let [writes, pipeline, _, _, reads] = &on_emulator[..] else {
        panic!("five phases: {on_emulator:?}")
    };
    assert!(billed(writes, "write path", Unit::Writes), "{writes:?}");
    for part in ["counts", "likers", "leaderboard"] {
        assert!(billed(pipeline, part, Unit::Writes), "{part}: {pipeline:?}");
    }
    assert!(
        billed(pipeline, "event log", Unit::RecordsIn),
        "{pipeline:?}"
    );
    for part in ["write path", "likers", "leaderboard"] {
        assert!(billed(reads, part, Unit::Reads), "{part}: {reads:?}");
    }
    for (phase, (emulator, simulator)) in PHASES.iter().zip(on_emulator.iter().zip(&on_simulator)) {
        assert_eq!(
            emulator, simulator,
            "the {phase} phase billed the same on the emulator (left) and the simulator"
        );
    }
}

/// A Query is billed on the items it evaluated, not on what its filter and projection
/// leave: three entries of about 2 KB, read through a filter that keeps none of them and a
/// projection of their keys, cost their summed size in 4 KB units, halved (eventually
/// consistent), on both.
#[tokio::test]
async fn a_query_is_billed_alike_on_what_it_evaluated_before_its_filter_and_projection() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let (emulated, simulated) = tokio::join!(
        TestStack::builder().on(Aws::Emulator).start(),
        TestStack::builder().on(Aws::Simulator).start(),
    );
    let note = "n".repeat(2_000);
    let mut billed = Vec::new();
    for stack in [&emulated, &simulated] {
        let table = stack.name("LikersTable");
        let dynamodb = stack.dynamodb();
        let mut evaluated = 0;
        for entry in ["a", "b", "c"] {
            let item = [
                ("bucket", AttributeValue::S("billed#0".into())),
                ("entry", AttributeValue::S(entry.into())),
                ("note", AttributeValue::S(note.clone())),
            ];
            evaluated += item
                .iter()
                .map(|(name, value)| name.len() + value.as_s().expect("a string").len())
                .sum::<usize>();
            let put = dynamodb.put_item().table_name(&table);
            let put = item
                .into_iter()
                .fold(put, |put, (name, value)| put.item(name, value));
            put.send().await.expect("PutItem");
        }
        let before = stack.billed().await;
        let answer = dynamodb
            .query()
            .table_name(&table)
            .key_condition_expression("#bucket = :bucket")
            .filter_expression("#note = :none")
            .projection_expression("#entry")
            .expression_attribute_names("#bucket", "bucket")
            .expression_attribute_names("#note", "note")
            .expression_attribute_names("#entry", "entry")
            .expression_attribute_values(":bucket", AttributeValue::S("billed#0".into()))
            .expression_attribute_values(":none", AttributeValue::S("none".into()))
            .send()
            .await
            .expect("Query");
        assert_eq!((answer.count, answer.scanned_count), (0, 3));
        let after = stack.billed().await;
        let resource = likes_simulator::table_resource(&table);
        let units = after.billed(&resource, Unit::Reads) - before.billed(&resource, Unit::Reads);
        billed.push(units);
        assert_eq!(
            units,
            evaluated.div_ceil(4096) as f64 / 2.0,
            "{evaluated} bytes evaluated"
        );
    }
    assert_eq!(billed[0], billed[1], "emulator (left), simulator");
}
