//! What the emulator itself costs, timed before the workload: its round trips are not
//! AWS's, and a large `TransactWriteItems` holds moto's one lock long enough to delay every
//! other request (the writers, both counters, the readers). The staleness figures read
//! against these.

use std::time::Instant;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType,
    ScalarAttributeType, TransactWriteItem, Update,
};
use likes_core::pipeline::MAX_CHUNK_ITEMS;
use likes_tests::TestStack;

/// Milliseconds of one emulator request, by kind.
pub struct Timings {
    pub update_item_ms: f64,
    /// One `TransactWriteItems` of as many count-row updates as a chunk can hold.
    pub full_transaction_ms: f64,
    pub small_transaction_ms: f64,
}

/// Times the requests on a scratch table of the count rows' shape, beside the stack's.
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
    let update = |item: String| {
        Update::builder()
            .table_name(&table)
            .key("item_id", AttributeValue::S(item))
            .key("shard", AttributeValue::S("D#0".into()))
            .update_expression("ADD like_count :one")
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .build()
            .expect("an update")
    };
    let transaction = |round: usize, items: usize| {
        let actions: Vec<TransactWriteItem> = (0..items)
            .map(|i| {
                TransactWriteItem::builder()
                    .update(update(format!("probe:{round}-{i}")))
                    .build()
            })
            .collect();
        let client = client.clone();
        async move {
            let started = Instant::now();
            client
                .transact_write_items()
                .set_transact_items(Some(actions))
                .send()
                .await
                .expect("TransactWriteItems of the probe");
            started.elapsed().as_secs_f64() * 1000.0
        }
    };
    const ROUNDS: usize = 3;
    let (mut full, mut small) = (0.0, 0.0);
    for round in 0..ROUNDS {
        full += transaction(2 * round, MAX_CHUNK_ITEMS).await;
        small += transaction(2 * round + 1, 2).await;
    }
    let started = Instant::now();
    for i in 0..MAX_CHUNK_ITEMS {
        client
            .update_item()
            .table_name(&table)
            .key("item_id", AttributeValue::S(format!("probe:single-{i}")))
            .key("shard", AttributeValue::S("D#0".into()))
            .update_expression("ADD like_count :one")
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .send()
            .await
            .expect("UpdateItem of the probe");
    }
    Timings {
        update_item_ms: started.elapsed().as_secs_f64() * 1000.0 / MAX_CHUNK_ITEMS as f64,
        full_transaction_ms: full / ROUNDS as f64,
        small_transaction_ms: small / ROUNDS as f64,
    }
}
