//! A mapping's thread: lists the stream's shards and, for each one whose parent is done,
//! starts its reader and its virtual shards.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::SdkConfig;
use aws_sdk_dynamodb::error::DisplayErrorContext;
use tokio::sync::mpsc;

use super::invoke::StreamFunction;
use super::reader::{virtual_shard_id, StreamReader};
use super::shard::{ShardPlace, VirtualShard};
use super::Shared;

/// How often the stream's shard list is read again (splits open child shards).
const SHARD_DISCOVERY_INTERVAL: Duration = Duration::from_secs(5);

/// The mapping's thread: a runtime of its own, like a function's own process, so the
/// function's clients and in-flight work belong to it alone; ends when the pipeline is
/// dropped.
pub fn run_mapping(shared: Arc<Shared>, function: StreamFunction, sdk: SdkConfig) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return shared.fail(format!("cannot build a runtime: {err}")),
    };
    let local = tokio::task::LocalSet::new();
    let stop = shared.stop.clone();
    local.block_on(&runtime, async {
        tokio::select! {
            () = stop.cancelled() => {}
            () = supervise(shared, function, sdk) => {}
        }
    });
}

async fn supervise(shared: Arc<Shared>, function: StreamFunction, sdk: SdkConfig) {
    // The reader handles a failed read itself (moto answers a stale iterator with a 500 the
    // SDK would retry in vain): re-acquiring the iterator is the only useful retry.
    let streams = aws_sdk_dynamodbstreams::Client::from_conf(
        aws_sdk_dynamodbstreams::config::Builder::from(&sdk)
            .retry_config(RetryConfig::disabled())
            .build(),
    );
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let mut started = BTreeSet::new();
    loop {
        match list_shards(&streams, &shared.config.stream_arn).await {
            Ok(shards) => {
                let listed: BTreeSet<&String> = shards.iter().map(|(id, _)| id).collect();
                for (shard, parent) in &shards {
                    // AWS starts a child shard once its parent is processed to its end.
                    let parent_done = parent
                        .as_ref()
                        .is_none_or(|p| !listed.contains(p) || shared.stream_shard_done(p));
                    if started.contains(shard) || !parent_done {
                        continue;
                    }
                    started.insert(shard.clone());
                    start_stream_shard(&shared, shard, &function, &sdk, &streams, &sqs);
                }
            }
            Err(err) => tracing::warn!(error = %err, "could not list the stream's shards"),
        }
        tokio::time::sleep(SHARD_DISCOVERY_INTERVAL).await;
    }
}

fn start_stream_shard(
    shared: &Arc<Shared>,
    shard: &str,
    function: &StreamFunction,
    sdk: &SdkConfig,
    streams: &aws_sdk_dynamodbstreams::Client,
    sqs: &aws_sdk_sqs::Client,
) {
    shared.stream_progress(shard, |_| {});
    let mut outlets = Vec::with_capacity(shared.virtual_shards);
    for n in 0..shared.virtual_shards {
        let (outlet, inbox) = mpsc::unbounded_channel();
        outlets.push(outlet);
        let place = ShardPlace {
            index: n,
            id: virtual_shard_id(shard, n),
            stream_shard: shard.to_owned(),
        };
        shared.shard_progress(&place.id, |p| {
            p.index = n;
            p.stream_shard = shard.to_owned();
        });
        let virtual_shard = VirtualShard::new(
            shared.clone(),
            place,
            function.instance(shared, sdk),
            sqs.clone(),
            inbox,
        );
        tokio::task::spawn_local(virtual_shard.run());
    }
    let reader = StreamReader::new(shared.clone(), shard.to_owned(), streams.clone(), outlets);
    tokio::task::spawn_local(reader.run());
}

/// Every shard of the stream with its parent.
async fn list_shards(
    client: &aws_sdk_dynamodbstreams::Client,
    stream_arn: &str,
) -> Result<Vec<(String, Option<String>)>, String> {
    let mut shards = Vec::new();
    let mut start = None;
    loop {
        let output = client
            .describe_stream()
            .stream_arn(stream_arn)
            .set_exclusive_start_shard_id(start.take())
            .send()
            .await
            .map_err(|e| DisplayErrorContext(e).to_string())?;
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
