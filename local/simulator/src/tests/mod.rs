//! Each service answers the SDK's own clients as AWS would, where the embedded emulator or
//! a simple model could easily differ.

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, KeySchemaElement, KeyType, ReturnValue, ScalarAttributeType,
    StreamSpecification, StreamViewType,
};
use aws_sdk_dynamodb::types::{AttributeValue, BillingMode};
use aws_sdk_kinesis::primitives::Blob;

use crate::Simulator;

mod billing;

async fn sdk() -> SdkConfig {
    sdk_on(&Simulator::new().expect("opens")).await
}

/// A config whose clients `simulator` answers, retrying nothing.
async fn sdk_on(simulator: &Simulator) -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "test", "test", None, None, "tests",
        ))
        .http_client(simulator.http_client())
        .retry_config(aws_config::retry::RetryConfig::disabled())
        .load()
        .await
}

async fn table(dynamodb: &aws_sdk_dynamodb::Client) -> Option<String> {
    dynamodb
        .create_table()
        .table_name("table")
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("pk")
                .attribute_type(ScalarAttributeType::S)
                .build()
                .unwrap(),
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("pk")
                .key_type(KeyType::Hash)
                .build()
                .unwrap(),
        )
        .stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::NewAndOldImages)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("CreateTable")
        .table_description
        .and_then(|t| t.latest_stream_arn)
}

async fn add(dynamodb: &aws_sdk_dynamodb::Client, key: &str) -> Option<usize> {
    dynamodb
        .update_item()
        .table_name("table")
        .key("pk", AttributeValue::S(key.into()))
        .update_expression("ADD n :one")
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .return_values(ReturnValue::AllOld)
        .send()
        .await
        .expect("UpdateItem")
        .attributes
        .map(|old| old.len())
}

#[tokio::test]
async fn an_update_that_creates_its_item_answers_all_old_with_nothing() {
    let sdk = sdk().await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&sdk);
    table(&dynamodb).await;
    assert_eq!(add(&dynamodb, "a").await, None, "no item was there");
    assert_eq!(
        add(&dynamodb, "a").await,
        Some(2),
        "the key and n were there"
    );
}

#[tokio::test]
async fn a_table_stream_shard_stays_open_and_holds_every_write() {
    let sdk = sdk().await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&sdk);
    let stream = table(&dynamodb).await.expect("a stream");
    for key in ["a", "b", "a"] {
        add(&dynamodb, key).await;
    }
    let streams = aws_sdk_dynamodbstreams::Client::new(&sdk);
    let described = streams
        .describe_stream()
        .stream_arn(&stream)
        .send()
        .await
        .expect("DescribeStream");
    let shards = described.stream_description.unwrap().shards.unwrap();
    assert_eq!(shards.len(), 1);
    let range = shards[0].sequence_number_range.clone().unwrap();
    assert_eq!(
        range.ending_sequence_number, None,
        "an open shard has no end"
    );
    let iterator = streams
        .get_shard_iterator()
        .stream_arn(&stream)
        .shard_id(shards[0].shard_id.clone().unwrap())
        .shard_iterator_type(aws_sdk_dynamodbstreams::types::ShardIteratorType::TrimHorizon)
        .send()
        .await
        .expect("GetShardIterator")
        .shard_iterator
        .unwrap();
    let records = streams
        .get_records()
        .shard_iterator(iterator)
        .send()
        .await
        .expect("GetRecords")
        .records
        .unwrap();
    let events: Vec<_> = records
        .iter()
        .map(|r| r.event_name.clone().unwrap().as_str().to_owned())
        .collect();
    assert_eq!(
        events,
        ["INSERT", "INSERT", "MODIFY"],
        "one record per write"
    );
}

/// A stream `log` of `shards` shards.
async fn log_of(kinesis: &aws_sdk_kinesis::Client, shards: i32) {
    kinesis
        .create_stream()
        .stream_name("log")
        .shard_count(shards)
        .send()
        .await
        .expect("CreateStream");
}

/// Every shard of `log`, open or closed.
async fn shards_of(kinesis: &aws_sdk_kinesis::Client) -> Vec<aws_sdk_kinesis::types::Shard> {
    kinesis
        .list_shards()
        .stream_name("log")
        .send()
        .await
        .expect("ListShards")
        .shards
        .unwrap_or_default()
}

#[tokio::test]
async fn kinesis_records_go_to_the_shard_their_hash_key_falls_in() {
    let sdk = sdk().await;
    let kinesis = aws_sdk_kinesis::Client::new(&sdk);
    log_of(&kinesis, 4).await;
    let shards = shards_of(&kinesis).await;
    assert_eq!(shards.len(), 4);
    let range = |n: usize| {
        let r = shards[n].hash_key_range.as_ref().unwrap();
        (
            r.starting_hash_key.parse::<u128>().unwrap(),
            r.ending_hash_key.parse::<u128>().unwrap(),
        )
    };
    for key in ["alice", "bob", "carol", "dave", "erin"] {
        let put = kinesis
            .put_record()
            .stream_name("log")
            .partition_key(key)
            .data(Blob::new(key.as_bytes()))
            .send()
            .await
            .expect("PutRecord");
        let hash = u128::from_be_bytes(md5::compute(key).0);
        let shard = shards
            .iter()
            .position(|s| s.shard_id == put.shard_id)
            .unwrap();
        let (first, last) = range(shard);
        assert!(first <= hash && hash <= last, "{key} in {}", put.shard_id);
    }
    // An explicit hash key wins over the partition key's hash.
    let (first, _) = range(2);
    let put = kinesis
        .put_record()
        .stream_name("log")
        .partition_key("alice")
        .explicit_hash_key(first.to_string())
        .data(Blob::new("heartbeat"))
        .send()
        .await
        .expect("PutRecord");
    assert_eq!(put.shard_id, shards[2].shard_id);
    let iterator = kinesis
        .get_shard_iterator()
        .stream_name("log")
        .shard_id(put.shard_id)
        .shard_iterator_type(aws_sdk_kinesis::types::ShardIteratorType::AtSequenceNumber)
        .starting_sequence_number(&put.sequence_number)
        .send()
        .await
        .expect("GetShardIterator")
        .shard_iterator
        .unwrap();
    let records = kinesis
        .get_records()
        .shard_iterator(iterator)
        .send()
        .await
        .expect("GetRecords")
        .records;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].data.as_ref(), b"heartbeat");
}

#[tokio::test]
async fn a_split_shard_closes_and_its_children_take_its_halves() {
    let sdk = sdk().await;
    let kinesis = aws_sdk_kinesis::Client::new(&sdk);
    log_of(&kinesis, 1).await;
    let put = |hash: u128| {
        kinesis
            .put_record()
            .stream_name("log")
            .partition_key("k")
            .explicit_hash_key(hash.to_string())
            .data(Blob::new("record"))
            .send()
    };
    let before = put(0).await.expect("PutRecord");
    let middle = u128::MAX / 2 + 1;
    kinesis
        .split_shard()
        .stream_name("log")
        .shard_to_split(&before.shard_id)
        .new_starting_hash_key(middle.to_string())
        .send()
        .await
        .expect("SplitShard");
    let shards = shards_of(&kinesis).await;
    assert_eq!(shards.len(), 3);
    let ending = |n: usize| {
        shards[n]
            .sequence_number_range
            .as_ref()
            .and_then(|r| r.ending_sequence_number.clone())
    };
    assert_eq!(ending(0), Some(before.sequence_number.clone()), "closed");
    for child in &shards[1..] {
        assert_eq!(
            child.parent_shard_id.as_deref(),
            Some(before.shard_id.as_str())
        );
    }
    assert_eq!((ending(1), ending(2)), (None, None), "open");
    // Records after the split go to the child whose half holds their hash.
    assert_eq!(put(0).await.unwrap().shard_id, shards[1].shard_id);
    assert_eq!(put(middle).await.unwrap().shard_id, shards[2].shard_id);
    // The parent reads to its end, then hands over: no next iterator.
    let iterator = kinesis
        .get_shard_iterator()
        .stream_name("log")
        .shard_id(&before.shard_id)
        .shard_iterator_type(aws_sdk_kinesis::types::ShardIteratorType::TrimHorizon)
        .send()
        .await
        .expect("GetShardIterator")
        .shard_iterator
        .unwrap();
    let read = kinesis
        .get_records()
        .shard_iterator(iterator)
        .send()
        .await
        .expect("GetRecords");
    assert_eq!(read.records.len(), 1);
    assert_eq!(read.next_shard_iterator, None);
}

#[tokio::test]
async fn s3_objects_put_are_listed_by_prefix_and_read_back() {
    let sdk = sdk().await;
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(true)
            .build(),
    );
    s3.create_bucket()
        .bucket("b")
        .send()
        .await
        .expect("CreateBucket");
    for key in ["reports/1.json", "reports/2.json", "exports/x"] {
        s3.put_object()
            .bucket("b")
            .key(key)
            .body(aws_sdk_s3::primitives::ByteStream::from(
                key.as_bytes().to_vec(),
            ))
            .send()
            .await
            .expect("PutObject");
    }
    let listed: Vec<_> = s3
        .list_objects_v2()
        .bucket("b")
        .prefix("reports/")
        .send()
        .await
        .expect("ListObjectsV2")
        .contents
        .unwrap_or_default()
        .into_iter()
        .filter_map(|o| o.key)
        .collect();
    assert_eq!(listed, ["reports/1.json", "reports/2.json"]);
    let body = s3
        .get_object()
        .bucket("b")
        .key("exports/x")
        .send()
        .await
        .expect("GetObject")
        .body
        .collect()
        .await
        .unwrap()
        .into_bytes();
    assert_eq!(&body[..], b"exports/x");
    let missing = s3.get_object().bucket("b").key("nope").send().await;
    assert!(
        missing.unwrap_err().into_service_error().is_no_such_key(),
        "a missing key is NoSuchKey"
    );
}

#[tokio::test]
async fn sqs_messages_sent_are_received_until_deleted() {
    let sdk = sdk().await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let url = sqs
        .create_queue()
        .queue_name("dlq")
        .send()
        .await
        .expect("CreateQueue")
        .queue_url
        .unwrap();
    sqs.send_message()
        .queue_url(&url)
        .message_body("lost batch")
        .send()
        .await
        .expect("SendMessage");
    let received = receive(&sqs, &url).await;
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].body(), Some("lost batch"));
    sqs.delete_message()
        .queue_url(&url)
        .receipt_handle(received[0].receipt_handle().unwrap())
        .send()
        .await
        .expect("DeleteMessage");
    let after = receive(&sqs, &url).await;
    assert!(after.is_empty());
}

async fn receive(sqs: &aws_sdk_sqs::Client, url: &str) -> Vec<aws_sdk_sqs::types::Message> {
    sqs.receive_message()
        .queue_url(url)
        .send()
        .await
        .expect("ReceiveMessage")
        .messages
        .unwrap_or_default()
}
