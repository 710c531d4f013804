//! Stream records as Lambda hands them to a function, and where each one is routed.

use std::time::Instant;

use aws_lambda_events::encodings::SecondTimestamp;
use aws_lambda_events::event::dynamodb::{
    Event, EventRecord, StreamRecord, StreamViewType, UserIdentity,
};
use aws_lambda_events::event::kinesis::{
    KinesisEncryptionType, KinesisEvent, KinesisEventRecord, KinesisRecord,
};
use aws_sdk_dynamodbstreams::types::{AttributeValue, Record};
use sha2::{Digest, Sha256};

use super::epoch_now;

/// A stream sequence number: decimal digits, compared as numbers (never as strings: they
/// differ in length).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequenceNumber(String);

impl SequenceNumber {
    pub fn new(raw: &str) -> Self {
        let trimmed = raw.trim_start_matches('0');
        Self(if trimmed.is_empty() { "0" } else { trimmed }.to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Ord for SequenceNumber {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.cmp(&other.0))
    }
}

impl PartialOrd for SequenceNumber {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A record in Lambda's event shape for its stream.
#[derive(Debug, Clone)]
pub enum LambdaRecord {
    DynamoDb(EventRecord),
    Kinesis(KinesisEventRecord),
}

impl LambdaRecord {
    /// The DynamoDB record (a time window event holds only those).
    pub fn dynamodb(&self) -> Option<&EventRecord> {
        match self {
            Self::DynamoDb(record) => Some(record),
            Self::Kinesis(_) => None,
        }
    }

    fn json_bytes(&self) -> serde_json::Result<usize> {
        match self {
            Self::DynamoDb(record) => serde_json::to_vec(record),
            Self::Kinesis(record) => serde_json::to_vec(record),
        }
        .map(|json| json.len())
    }
}

/// The plain invocation event for a batch: the Lambda DynamoDB event or the Kinesis event,
/// as the batch's records are (one mapping polls one kind of stream).
pub fn plain_event<'a>(
    batch: impl IntoIterator<Item = &'a LambdaRecord>,
) -> serde_json::Result<Vec<u8>> {
    let mut dynamodb = Event::default();
    let mut kinesis = KinesisEvent::default();
    for record in batch {
        match record {
            LambdaRecord::DynamoDb(record) => dynamodb.records.push(record.clone()),
            LambdaRecord::Kinesis(record) => kinesis.records.push(record.clone()),
        }
    }
    if kinesis.records.is_empty() {
        serde_json::to_vec(&dynamodb)
    } else {
        serde_json::to_vec(&kinesis)
    }
}

/// A stream record read and not yet acknowledged, already in Lambda's event shape.
#[derive(Debug, Clone)]
pub struct BufferedRecord {
    pub sequence_number: SequenceNumber,
    /// As the stream spells it, for `batchItemFailures` and the DLQ message.
    pub raw_sequence_number: String,
    pub lambda: LambdaRecord,
    pub json_bytes: usize,
    pub created_at_secs: f64,
    pub arrived: Instant,
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("a stream record has no {0}")]
    Missing(&'static str),
    #[error("the record's key has no {0} attribute")]
    NoPartitionKey(String),
    #[error("the record does not serialize: {0}")]
    Json(#[from] serde_json::Error),
}

impl BufferedRecord {
    /// A stream record as Lambda hands it to the function: `eventSourceARN` added,
    /// `ApproximateCreationDateTime` in epoch seconds, and no shard id anywhere.
    pub fn read(record: &Record, stream_arn: &str, arrived: Instant) -> Result<Self, RecordError> {
        let stream = record
            .dynamodb
            .as_ref()
            .ok_or(RecordError::Missing("dynamodb member"))?;
        let raw = stream
            .sequence_number
            .clone()
            .ok_or(RecordError::Missing("SequenceNumber"))?;
        let created_at_secs = stream
            .approximate_creation_date_time
            .map(|t| t.as_secs_f64())
            .unwrap_or_else(epoch_now);
        let mut change = StreamRecord::default();
        change.approximate_creation_date_time =
            chrono::DateTime::from_timestamp_micros((created_at_secs * 1_000_000.0) as i64)
                .unwrap_or_default();
        change.keys = stream.keys.clone().unwrap_or_default().into();
        change.new_image = stream.new_image.clone().unwrap_or_default().into();
        change.old_image = stream.old_image.clone().unwrap_or_default().into();
        change.sequence_number = Some(raw.clone());
        change.size_bytes = stream.size_bytes.unwrap_or_default();
        change.stream_view_type = stream
            .stream_view_type
            .as_ref()
            .and_then(|t| serde_json::from_value::<StreamViewType>(t.as_str().into()).ok());
        let mut lambda = EventRecord::default();
        lambda.event_id = record
            .event_id
            .clone()
            .ok_or(RecordError::Missing("eventID"))?;
        lambda.event_name = record
            .event_name
            .as_ref()
            .map(|n| n.as_str().to_owned())
            .ok_or(RecordError::Missing("eventName"))?;
        lambda.event_version = Some("1.1".into());
        lambda.event_source = Some("aws:dynamodb".into());
        lambda.aws_region = record
            .aws_region
            .clone()
            .unwrap_or_else(|| stream_arn.split(':').nth(3).unwrap_or_default().to_owned());
        lambda.event_source_arn = Some(stream_arn.to_owned());
        // TTL deletions: {"type": "Service", "principalId": "dynamodb.amazonaws.com"}.
        lambda.user_identity = record.user_identity.as_ref().map(|identity| {
            let mut user = UserIdentity::default();
            user.type_ = identity.r#type.clone().unwrap_or_default();
            user.principal_id = identity.principal_id.clone().unwrap_or_default();
            user
        });
        lambda.change = change;
        Self::new(
            raw,
            LambdaRecord::DynamoDb(lambda),
            created_at_secs,
            arrived,
        )
    }

    /// A Kinesis record as Lambda hands it to the function: data base64 in JSON,
    /// `approximateArrivalTimestamp` in epoch seconds, `eventID` `<shard id>:<sequence number>`.
    pub fn read_kinesis(
        record: &aws_sdk_kinesis::types::Record,
        shard_id: &str,
        stream_arn: &str,
        arrived: Instant,
    ) -> Result<Self, RecordError> {
        let raw = record.sequence_number().to_owned();
        let created_at_secs = record
            .approximate_arrival_timestamp()
            .map(|t| t.as_secs_f64())
            .unwrap_or_else(epoch_now);
        let mut kinesis = KinesisRecord::default();
        kinesis.approximate_arrival_timestamp = SecondTimestamp(
            chrono::DateTime::from_timestamp_micros((created_at_secs * 1_000_000.0) as i64)
                .unwrap_or_default(),
        );
        kinesis.data.extend_from_slice(record.data().as_ref());
        kinesis.encryption_type = match record.encryption_type() {
            Some(aws_sdk_kinesis::types::EncryptionType::Kms) => KinesisEncryptionType::Kms,
            _ => KinesisEncryptionType::None,
        };
        kinesis.partition_key = record.partition_key().unwrap_or_default().to_owned();
        kinesis.sequence_number = raw.clone();
        kinesis.kinesis_schema_version = Some("1.0".into());
        let mut lambda = KinesisEventRecord::default();
        lambda.aws_region = stream_arn.split(':').nth(3).map(str::to_owned);
        lambda.event_id = Some(format!("{shard_id}:{raw}"));
        lambda.event_name = Some("aws:kinesis:record".into());
        lambda.event_source = Some("aws:kinesis".into());
        lambda.event_source_arn = Some(stream_arn.to_owned());
        lambda.event_version = Some("1.0".into());
        lambda.kinesis = kinesis;
        Self::new(raw, LambdaRecord::Kinesis(lambda), created_at_secs, arrived)
    }

    fn new(
        raw: String,
        lambda: LambdaRecord,
        created_at_secs: f64,
        arrived: Instant,
    ) -> Result<Self, RecordError> {
        Ok(Self {
            sequence_number: SequenceNumber::new(&raw),
            raw_sequence_number: raw,
            json_bytes: lambda.json_bytes()?,
            lambda,
            created_at_secs,
            arrived,
        })
    }
}

/// The virtual shard (of `shards`) a record belongs to: a stable hash of its partition key
/// value, so every record of one key lands on one shard, in stream order, as DynamoDB
/// places an item's changes on one shard.
pub fn virtual_shard(
    record: &Record,
    partition_key: &str,
    shards: usize,
) -> Result<usize, RecordError> {
    let value = record
        .dynamodb
        .as_ref()
        .and_then(|stream| stream.keys.as_ref())
        .and_then(|keys| keys.get(partition_key))
        .ok_or_else(|| RecordError::NoPartitionKey(partition_key.to_owned()))?;
    let bytes: &[u8] = match value {
        AttributeValue::S(s) => s.as_bytes(),
        AttributeValue::N(n) => n.as_bytes(),
        AttributeValue::B(b) => b.as_ref(),
        _ => return Err(RecordError::NoPartitionKey(partition_key.to_owned())),
    };
    Ok(shard_of_key(bytes, shards))
}

/// The virtual shard of a partition key value (its string form, or its bytes).
pub fn shard_of_key(key: &[u8], shards: usize) -> usize {
    let digest = Sha256::digest(key);
    let head = u64::from_be_bytes(digest[..8].try_into().expect("a SHA-256 has 32 bytes"));
    (head % shards.max(1) as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lambda_events::event::dynamodb::Event;
    use aws_sdk_dynamodbstreams::types::{OperationType, StreamRecord as SdkStreamRecord};
    use aws_smithy_types::DateTime;

    #[test]
    fn sequence_numbers_compare_as_numbers() {
        let small = SequenceNumber::new("999");
        let large = SequenceNumber::new("1000");
        assert!(small < large, "as strings \"999\" > \"1000\"");
        assert_eq!(SequenceNumber::new("007"), SequenceNumber::new("7"));
        assert!(
            SequenceNumber::new("1100000000017454423010")
                > SequenceNumber::new("1100000000017454423009")
        );
    }

    fn record(user: &str) -> Record {
        Record::builder()
            .event_id("3c2b4ad1c4d52a4f3c8e5f6a7b8c9d0e")
            .event_name(OperationType::Insert)
            .aws_region("us-east-1")
            .dynamodb(
                SdkStreamRecord::builder()
                    .approximate_creation_date_time(DateTime::from_secs_f64(1_700_000_000.25))
                    .keys("user_id", AttributeValue::S(user.into()))
                    .new_image("state", AttributeValue::S("LIKE".into()))
                    .new_image("op_id", AttributeValue::N("1".into()))
                    .sequence_number("1100000000017454423009")
                    .size_bytes(42)
                    .stream_view_type(
                        aws_sdk_dynamodbstreams::types::StreamViewType::NewAndOldImages,
                    )
                    .build(),
            )
            .build()
    }

    #[test]
    fn lambda_records_carry_no_shard_id_and_epoch_seconds() {
        let arn = "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/2024";
        let read = BufferedRecord::read(&record("u1"), arn, Instant::now()).unwrap();
        assert_eq!(read.raw_sequence_number, "1100000000017454423009");
        assert_eq!(read.created_at_secs, 1_700_000_000.25);
        let lambda = serde_json::to_value(read.lambda.dynamodb().unwrap()).unwrap();
        assert_eq!(lambda["eventVersion"], "1.1");
        assert_eq!(lambda["eventSourceARN"], arn);
        // Whole epoch seconds, as Lambda writes them.
        assert_eq!(
            lambda["dynamodb"]["ApproximateCreationDateTime"],
            1_700_000_000
        );
        assert_eq!(
            lambda["dynamodb"]["NewImage"]["op_id"],
            serde_json::json!({"N": "1"})
        );
        assert_eq!(lambda["dynamodb"]["StreamViewType"], "NEW_AND_OLD_IMAGES");
        assert!(!lambda.to_string().contains("shardId"));
        let event: Event =
            serde_json::from_value(serde_json::json!({ "Records": [lambda] })).unwrap();
        assert_eq!(
            event.records[0].event_id,
            "3c2b4ad1c4d52a4f3c8e5f6a7b8c9d0e"
        );
    }

    #[test]
    fn one_key_always_lands_on_one_shard_and_keys_spread() {
        let first = virtual_shard(&record("u1"), "user_id", 4).unwrap();
        assert_eq!(virtual_shard(&record("u1"), "user_id", 4).unwrap(), first);
        assert_eq!(first, shard_of_key(b"u1", 4));
        let used: std::collections::BTreeSet<usize> = (0..64)
            .map(|u| shard_of_key(format!("u{u}").as_bytes(), 4))
            .collect();
        assert_eq!(used.len(), 4, "64 keys reach every one of 4 shards");
        assert_eq!(shard_of_key(b"u1", 1), 0);
        assert!(virtual_shard(&record("u1"), "item_id", 4).is_err());
    }
}
