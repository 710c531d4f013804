//! A mapping's thread: lists the stream's shards and, for each one whose parent is done,
//! starts its reader and its virtual shards.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use aws_config::SdkConfig;
use tokio::sync::mpsc;

use super::invoke::StreamFunction;
use super::reader::{virtual_shard_id, StreamReader};
use super::shard::{ShardPlace, VirtualShard};
use super::stream::StreamClient;
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
    let streams = Arc::new(StreamClient::new(&shared.config.source, &sdk));
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let mut started = BTreeSet::new();
    loop {
        match streams.list_shards(&shared.config.stream_arn).await {
            Ok(shards) => {
                let listed: BTreeSet<&String> = shards.iter().map(|(id, _)| id).collect();
                for (shard, parent) in &shards {
                    // Known from now on, so `settle` waits for a child not started yet.
                    shared.stream_progress(shard, |_| {});
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
    streams: &Arc<StreamClient>,
    sqs: &aws_sdk_sqs::Client,
) {
    let mut outlets = Vec::with_capacity(shared.virtual_shards);
    for n in 0..shared.virtual_shards {
        let (outlet, inbox) = mpsc::unbounded_channel();
        outlets.push(outlet);
        let place = ShardPlace {
            index: n,
            id: virtual_shard_id(&shared.config.source, shard, n),
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
            #[cfg(any(test, feature = "faults"))]
            function.instance(shared, sdk),
            sqs.clone(),
            inbox,
        );
        tokio::task::spawn_local(virtual_shard.run());
    }
    let reader = StreamReader::new(shared.clone(), shard.to_owned(), streams.clone(), outlets);
    tokio::task::spawn_local(reader.run());
}
