//! The on-failure destination: where a batch's metadata goes once Lambda gives up on it.

use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_smithy_types::date_time::Format;
use aws_smithy_types::DateTime;
use serde_json::{json, Value};

use super::epoch_now;
use super::mapping::{MappingConfig, StreamSource};
use super::record::BufferedRecord;

/// Attempts at sending a batch's metadata to the on-failure destination.
const DESTINATION_ATTEMPTS: u32 = 5;

/// Why Lambda stopped retrying a batch.
#[derive(Debug, Clone, Copy)]
pub enum GiveUp {
    RetryAttemptsExhausted(u32),
    RecordAgeExceeded,
}

/// The message Lambda sends for a stream batch it gave up on: the invocation's context and
/// the batch's place in the shard (`DDBStreamBatchInfo`, `KinesisBatchInfo`), never its
/// records.
pub fn batch_info(
    config: &MappingConfig,
    shard_id: &str,
    batch: &[BufferedRecord],
    why: GiveUp,
) -> Option<Value> {
    let (first, last) = (batch.first()?, batch.last()?);
    let (condition, invoke_count) = match why {
        GiveUp::RetryAttemptsExhausted(attempts) => ("RetryAttemptsExhausted", attempts),
        GiveUp::RecordAgeExceeded => ("RecordAgeExceeded", 0),
    };
    let info = match config.source {
        StreamSource::DynamoDb { .. } => "DDBStreamBatchInfo",
        StreamSource::Kinesis => "KinesisBatchInfo",
    };
    Some(json!({
        "requestContext": {
            "requestId": uuid::Uuid::new_v4().to_string(),
            "functionArn": config.function_arn,
            "condition": condition,
            "approximateInvokeCount": invoke_count,
        },
        "responseContext": {
            "statusCode": 200,
            "executedVersion": "$LATEST",
            "functionError": "Unhandled",
        },
        "version": "1.0",
        "timestamp": iso_time(epoch_now()),
        info: {
            "shardId": shard_id,
            "startSequenceNumber": first.raw_sequence_number,
            "endSequenceNumber": last.raw_sequence_number,
            "approximateArrivalOfFirstRecord": iso_time(first.created_at_secs),
            "approximateArrivalOfLastRecord": iso_time(last.created_at_secs),
            "batchSize": batch.len(),
            "streamArn": config.stream_arn,
        },
    }))
}

/// Sends the message to the mapping's queue, if it has one (AWS discards it otherwise).
pub async fn send(sqs: &aws_sdk_sqs::Client, config: &MappingConfig, message: &Value) {
    let Some(queue) = &config.on_failure else {
        return;
    };
    for attempt in 1..=DESTINATION_ATTEMPTS {
        match sqs
            .send_message()
            .queue_url(&queue.url)
            .message_body(message.to_string())
            .send()
            .await
        {
            Ok(_) => return,
            Err(err) => {
                tracing::warn!(attempt, error = %DisplayErrorContext(err), "could not send to the on-failure destination");
                tokio::time::sleep(likes_core::backoff::delay(attempt)).await;
            }
        }
    }
    tracing::error!(%message, "the on-failure destination refused the batch metadata");
}

fn iso_time(epoch_secs: f64) -> String {
    DateTime::from_secs_f64(epoch_secs)
        .fmt(Format::DateTime)
        .unwrap_or_default()
}
