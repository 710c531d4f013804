//! Filling a table fast: BatchWriteItem of 25 puts, a few requests in flight. The emulator
//! runs one request at a time, so more in flight only hides the client's own round trips.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
use aws_sdk_dynamodb::Client;

use crate::capacity::Item;

/// DynamoDB's most puts per BatchWriteItem.
const BATCH: usize = 25;
const IN_FLIGHT: usize = 4;
/// Rounds for items DynamoDB left unprocessed (throttled) before the load fails.
const ATTEMPTS: u32 = 8;

/// What a load took.
#[derive(Debug, Clone, Copy)]
pub struct Loaded {
    pub rows: usize,
    pub requests: usize,
    pub elapsed: Duration,
}

impl Loaded {
    pub fn requests_per_second(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }

    pub fn rows_per_second(&self) -> f64 {
        self.rows as f64 / self.elapsed.as_secs_f64()
    }
}

/// Puts every row of `rows(i)`, `i < count`, into `table`; `progress` hears the rows
/// written so far about every 10,000.
pub async fn put_all(
    client: &Client,
    table: &str,
    count: usize,
    rows: impl Fn(usize) -> Item + Send + Sync + 'static,
    progress: impl Fn(usize) + Send + Sync + 'static,
) -> Loaded {
    let started = Instant::now();
    let rows = Arc::new(rows);
    let progress = Arc::new(progress);
    let batches = count.div_ceil(BATCH);
    let mut lanes = tokio::task::JoinSet::new();
    for lane in 0..IN_FLIGHT {
        let (client, table, rows, progress) = (
            client.clone(),
            table.to_owned(),
            rows.clone(),
            progress.clone(),
        );
        lanes.spawn(async move {
            for batch in (lane..batches).step_by(IN_FLIGHT) {
                let first = batch * BATCH;
                let writes = (first..count.min(first + BATCH))
                    .map(|i| put(rows(i)))
                    .collect();
                write_batch(&client, &table, writes).await;
                if batch % (10_000 / BATCH) == 0 {
                    progress(first);
                }
            }
        });
    }
    while let Some(done) = lanes.join_next().await {
        done.expect("a load lane");
    }
    Loaded {
        rows: count,
        requests: batches,
        elapsed: started.elapsed(),
    }
}

fn put(item: Item) -> WriteRequest {
    WriteRequest::builder()
        .put_request(
            PutRequest::builder()
                .set_item(Some(item))
                .build()
                .expect("a put request"),
        )
        .build()
}

async fn write_batch(client: &Client, table: &str, mut writes: Vec<WriteRequest>) {
    for attempt in 1..=ATTEMPTS {
        let output = client
            .batch_write_item()
            .request_items(table, writes)
            .send()
            .await
            .unwrap_or_else(|err| {
                panic!(
                    "BatchWriteItem on {table}: {}",
                    aws_sdk_dynamodb::error::DisplayErrorContext(err)
                )
            });
        writes = output
            .unprocessed_items
            .and_then(|mut left| left.remove(table))
            .unwrap_or_default();
        if writes.is_empty() {
            return;
        }
        tokio::time::sleep(likes_core::backoff::delay(attempt)).await;
    }
    panic!(
        "BatchWriteItem on {table}: {} items still unprocessed",
        writes.len()
    );
}
