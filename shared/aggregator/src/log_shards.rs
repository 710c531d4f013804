//! The event log's shards, as Kinesis lists them: what the leaderboard's `as_of` needs to
//! leave out a shard a reshard closed.

use aws_sdk_kinesis::error::{DisplayErrorContext, SdkError};
use likes_core::leaderboard::LogShard;

/// A ListShards call that failed, with its whole chain of causes.
#[derive(Debug, thiserror::Error)]
#[error("ListShards failed: {}", DisplayErrorContext(&**.0))]
pub struct ListShardsError(#[source] Box<dyn std::error::Error + Send + Sync>);

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
    pub async fn list(&self) -> Result<Vec<LogShard>, ListShardsError> {
        let mut shards = Vec::new();
        let mut token: Option<String> = None;
        loop {
            // ListShards takes either the stream or a next token, never both.
            let request = match token.take() {
                Some(token) => self.client.list_shards().next_token(token),
                None => self.client.list_shards().stream_arn(&self.stream_arn),
            };
            let output = request.send().await.map_err(boxed)?;
            for shard in output.shards.unwrap_or_default() {
                shards.push(LogShard {
                    ending_sequence_number: shard
                        .sequence_number_range
                        .and_then(|range| range.ending_sequence_number),
                    parent_shard_id: shard.parent_shard_id,
                    shard_id: shard.shard_id,
                });
            }
            match output.next_token {
                Some(next) => token = Some(next),
                None => return Ok(shards),
            }
        }
    }
}

fn boxed<E, R>(err: SdkError<E, R>) -> ListShardsError
where
    E: std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    ListShardsError(Box::new(err))
}
