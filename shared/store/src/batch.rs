//! BatchWriteItem and BatchGetItem with what DynamoDB leaves unprocessed (throttling) asked
//! for again, within the bounded backoff.

use aws_sdk_dynamodb::types::builders::KeysAndAttributesBuilder;
use aws_sdk_dynamodb::types::{DeleteRequest, KeysAndAttributes, PutRequest, WriteRequest};
use aws_sdk_dynamodb::Client;

use crate::rows::Item;
use likes_aws::{AwsError, Unprocessed};

use crate::StoreError;

/// BatchWriteItem takes at most 25 items.
const BATCH_WRITE_ITEMS: usize = 25;
/// BatchGetItem takes at most 100 keys.
const BATCH_GET_KEYS: usize = 100;
/// What a batch call left unprocessed is asked for again, up to this many times in all.
pub(crate) const BATCH_ATTEMPTS: u32 = 5;

pub(crate) fn put(item: Item) -> Result<WriteRequest, StoreError> {
    PutRequest::builder()
        .set_item(Some(item))
        .build()
        .map(|put| WriteRequest::builder().put_request(put).build())
        .map_err(StoreError::Request)
}

pub(crate) fn delete(key: Item) -> Result<WriteRequest, StoreError> {
    DeleteRequest::builder()
        .set_key(Some(key))
        .build()
        .map(|delete| WriteRequest::builder().delete_request(delete).build())
        .map_err(StoreError::Request)
}

/// Sends `requests` to `table`, 25 a call; `Throttled` when some are still unprocessed after
/// [`BATCH_ATTEMPTS`].
pub(crate) async fn write_all(
    client: &Client,
    table: &str,
    requests: Vec<WriteRequest>,
) -> Result<(), StoreError> {
    for page in requests.chunks(BATCH_WRITE_ITEMS) {
        let mut pending = page.to_vec();
        for attempt in 1..=BATCH_ATTEMPTS {
            let output = client
                .batch_write_item()
                .request_items(table, pending)
                .send()
                .await
                .map_err(|err| StoreError::aws("BatchWriteItem", err))?;
            pending = output
                .unprocessed_items
                .and_then(|mut left| left.remove(table))
                .unwrap_or_default();
            if pending.is_empty() {
                break;
            }
            if attempt == BATCH_ATTEMPTS {
                let left = Unprocessed {
                    left: pending.len(),
                    total: page.len(),
                    attempts: BATCH_ATTEMPTS,
                };
                return Err(AwsError::unprocessed("BatchWriteItem", left).into());
            }
            tokio::time::sleep(likes_core::backoff::delay(attempt)).await;
        }
    }
    Ok(())
}

/// Reads the rows of `keys` from `table`, 100 keys a call, each call's request shaped by
/// `shape` (consistency, projection); rows that do not exist are absent, and a key given
/// twice is asked once (DynamoDB refuses a request that holds one twice). `Throttled` when
/// some keys are still unprocessed after [`BATCH_ATTEMPTS`].
pub(crate) async fn get_all(
    client: &Client,
    table: &str,
    mut keys: Vec<Item>,
    shape: impl Fn(KeysAndAttributesBuilder) -> KeysAndAttributesBuilder,
) -> Result<Vec<Item>, StoreError> {
    let mut seen = Vec::with_capacity(keys.len());
    keys.retain(|key| {
        let new = !seen.contains(key);
        if new {
            seen.push(key.clone());
        }
        new
    });
    let mut rows = Vec::new();
    for page in keys.chunks(BATCH_GET_KEYS) {
        let mut pending = Some(
            shape(KeysAndAttributes::builder().set_keys(Some(page.to_vec())))
                .build()
                .map_err(StoreError::Request)?,
        );
        for attempt in 0..BATCH_ATTEMPTS {
            let Some(request) = pending.take() else {
                break;
            };
            if attempt > 0 {
                tokio::time::sleep(likes_core::backoff::delay(attempt)).await;
            }
            let output = client
                .batch_get_item()
                .request_items(table, request)
                .send()
                .await
                .map_err(|err| StoreError::aws("BatchGetItem", err))?;
            if let Some(mut responses) = output.responses {
                rows.extend(responses.remove(table).unwrap_or_default());
            }
            // What is left comes back with the request's own shape.
            pending = output
                .unprocessed_keys
                .and_then(|mut left| left.remove(table))
                .filter(|left| !left.keys().is_empty());
        }
        if let Some(left) = pending {
            let left = Unprocessed {
                left: left.keys().len(),
                total: page.len(),
                attempts: BATCH_ATTEMPTS,
            };
            return Err(AwsError::unprocessed("BatchGetItem", left).into());
        }
    }
    Ok(rows)
}
