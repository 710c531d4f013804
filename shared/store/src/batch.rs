//! BatchWriteItem with what DynamoDB leaves unprocessed (throttling) asked for again, within
//! the bounded backoff.

use aws_sdk_dynamodb::types::{DeleteRequest, PutRequest, WriteRequest};
use aws_sdk_dynamodb::Client;

use crate::rows::Item;
use crate::StoreError;

/// BatchWriteItem takes at most 25 items.
const BATCH_WRITE_ITEMS: usize = 25;
/// What a batch call left unprocessed is asked for again, up to this many times in all.
pub(crate) const BATCH_ATTEMPTS: u32 = 5;

pub(crate) fn put(item: Item) -> Result<WriteRequest, StoreError> {
    PutRequest::builder()
        .set_item(Some(item))
        .build()
        .map(|put| WriteRequest::builder().put_request(put).build())
        .map_err(|err| StoreError::Request(err.to_string()))
}

pub(crate) fn delete(key: Item) -> Result<WriteRequest, StoreError> {
    DeleteRequest::builder()
        .set_key(Some(key))
        .build()
        .map(|delete| WriteRequest::builder().delete_request(delete).build())
        .map_err(|err| StoreError::Request(err.to_string()))
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
                return Err(StoreError::Throttled {
                    operation: "BatchWriteItem",
                });
            }
            tokio::time::sleep(likes_core::backoff::delay(attempt)).await;
        }
    }
    Ok(())
}
