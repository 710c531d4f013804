//! The Reactions table's stream, as DynamoDB Streams describes it: every shard, open or
//! closed, with its parent.

use likes_aws::AwsError;
use likes_core::pipeline::StreamShard;

/// The shards of one DynamoDB stream. Cheap to clone.
#[derive(Debug, Clone)]
pub struct StreamShards {
    client: aws_sdk_dynamodbstreams::Client,
    stream_arn: String,
}

impl StreamShards {
    pub fn new(client: aws_sdk_dynamodbstreams::Client, stream_arn: impl Into<String>) -> Self {
        Self {
            client,
            stream_arn: stream_arn.into(),
        }
    }

    /// Every shard of the stream (DescribeStream, paged). A shard is closed once its
    /// sequence number range has an end.
    pub async fn list(&self) -> Result<Vec<StreamShard>, AwsError> {
        let mut shards = Vec::new();
        let mut start = None;
        loop {
            let output = self
                .client
                .describe_stream()
                .stream_arn(&self.stream_arn)
                .set_exclusive_start_shard_id(start)
                .send()
                .await
                .map_err(|err| AwsError::new("DescribeStream", err))?;
            let Some(description) = output.stream_description else {
                return Ok(shards);
            };
            for shard in description.shards.unwrap_or_default() {
                let Some(id) = shard.shard_id else { continue };
                let closed = shard
                    .sequence_number_range
                    .is_some_and(|range| range.ending_sequence_number.is_some());
                shards.push(StreamShard {
                    shard_id: id,
                    parent_shard_id: shard.parent_shard_id,
                    closed,
                });
            }
            start = description.last_evaluated_shard_id;
            if start.is_none() {
                return Ok(shards);
            }
        }
    }
}
