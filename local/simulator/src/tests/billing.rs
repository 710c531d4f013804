//! The bill is DynamoDB's and Kinesis's, and a key or shard at its limit is throttled.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, GlobalSecondaryIndex, KeySchemaElement,
    KeyType, Projection, ProjectionType, Put, PutRequest, ReturnConsumedCapacity,
    ScalarAttributeType, TransactWriteItem, Update, WriteRequest,
};
use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::PutRecordsRequestEntry;

use super::sdk_on;
use crate::{index_resource, stream_resource, table_resource, Simulator, Unit};

/// A table keyed by `pk`, with an index `by_g` on `g` projecting every attribute.
async fn indexed_table(dynamodb: &aws_sdk_dynamodb::Client, name: &str) {
    let attribute = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .unwrap()
    };
    let hash = |name: &str| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(KeyType::Hash)
            .build()
            .unwrap()
    };
    dynamodb
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute("pk"))
        .attribute_definitions(attribute("g"))
        .key_schema(hash("pk"))
        .global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name("by_g")
                .key_schema(hash("g"))
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::All)
                        .build(),
                )
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("CreateTable");
}

fn s(text: &str) -> AttributeValue {
    AttributeValue::S(text.to_owned())
}

/// An item of `bytes` as DynamoDB sizes it (names and values), with `g` set when given.
fn item_of(
    pk: &str,
    g: Option<&str>,
    bytes: usize,
) -> (Vec<(&'static str, AttributeValue)>, usize) {
    let mut item = vec![("pk", s(pk))];
    let mut size = "pk".len() + pk.len();
    if let Some(g) = g {
        item.push(("g", s(g)));
        size += "g".len() + g.len();
    }
    let pad = "x".repeat(bytes.saturating_sub(size + "pad".len()));
    size += "pad".len() + pad.len();
    item.push(("pad", s(&pad)));
    (item, size)
}

fn write_units(bytes: usize) -> f64 {
    (bytes as f64 / 1024.0).ceil().max(1.0)
}

#[tokio::test]
async fn writes_reads_transactions_indexes_and_refused_conditions_are_billed_as_dynamodb_bills_them(
) {
    let simulator = Simulator::new().unwrap();
    let dynamodb = aws_sdk_dynamodb::Client::new(&sdk_on(&simulator).await);
    indexed_table(&dynamodb, "items").await;
    let (big, big_size) = item_of("a", Some("x"), 1500);
    let put = big.iter().fold(
        dynamodb.put_item().table_name("items"),
        |put, (name, value)| put.item(*name, value.clone()),
    );
    let answer = put.clone().send().await.unwrap();
    assert!(
        answer.consumed_capacity.is_none(),
        "capacity only when asked"
    );
    // A transaction doubles; an item without `g` is in no index.
    let (small, small_size) = item_of("b", None, 100);
    let transactional = Put::builder()
        .table_name("items")
        .set_item(Some(
            small
                .iter()
                .map(|(n, v)| (n.to_string(), v.clone()))
                .collect(),
        ))
        .build()
        .unwrap();
    dynamodb
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().put(transactional).build())
        .send()
        .await
        .unwrap();
    // A write its condition refuses still costs the item there.
    let refused = put
        .condition_expression("attribute_not_exists(pk)")
        .send()
        .await
        .unwrap_err();
    assert!(refused
        .as_service_error()
        .is_some_and(|e| e.is_conditional_check_failed_exception()));
    // Reads: 4 KB units, halved when eventually consistent; asked for, capacity is told.
    let read = dynamodb
        .get_item()
        .table_name("items")
        .key("pk", s("a"))
        .return_consumed_capacity(ReturnConsumedCapacity::Total)
        .send()
        .await
        .unwrap();
    let told = read.consumed_capacity.and_then(|c| c.capacity_units);
    assert_eq!(told, Some(0.5));
    dynamodb
        .get_item()
        .table_name("items")
        .key("pk", s("a"))
        .consistent_read(true)
        .send()
        .await
        .unwrap();

    let usage = simulator.usage();
    let table = table_resource("items");
    assert_eq!(
        usage.billed(&table, Unit::Writes),
        write_units(big_size) + 2.0 * write_units(small_size) + write_units(big_size)
    );
    assert_eq!(
        usage.billed(&index_resource("items", "by_g"), Unit::Writes),
        write_units(big_size)
    );
    assert_eq!(usage.billed(&table, Unit::Reads), 0.5 + 1.0);
}

#[tokio::test]
async fn a_key_at_1000_write_units_in_a_second_is_throttled_and_a_batch_hands_it_back() {
    let simulator = Simulator::new().unwrap();
    // Every request in the same second, however slowly the machine runs the test.
    simulator.stop_the_clock();
    let dynamodb = aws_sdk_dynamodb::Client::new(&sdk_on(&simulator).await);
    indexed_table(&dynamodb, "items").await;
    // Each write of the 10 KB item costs 10 units.
    let (hot, size) = item_of("hot", None, 10 * 1024 - 100);
    assert_eq!(write_units(size), 10.0);
    let put = hot.iter().fold(
        dynamodb.put_item().table_name("items"),
        |put, (name, value)| put.item(*name, value.clone()),
    );
    let mut written = 0;
    let throttled = loop {
        match put.clone().send().await {
            Ok(_) => written += 1,
            Err(err) => break err,
        }
        assert!(written <= 100, "a key takes 1,000 write units a second");
    };
    assert!(
        throttled
            .as_service_error()
            .is_some_and(|e| e.is_provisioned_throughput_exceeded_exception()),
        "{throttled:?}"
    );
    assert_eq!(written, 100);
    let table = table_resource("items");
    let usage = simulator.usage();
    let peak = &usage.peaks[&(table.clone(), Unit::Writes)];
    assert_eq!((peak.key.as_str(), peak.per_second), ("hot", 1000.0));
    assert_eq!(usage.throttled(&table, Unit::Writes), 1);

    // A batch: the item at the hot key comes back unprocessed, the other is written.
    let write = |pk: &str| {
        WriteRequest::builder()
            .put_request(PutRequest::builder().item("pk", s(pk)).build().unwrap())
            .build()
    };
    let answer = dynamodb
        .batch_write_item()
        .request_items("items", vec![write("hot"), write("cold")])
        .send()
        .await
        .unwrap();
    let unprocessed = answer.unprocessed_items.unwrap_or_default();
    let keys: Vec<_> = unprocessed["items"]
        .iter()
        .filter_map(|w| w.put_request.as_ref())
        .map(|p| p.item["pk"].clone())
        .collect();
    assert_eq!(keys, [s("hot")]);
    let cold = dynamodb
        .get_item()
        .table_name("items")
        .key("pk", s("cold"))
        .send()
        .await
        .unwrap();
    assert!(cold.item.is_some(), "the cold key's item was written");
}

#[tokio::test]
async fn a_shard_refuses_records_past_1000_in_a_second_and_its_neighbour_takes_them() {
    let simulator = Simulator::new().unwrap();
    // Every request in the same second, however slowly the machine runs the test.
    simulator.stop_the_clock();
    let kinesis = aws_sdk_kinesis::Client::new(&sdk_on(&simulator).await);
    kinesis
        .create_stream()
        .stream_name("log")
        .shard_count(2)
        .send()
        .await
        .unwrap();
    // Hash key 0 is the first shard's; the last hash is the second's.
    let batch = |hash: &str, n: usize| {
        (0..n)
            .map(|i| {
                PutRecordsRequestEntry::builder()
                    .data(Blob::new(format!("record {i}")))
                    .partition_key("k")
                    .explicit_hash_key(hash)
                    .build()
                    .unwrap()
            })
            .collect::<Vec<_>>()
    };
    let put = |records: Vec<PutRecordsRequestEntry>| {
        kinesis
            .put_records()
            .stream_name("log")
            .set_records(Some(records))
            .send()
    };
    for _ in 0..2 {
        let answer = put(batch("0", 500)).await.unwrap();
        assert_eq!(answer.failed_record_count, Some(0));
    }
    let refused = put(batch("0", 10)).await.unwrap();
    assert_eq!(refused.failed_record_count, Some(10));
    assert!(refused
        .records
        .iter()
        .all(|r| r.error_code() == Some("ProvisionedThroughputExceededException")));
    let last = u128::MAX.to_string();
    let neighbour = put(batch(&last, 10)).await.unwrap();
    assert_eq!(neighbour.failed_record_count, Some(0));

    let usage = simulator.usage();
    let stream = stream_resource("log");
    assert_eq!(usage.billed(&stream, Unit::RecordsIn), 1010.0);
    assert_eq!(usage.throttled(&stream, Unit::RecordsIn), 10);
    assert_eq!(
        usage.peaks[&(stream, Unit::RecordsIn)].key,
        "shardId-000000000000"
    );
}

#[tokio::test]
async fn a_transaction_meeting_one_in_flight_on_its_item_is_cancelled_and_billed() {
    let simulator = Simulator::new().unwrap();
    simulator.stop_the_clock();
    let dynamodb = aws_sdk_dynamodb::Client::new(&sdk_on(&simulator).await);
    indexed_table(&dynamodb, "items").await;
    let add = |pk: &str| {
        TransactWriteItem::builder()
            .update(
                Update::builder()
                    .table_name("items")
                    .key("pk", s(pk))
                    .update_expression("ADD n :one")
                    .expression_attribute_values(":one", AttributeValue::N("1".into()))
                    .build()
                    .unwrap(),
            )
            .build()
    };
    let transact = |items: Vec<TransactWriteItem>| {
        dynamodb
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
    };
    transact(vec![add("a")]).await.unwrap();
    // Another item is free; the one just written is still in flight.
    transact(vec![add("c")]).await.unwrap();
    let refused = transact(vec![add("a"), add("b")]).await.unwrap_err();
    let reasons: Vec<_> = match refused.as_service_error() {
        Some(aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError::TransactionCanceledException(e)) => e
            .cancellation_reasons()
            .iter()
            .map(|r| r.code().unwrap_or_default().to_owned())
            .collect(),
        other => panic!("{other:?}"),
    };
    assert_eq!(reasons, ["TransactionConflict", "None"]);
    let count = |pk: &str| {
        let get = dynamodb.get_item().table_name("items").key("pk", s(pk));
        async move { get.send().await.unwrap().item.map(|item| item["n"].clone()) }
    };
    assert_eq!(
        count("b").await,
        None,
        "a cancelled transaction writes nothing"
    );
    simulator.advance_the_clock(crate::dynamodb::IN_FLIGHT * 2);
    transact(vec![add("a"), add("b")]).await.unwrap();
    assert_eq!(count("a").await, Some(AttributeValue::N("2".into())));
    // Two committed transactions of one small item each (2 units), one of two items (4), and
    // the conflicting item billed as a cancellation (1).
    let billed = simulator
        .usage()
        .billed(&table_resource("items"), Unit::Writes);
    assert_eq!(billed, 2.0 + 2.0 + 4.0 + 1.0);
}
