//! What the emulator itself costs, timed before the workload: its round trips are not AWS's,
//! and every request waits on moto's one lock meanwhile (the writers, both counters, the
//! readers). Timed are the aggregator's two kinds of write: a chunk's intent `PutItem`, and
//! the `UpdateItem` that adds a chunk's delta to one count row. The staleness figures read
//! against these.

use std::collections::BTreeMap;
use std::time::Instant;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType,
    ScalarAttributeType,
};
use likes_core::clock::now_ms;
use likes_core::likers::bucket_of;
use likes_core::pipeline::{CountTarget, Lane, RowDelta};
use likes_core::{Delta, ItemId};
use likes_store::{CountIntent, CountsWriter};
use likes_tests::TestStack;

/// The intent-sized item put: about a cold chunk's intent of a hundred count rows (an intent
/// keeps ~40 B per row).
pub const INTENT_BYTES: usize = 4096;
/// Requests timed of each kind.
const REQUESTS: usize = 60;

/// Milliseconds of one emulator request, by kind.
pub struct Timings {
    /// One count row's conditional `UpdateItem` ADD, as the aggregator sends it.
    pub update_item_ms: f64,
    /// One conditional `PutItem` of an [`INTENT_BYTES`] item, as a chunk's intent is put.
    pub intent_put_ms: f64,
}

/// Times the requests on a scratch table of the Counts table's shape, beside the stack's.
pub async fn time(stack: &TestStack) -> Timings {
    let client = stack.dynamodb();
    let table = format!("{}-Probe", stack.name("CountsTable"));
    let key = |name: &str, key_type| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(key_type)
            .build()
            .expect("key schema")
    };
    let attribute = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .expect("attribute definition")
    };
    client
        .create_table()
        .table_name(&table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute("item_id"))
        .attribute_definitions(attribute("shard"))
        .key_schema(key("item_id", KeyType::Hash))
        .key_schema(key("shard", KeyType::Range))
        .send()
        .await
        .expect("CreateTable of the probe table");

    // The aggregator's own UpdateItem, through its writer: an intent of one row, on a new
    // row each time.
    let writer = CountsWriter::new(client.clone(), &table);
    let like = Delta {
        like: 1,
        dislike: 0,
    };
    // An intent-sized PutItem, on condition the row is new, as an intent is put: its key as
    // an intent's, and a `rows` attribute that fills it to INTENT_BYTES.
    let partition = "#wm#probe-shard";
    let intent_key = |i: usize| format!("I#{i:020}");
    let keys = "item_id".len() + partition.len() + "shard".len() + intent_key(0).len();
    let filler = "x".repeat(INTENT_BYTES - keys - "rows".len());
    // Taken in turns, so the emulator's warm-up and drift touch both alike.
    let (mut update_ms, mut put_ms) = (0.0, 0.0);
    for i in 0..REQUESTS {
        let now = now_ms();
        let target = CountTarget {
            item: ItemId::parse(&format!("probe:{i}")).expect("an item id"),
            lane: Lane::Base,
            row: 0,
        };
        let delta = RowDelta {
            total: like,
            by_epoch: BTreeMap::from([(0, like)]),
            near_cuts: BTreeMap::new(),
            // A like lists its likers bucket.
            liked_buckets: [bucket_of(&format!("probe-user{i}"))].into(),
        };
        let intent = CountIntent {
            n: now,
            last_seq: i.to_string(),
            stream_time_ms: now,
            probe_key: None,
            deltas: BTreeMap::from([(target, delta)]),
        };
        let started = Instant::now();
        let took = writer
            .apply("probe-shard", &intent, now)
            .await
            .expect("UpdateItem of the probe");
        update_ms += started.elapsed().as_secs_f64() * 1000.0;
        assert_eq!(took, 1, "the probe row took its delta");

        let started = Instant::now();
        client
            .put_item()
            .table_name(&table)
            .item("item_id", AttributeValue::S(partition.to_owned()))
            .item("shard", AttributeValue::S(intent_key(i)))
            .item("rows", AttributeValue::S(filler.clone()))
            .condition_expression("attribute_not_exists(item_id)")
            .send()
            .await
            .expect("PutItem of the probe");
        put_ms += started.elapsed().as_secs_f64() * 1000.0;
    }
    Timings {
        update_item_ms: update_ms / REQUESTS as f64,
        intent_put_ms: put_ms / REQUESTS as f64,
    }
}
