//! The count rows the reads read, shaped and laid out as the aggregator leaves them (a viral
//! item over its overflow partitions, the page's cold items, the `as_of` replicas), and the
//! read units of one Query of a partition.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use likes_core::clock::now_ms;
use likes_core::reconcile::subtotal_attributes;
use likes_core::ItemId;
use likes_store::freshness::AS_OF_REPLICAS;

use crate::capacity::{self, Item};
use crate::{OVERFLOW_PARTITIONS, ROWS_PER_PARTITION, VIRAL};

/// Rows shaped as the aggregator writes them: totals, one epoch's subtotals, `updated_at`.
pub async fn seed(client: &Client, table: &str, page: &[ItemId]) {
    let now = now_ms();
    let (epoch_like, epoch_dislike) = subtotal_attributes(now / 300_000);
    let row = |partition: &str, shard: String, like: i64| -> Item {
        HashMap::from([
            (
                "item_id".to_owned(),
                AttributeValue::S(partition.to_owned()),
            ),
            ("shard".to_owned(), AttributeValue::S(shard)),
            ("like_count".to_owned(), AttributeValue::N(like.to_string())),
            ("dislike_count".to_owned(), AttributeValue::N("3".into())),
            (epoch_like.clone(), AttributeValue::N(like.to_string())),
            (epoch_dislike.clone(), AttributeValue::N("3".into())),
            ("updated_at".to_owned(), AttributeValue::N(now.to_string())),
        ])
    };
    let mut rows = Vec::new();
    for h in 0..=OVERFLOW_PARTITIONS {
        let partition = match h {
            0 => VIRAL.to_owned(),
            h => format!("{VIRAL}#{h}"),
        };
        for k in 0..ROWS_PER_PARTITION {
            rows.push(row(&partition, format!("D#{k}"), 123_456));
        }
    }
    rows.push(HashMap::from([
        ("item_id".to_owned(), AttributeValue::S(VIRAL.to_owned())),
        ("shard".to_owned(), AttributeValue::S("H".into())),
        (
            "partitions".to_owned(),
            AttributeValue::N(OVERFLOW_PARTITIONS.to_string()),
        ),
    ]));
    for item in page {
        for k in [0, 7] {
            rows.push(row(item.as_str(), format!("D#{k}"), 42));
        }
    }
    for replica in 0..AS_OF_REPLICAS {
        rows.push(HashMap::from([
            (
                "item_id".to_owned(),
                AttributeValue::S(format!("#asof#{replica}")),
            ),
            ("shard".to_owned(), AttributeValue::S("A".into())),
            (
                "as_of".to_owned(),
                AttributeValue::N((now - 2000).to_string()),
            ),
            ("computed_at".to_owned(), AttributeValue::N(now.to_string())),
        ]));
    }
    for row in rows {
        client
            .put_item()
            .table_name(table)
            .set_item(Some(row))
            .send()
            .await
            .expect("PutItem");
    }
}

/// The half read units of one eventually consistent Query of `partition`.
pub async fn partition_half_units(client: &Client, table: &str, partition: &str) -> u64 {
    let output = client
        .query()
        .table_name(table)
        .key_condition_expression("item_id = :p")
        .expression_attribute_values(":p", AttributeValue::S(partition.to_owned()))
        .send()
        .await
        .expect("Query");
    let bytes: usize = output
        .items
        .unwrap_or_default()
        .iter()
        .map(capacity::item_size)
        .sum();
    capacity::eventually_consistent_half_units(bytes)
}
