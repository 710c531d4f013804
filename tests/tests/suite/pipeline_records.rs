//! What each kind of stream record does to the counts and the event log: records that change
//! no state add 0, account erasure loses its likes honestly, and the Kinesis log holds exactly
//! the flips, at least once, none missing (docs/architecture.md, docs/exactly-once.md).

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::types::AttributeValue;
use likes_core::pipeline::Counts;
use likes_core::ReactionState::{self, Dislike, Like, None as Neutral};
use likes_core::{ItemId, WriteOutcome};
use likes_tests::TestStack;

fn key(user: &str, item: &str) -> [(&'static str, AttributeValue); 2] {
    [
        ("user_id", AttributeValue::S(user.to_owned())),
        ("item_id", AttributeValue::S(item.to_owned())),
    ]
}

async fn counts(stack: &TestStack, item: &str) -> Counts {
    stack
        .counts_store()
        .read(&ItemId::parse(item).unwrap())
        .await
        .unwrap()
}

/// Keys-only INSERTs, no-op MODIFYs (equal images, or only non-state attributes changed), a
/// row inserted in NONE and REMOVEs of NONE rows reach the aggregator and write no count
/// row at all; real flips around them are still counted.
#[tokio::test]
async fn records_that_change_no_state_add_nothing() {
    let stack = TestStack::start().await;
    let dynamodb = stack.dynamodb();
    let table = stack.name("ReactionsTable");
    let item = "game:noop";

    // A keys-only INSERT (moto also emits one before every new row's full INSERT).
    let mut put = dynamodb.put_item().table_name(&table);
    for (name, value) in key("keys-only", item) {
        put = put.item(name, value);
    }
    put.send().await.unwrap();
    // A MODIFY that changes no state: an attribute other than the state.
    let mut update = dynamodb
        .update_item()
        .table_name(&table)
        .update_expression("SET updated_at = :t")
        .expression_attribute_values(":t", AttributeValue::N("1".into()));
    for (name, value) in key("keys-only", item) {
        update = update.key(name, value);
    }
    update.send().await.unwrap();
    // A row born in NONE, then written again unchanged (a MODIFY with equal images).
    let mut none_row = dynamodb.put_item().table_name(&table);
    for (name, value) in key("born-none", item) {
        none_row = none_row.item(name, value);
    }
    let none_row = none_row
        .item("state", AttributeValue::S("NONE".into()))
        .item("op_id", AttributeValue::N("0".into()))
        .item("updated_at", AttributeValue::N("1".into()));
    none_row.clone().send().await.unwrap();
    none_row.send().await.unwrap();
    // A REMOVE of a NONE row.
    stack.erase_row("born-none", item).await;
    let counters = stack.settle().await;
    assert_eq!(
        counters.records_acknowledged,
        stack.stream_records().await as u64,
        "every record the writes made reached the aggregator: {counters:?}"
    );
    assert_eq!(
        (counters.intents_written, counters.count_row_writes),
        (0, 0),
        "no state changed, so nothing was frozen or written: {counters:?}"
    );
    assert_eq!(counts(&stack, item).await, Counts::default());

    // Real flips among more no-ops: liked, unliked (then a REMOVE of the NONE row), a like
    // rewritten unchanged.
    stack.react("liker", item, Like).await;
    stack.react("leaver", item, Like).await;
    stack.react("leaver", item, Neutral).await;
    stack.erase_row("leaver", item).await;
    let again = stack.react("liker", item, Like).await;
    assert!(matches!(again, WriteOutcome::Unchanged(_)), "{again:?}");
    let liked = dynamodb
        .get_item()
        .table_name(&table)
        .key("user_id", AttributeValue::S("liker".into()))
        .key("item_id", AttributeValue::S(item.into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    dynamodb
        .put_item()
        .table_name(&table)
        .set_item(Some(liked))
        .send()
        .await
        .unwrap();
    let before = counters;
    let counters = stack.settle().await;
    assert_eq!(
        counts(&stack, item).await,
        Counts {
            like_count: 1,
            dislike_count: 0
        }
    );
    assert!(
        counters.count_row_writes - before.count_row_writes <= 2,
        "the flips were written, one row per chunk: {counters:?}"
    );
    stack.assert_counts_match_recount(&[item]).await;
}

/// Account erasure deletes a user's rows: the REMOVE of a LIKE (or DISLIKE) row takes its
/// count away, exactly once.
#[tokio::test]
async fn erasing_rows_in_like_or_dislike_loses_those_reactions() {
    let stack = TestStack::start().await;
    let item = "avatar:erased";
    for user in ["a", "b", "c", "d", "e"] {
        stack.react(user, item, Like).await;
    }
    for user in ["f", "g"] {
        stack.react(user, item, Dislike).await;
    }
    stack.settle().await;
    assert_eq!(
        counts(&stack, item).await,
        Counts {
            like_count: 5,
            dislike_count: 2
        }
    );
    // Erased in one batch delivered twice, to be sure the REMOVEs count once.
    stack.pipeline().faults().duplicate_next_batches(1);
    for user in ["a", "b", "c", "f"] {
        stack.erase_row(user, item).await;
    }
    let counters = stack.settle().await;
    assert_eq!(counters.duplicate_deliveries, 1, "{counters:?}");
    assert_eq!(
        counts(&stack, item).await,
        Counts {
            like_count: 2,
            dislike_count: 1
        }
    );
    stack.assert_counts_match_recount(&[item]).await;
}

/// One flip the event log must hold, as the write path reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Flip {
    from: ReactionState,
    to: ReactionState,
}

struct Log<'a> {
    stack: &'a TestStack,
    flips: BTreeMap<String, Flip>,
    /// Each row's state and version, as the writes left them.
    rows: BTreeMap<(String, String), (ReactionState, u64)>,
}

impl Log<'_> {
    fn record(&mut self, user: &str, item: &str, outcome: &WriteOutcome) {
        let (WriteOutcome::Applied(change) | WriteOutcome::Unchanged(change)) = outcome else {
            return;
        };
        self.rows.insert(
            (user.to_owned(), item.to_owned()),
            (change.state, change.version),
        );
        if change.state != change.previous_state {
            self.flips.insert(
                format!("{user}#{item}#{}", change.version),
                Flip {
                    from: change.previous_state,
                    to: change.state,
                },
            );
        }
    }

    async fn react(&mut self, user: &str, item: &str, state: ReactionState) {
        let change = self.stack.react(user, item, state).await;
        self.record(user, item, &change);
    }

    /// Erasure of a row: if it was LIKE or DISLIKE, its flip to NONE is the row's next op.
    async fn erase(&mut self, user: &str, item: &str) {
        let (state, version) = self.rows[&(user.to_owned(), item.to_owned())];
        self.stack.erase_row(user, item).await;
        if state != Neutral {
            self.flips.insert(
                format!("{user}#{item}#{}", version + 1),
                Flip {
                    from: state,
                    to: Neutral,
                },
            );
        }
    }
}

/// The Kinesis log holds exactly the real flips (deduplicated by `event_id`), each with its
/// states and deltas, even though the publisher's puts were refused, one of its invocations
/// failed and a batch was delivered twice; no-op writes and replayed keys put nothing.
#[tokio::test]
async fn the_event_log_holds_exactly_the_flips_even_when_puts_fail() {
    let stack = TestStack::start().await;
    let faults = stack.publisher().faults();
    faults.fail_kinesis_puts(4);
    faults.fail_next_invocations(1);
    faults.duplicate_next_batches(1);
    let mut log = Log {
        stack: &stack,
        flips: BTreeMap::new(),
        rows: BTreeMap::new(),
    };
    let items = ["game:log1", "game:log2"];
    // One virtual shard for every user, so each run of four refused puts meets one
    // publisher in a row (the faults are played by whichever shard calls first).
    let users = stack.users_on_shard("log", 0, 13);
    let (users, retrier) = users.split_at(12);
    let retrier = &retrier[0];
    for (u, user) in users.iter().enumerate() {
        let item = items[u % 2];
        log.react(user, item, Like).await;
        if u % 3 == 0 {
            log.react(user, item, Dislike).await;
        }
        if u % 4 == 0 {
            log.react(user, item, Neutral).await;
        }
        // Unchanged: no flip, no event.
        let current = log.rows[&(user.clone(), item.to_owned())].0;
        log.react(user, item, current).await;
    }
    // A client retry of an accepted write replays; it is no flip either.
    let first = stack
        .react_with_key(retrier, items[0], Like, "retry-key")
        .await;
    log.record(retrier, items[0], &first);
    let replay = stack
        .react_with_key(retrier, items[0], Like, "retry-key")
        .await;
    assert!(matches!(replay, WriteOutcome::Replayed(_)), "{replay:?}");
    log.record(retrier, items[0], &replay);
    stack.settle_events().await;
    faults.fail_kinesis_puts(4);
    // Erasure: user 1's LIKE, user 3's DISLIKE and user 4's NONE row.
    for u in [1, 3, 4] {
        log.erase(&users[u], items[u % 2]).await;
    }
    let counters = stack.settle_events().await;
    assert_eq!(counters.refused_kinesis_puts, 8, "{counters:?}");
    assert_eq!(
        (counters.function_errors, counters.duplicate_deliveries),
        (1, 1),
        "{counters:?}"
    );
    assert!(counters.partial_failures >= 2, "{counters:?}");

    let events = stack.events().await;
    let mut seen = BTreeMap::new();
    for event in &events {
        let flip = Flip {
            from: event.old_state,
            to: event.new_state,
        };
        if let Some(earlier) = seen.insert(event.event_id.clone(), flip.clone()) {
            assert_eq!(earlier, flip, "duplicates of {} agree", event.event_id);
        }
        let delta = likes_core::Transition::new(flip.from, flip.to).delta();
        assert_eq!(
            (event.like_delta, event.dislike_delta),
            (delta.like, delta.dislike),
            "{event:?}"
        );
        assert_eq!(
            event.event_id,
            format!("{}#{}#{}", event.user_id, event.item_id, event.op_id)
        );
    }
    let missing: BTreeSet<_> = log
        .flips
        .keys()
        .filter(|id| !seen.contains_key(*id))
        .collect();
    let extra: BTreeSet<_> = seen
        .keys()
        .filter(|id| !log.flips.contains_key(*id))
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:?}, extra {extra:?}"
    );
    assert_eq!(seen, log.flips);
    stack.assert_counts_match_recount(&items).await;
}

/// A stream record of `user`'s row on `item`, as Lambda hands it to the aggregator: a
/// LIKE's INSERT (`like`) or a MODIFY that changes nothing, stamped `stamped_ms`.
fn stream_record(
    user: &str,
    item: &str,
    sequence: u64,
    stamped_ms: i64,
    like: bool,
) -> serde_json::Value {
    let row = |state: &str| {
        serde_json::json!({
            "user_id": {"S": user}, "item_id": {"S": item}, "state": {"S": state},
            "op_id": {"N": "1"}, "updated_at": {"N": stamped_ms.to_string()},
            "liked_at": {"N": stamped_ms.to_string()},
        })
    };
    let mut change = serde_json::json!({
        "ApproximateCreationDateTime": stamped_ms as f64 / 1000.0,
        "Keys": {"user_id": {"S": user}, "item_id": {"S": item}},
        "NewImage": row("LIKE"),
        "SequenceNumber": format!("{sequence:021}"),
        "SizeBytes": 100,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    });
    if !like {
        change["OldImage"] = row("LIKE");
    }
    serde_json::json!({
        "eventID": format!("{sequence}"),
        "eventName": if like { "INSERT" } else { "MODIFY" },
        "eventVersion": "1.1", "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
        "dynamodb": change,
    })
}

/// Stream times are approximate: a record may be stamped before one ahead of it on its
/// shard. Such a record is applied like any other, whether it changes nothing (the
/// watermark already covers it) or adds a like (the progress moves past it while the
/// watermark stays ahead); neither leaves the shard retrying the batch for ever.
#[tokio::test]
async fn a_record_stamped_before_the_watermark_is_applied_and_the_watermark_never_goes_back() {
    use aws_lambda_events::event::dynamodb::{TimeWindowEvent, TimeWindowEventResponse};
    use likes_consumers::{Aggregator, AggregatorConfig};

    let stack = TestStack::start().await;
    let mut environment = stack
        .stack
        .function_environment(likes_tests::AGGREGATOR_FUNCTION)
        .unwrap();
    // A chunk per record: each record is its own step.
    environment.insert("CHUNK_RECORDS".into(), "1".into());
    let config = AggregatorConfig::from_lookup(|name| environment.get(name).cloned()).unwrap();
    let aggregator = Aggregator::new(config, stack.dynamodb());
    let item = "game:stamped";
    // Stamped in whole seconds, as DynamoDB Streams stamps them.
    let t = likes_core::clock::now_ms() / 1000 * 1000 - 10_000;
    // A like, a no-op stamped 3 s later, then a no-op and a like both stamped before it.
    let records = [
        stream_record("first", item, 100, t, true),
        stream_record("second", item, 200, t + 3_000, false),
        stream_record("third", item, 300, t + 2_000, false),
        stream_record("fourth", item, 400, t + 1_000, true),
    ];
    let shard = "shardId-stamped";
    let batch = serde_json::json!({
        "Records": records,
        "window": {"start": "2026-12-07T00:00:00Z", "end": "2026-12-07T00:01:00Z"},
        "state": {},
        "shardId": shard,
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/Reactions/stream/1",
        "isFinalInvokeForWindow": false,
        "isWindowTerminatedEarly": false,
    });
    let event: TimeWindowEvent = serde_json::from_value(batch).unwrap();
    // Delivered, then delivered again (a duplicate changes nothing).
    for delivery in 0..2 {
        let response: TimeWindowEventResponse = aggregator
            .handle(lambda_runtime::LambdaEvent::new(
                event.clone(),
                lambda_runtime::Context::default(),
            ))
            .await
            .unwrap();
        assert!(
            response.batch_item_failures.is_empty(),
            "delivery {delivery} failed at {:?}",
            response
                .batch_item_failures
                .iter()
                .map(|f| &f.item_identifier)
                .collect::<Vec<_>>()
        );
    }
    assert_eq!(counts(&stack, item).await.like_count, 2);
    let watermarks = likes_store::FreshnessStore::new(stack.dynamodb(), stack.name("CountsTable"))
        .watermarks(&[shard.to_owned()])
        .await
        .unwrap();
    assert_eq!(
        watermarks[shard].stream_time_ms,
        t + 3_000,
        "the watermark stays at the latest stamp it reached"
    );
}
