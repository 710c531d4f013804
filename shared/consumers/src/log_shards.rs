//! The event log's shards, as Kinesis lists them: what the leaderboard's `as_of` needs to
//! leave out a shard a reshard closed, and where a heartbeat for a quiet shard is put.

use aws_sdk_kinesis::primitives::Blob;
use likes_aws::AwsError;
use likes_core::leaderboard::LogShard;
use likes_core::pipeline::LogRecord;

/// The shards of one stream. Cheap to clone.
#[derive(Debug, Clone)]
pub struct LogShards {
    client: aws_sdk_kinesis::Client,
    stream_arn: String,
}

impl LogShards {
    pub fn new(client: aws_sdk_kinesis::Client, stream_arn: impl Into<String>) -> Self {
        Self {
            client,
            stream_arn: stream_arn.into(),
        }
    }

    /// Every shard the stream still lists (closed ones until their records expire), paged.
    pub async fn list(&self) -> Result<Vec<LogShard>, AwsError> {
        let mut shards = Vec::new();
        let mut token: Option<String> = None;
        loop {
            // ListShards takes either the stream or a next token, never both.
            let request = match token.take() {
                Some(token) => self.client.list_shards().next_token(token),
                None => self.client.list_shards().stream_arn(&self.stream_arn),
            };
            let output = request
                .send()
                .await
                .map_err(|err| AwsError::new("ListShards", err))?;
            for shard in output.shards.unwrap_or_default() {
                shards.push(LogShard {
                    ending_sequence_number: shard
                        .sequence_number_range
                        .and_then(|range| range.ending_sequence_number),
                    parent_shard_id: shard.parent_shard_id,
                    adjacent_parent_shard_id: shard.adjacent_parent_shard_id,
                    starting_hash_key: shard
                        .hash_key_range
                        .map(|range| range.starting_hash_key)
                        .unwrap_or_default(),
                    shard_id: shard.shard_id,
                });
            }
            match output.next_token {
                Some(next) => token = Some(next),
                None => return Ok(shards),
            }
        }
    }

    /// When the stream was created (epoch millis): no record on any of its shards arrived
    /// before, so a shard nobody has read yet starts no earlier.
    pub async fn created_ms(&self) -> Result<i64, AwsError> {
        let summary = self
            .client
            .describe_stream_summary()
            .stream_arn(&self.stream_arn)
            .send()
            .await
            .map_err(|err| AwsError::new("DescribeStreamSummary", err))?;
        // A summary without its time (never, on AWS) falls back to the epoch: still a time
        // before every record, only a useless one.
        Ok(summary.stream_description_summary.map_or(0, |stream| {
            stream.stream_creation_timestamp.to_millis().unwrap_or(0)
        }))
    }

    /// Puts a heartbeat at `at_ms` on `shard` (by its starting hash key).
    pub async fn put_heartbeat(&self, shard: &LogShard, at_ms: i64) -> Result<(), AwsError> {
        self.client
            .put_record()
            .stream_arn(&self.stream_arn)
            .partition_key("heartbeat")
            .explicit_hash_key(&shard.starting_hash_key)
            .data(Blob::new(LogRecord::heartbeat(at_ms)))
            .send()
            .await
            .map(drop)
            .map_err(|err| AwsError::new("PutRecord", err))
    }
}
