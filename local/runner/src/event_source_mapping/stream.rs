//! The two stream APIs a mapping polls, behind the three calls Lambda's poller makes of
//! either: list the shards, get an iterator, get records.

use aws_config::retry::RetryConfig;
use aws_config::SdkConfig;
use likes_aws::AwsError;

use super::mapping::{StartingPosition, StreamSource};
use super::record::{shard_of_key, virtual_shard, BufferedRecord, RecordError};

/// One GetRecords: each record routed to its virtual shard (or why it could not be read),
/// in stream order, and the next iterator (`None`: the shard is closed and read to its end).
pub struct Page {
    pub records: Vec<Result<(usize, BufferedRecord), RecordError>>,
    pub next_iterator: Option<String>,
}

pub enum StreamClient {
    DynamoDb {
        client: aws_sdk_dynamodbstreams::Client,
        partition_key: String,
    },
    Kinesis(aws_sdk_kinesis::Client),
}

impl StreamClient {
    /// The reader handles a failed read itself (moto answers a stale iterator with a 500 the
    /// SDK would retry in vain): re-acquiring the iterator is the only useful retry.
    pub fn new(source: &StreamSource, sdk: &SdkConfig) -> Self {
        match source {
            StreamSource::DynamoDb { partition_key } => Self::DynamoDb {
                client: aws_sdk_dynamodbstreams::Client::from_conf(
                    aws_sdk_dynamodbstreams::config::Builder::from(sdk)
                        .retry_config(RetryConfig::disabled())
                        .build(),
                ),
                partition_key: partition_key.clone(),
            },
            StreamSource::Kinesis => Self::Kinesis(aws_sdk_kinesis::Client::from_conf(
                aws_sdk_kinesis::config::Builder::from(sdk)
                    .retry_config(RetryConfig::disabled())
                    .build(),
            )),
        }
    }

    /// Every shard of the stream with its parent.
    pub async fn list_shards(
        &self,
        stream_arn: &str,
    ) -> Result<Vec<(String, Option<String>)>, AwsError> {
        let mut shards = Vec::new();
        match self {
            Self::DynamoDb { client, .. } => {
                let mut start = None;
                loop {
                    let output = client
                        .describe_stream()
                        .stream_arn(stream_arn)
                        .set_exclusive_start_shard_id(start.take())
                        .send()
                        .await
                        .map_err(|e| AwsError::new("DescribeStream", e))?;
                    let Some(description) = output.stream_description else {
                        return Ok(shards);
                    };
                    for shard in description.shards.unwrap_or_default() {
                        if let Some(id) = shard.shard_id {
                            shards.push((id, shard.parent_shard_id));
                        }
                    }
                    match description.last_evaluated_shard_id {
                        Some(last) => start = Some(last),
                        None => return Ok(shards),
                    }
                }
            }
            Self::Kinesis(client) => {
                let mut token: Option<String> = None;
                loop {
                    // ListShards takes either the stream or a next token, never both.
                    let request = match token.take() {
                        Some(token) => client.list_shards().next_token(token),
                        None => client.list_shards().stream_arn(stream_arn),
                    };
                    let output = request
                        .send()
                        .await
                        .map_err(|e| AwsError::new("ListShards", e))?;
                    for shard in output.shards.unwrap_or_default() {
                        shards.push((shard.shard_id, shard.parent_shard_id));
                    }
                    match output.next_token {
                        Some(next) => token = Some(next),
                        None => return Ok(shards),
                    }
                }
            }
        }
    }

    /// An iterator after the last record read (`tail`), or at the mapping's starting position.
    pub async fn shard_iterator(
        &self,
        stream_arn: &str,
        shard_id: &str,
        tail: Option<&str>,
        starting_position: StartingPosition,
    ) -> Result<String, AwsError> {
        match self {
            Self::DynamoDb { client, .. } => {
                use aws_sdk_dynamodbstreams::types::ShardIteratorType as Type;
                let request = client
                    .get_shard_iterator()
                    .stream_arn(stream_arn)
                    .shard_id(shard_id);
                let request = match (tail, starting_position) {
                    (Some(tail), _) => request
                        .shard_iterator_type(Type::AfterSequenceNumber)
                        .sequence_number(tail),
                    (None, StartingPosition::TrimHorizon) => {
                        request.shard_iterator_type(Type::TrimHorizon)
                    }
                    (None, StartingPosition::Latest) => request.shard_iterator_type(Type::Latest),
                };
                request
                    .send()
                    .await
                    .map_err(|e| AwsError::new("GetShardIterator", e))?
                    .shard_iterator
            }
            Self::Kinesis(client) => {
                use aws_sdk_kinesis::types::ShardIteratorType as Type;
                // By name: moto builds the iterator from the stream name alone, and one from
                // an ARN does not read back.
                let name = stream_arn
                    .rsplit_once('/')
                    .map_or(stream_arn, |(_, name)| name);
                let request = client
                    .get_shard_iterator()
                    .stream_name(name)
                    .shard_id(shard_id);
                let request = match (tail, starting_position) {
                    (Some(tail), _) => request
                        .shard_iterator_type(Type::AfterSequenceNumber)
                        .starting_sequence_number(tail),
                    (None, StartingPosition::TrimHorizon) => {
                        request.shard_iterator_type(Type::TrimHorizon)
                    }
                    (None, StartingPosition::Latest) => request.shard_iterator_type(Type::Latest),
                };
                request
                    .send()
                    .await
                    .map_err(|e| AwsError::new("GetShardIterator", e))?
                    .shard_iterator
            }
        }
        .ok_or_else(|| AwsError::unusable("GetShardIterator", "no iterator"))
    }

    /// One GetRecords of at most `limit` records from `shard_id`, each routed to one of
    /// `virtual_shards`.
    pub async fn get_records(
        &self,
        iterator: String,
        limit: i32,
        shard_id: &str,
        stream_arn: &str,
        virtual_shards: usize,
    ) -> Result<Page, AwsError> {
        let arrived = std::time::Instant::now();
        match self {
            Self::DynamoDb {
                client,
                partition_key,
            } => {
                let output = client
                    .get_records()
                    .shard_iterator(iterator)
                    .limit(limit)
                    .send()
                    .await
                    .map_err(|e| AwsError::new("GetRecords", e))?;
                let records = output
                    .records
                    .unwrap_or_default()
                    .iter()
                    .map(|record| {
                        Ok((
                            virtual_shard(record, partition_key, virtual_shards)?,
                            BufferedRecord::read(record, stream_arn, arrived)?,
                        ))
                    })
                    .collect();
                Ok(Page {
                    records,
                    next_iterator: output.next_shard_iterator,
                })
            }
            Self::Kinesis(client) => {
                let output = client
                    .get_records()
                    .shard_iterator(iterator)
                    .limit(limit)
                    .send()
                    .await
                    .map_err(|e| AwsError::new("GetRecords", e))?;
                let records = output
                    .records
                    .iter()
                    .map(|record| {
                        Ok((
                            shard_of_key(
                                record.partition_key().unwrap_or_default().as_bytes(),
                                virtual_shards,
                            ),
                            BufferedRecord::read_kinesis(record, shard_id, stream_arn, arrived)?,
                        ))
                    })
                    .collect();
                Ok(Page {
                    records,
                    next_iterator: output.next_shard_iterator,
                })
            }
        }
    }
}
