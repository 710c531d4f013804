//! The Reactions stream as the local pollers split it, in the answers a function reads: a
//! DynamoDB Streams client whose `DescribeStream` lists each real shard as the virtual
//! shards the mappings deliver from (`<id>-v<k>`, the parent of virtual shard k being the
//! parent's virtual shard k: the same keys go to the same k). A function that follows the
//! stream's shards (the pulse) sees the topology its events name, as it would on AWS.

use aws_sdk_dynamodbstreams::operation::describe_stream::DescribeStreamOutput;
use aws_sdk_dynamodbstreams::types::Shard;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::FinalizerInterceptorContextMut;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

use super::reader::split_shard_id;

/// A DynamoDB Streams client for a function: its `DescribeStream` answers list the virtual
/// shards, `split` per real shard.
pub fn streams_client(
    sdk: &aws_config::SdkConfig,
    split: usize,
) -> aws_sdk_dynamodbstreams::Client {
    aws_sdk_dynamodbstreams::Client::from_conf(
        aws_sdk_dynamodbstreams::config::Builder::from(sdk)
            .interceptor(VirtualShards { split })
            .build(),
    )
}

#[derive(Debug)]
struct VirtualShards {
    split: usize,
}

impl Intercept for VirtualShards {
    fn name(&self) -> &'static str {
        "LikesLocalVirtualShards"
    }

    fn modify_before_attempt_completion(
        &self,
        context: &mut FinalizerInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(Ok(output)) = context.output_or_error_mut() else {
            return Ok(());
        };
        let Some(output) = output.downcast_mut::<DescribeStreamOutput>() else {
            return Ok(());
        };
        if let Some(shards) = output
            .stream_description
            .as_mut()
            .and_then(|d| d.shards.as_mut())
        {
            *shards = shards
                .iter()
                .flat_map(|shard| split(shard, self.split))
                .collect();
        }
        Ok(())
    }
}

fn split(shard: &Shard, n: usize) -> Vec<Shard> {
    (0..n.max(1))
        .map(|k| {
            let mut virtual_shard = shard.clone();
            virtual_shard.shard_id = shard.shard_id.as_deref().map(|id| split_shard_id(id, k));
            virtual_shard.parent_shard_id = shard
                .parent_shard_id
                .as_deref()
                .map(|id| split_shard_id(id, k));
            virtual_shard
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_shard_keeps_its_lineage_per_virtual_shard() {
        let child = Shard::builder()
            .shard_id("s2")
            .parent_shard_id("s1")
            .build();
        let ids: Vec<(Option<String>, Option<String>)> = split(&child, 3)
            .into_iter()
            .map(|s| (s.shard_id, s.parent_shard_id))
            .collect();
        assert_eq!(
            ids,
            (0..3)
                .map(|k| (Some(format!("s2-v{k}")), Some(format!("s1-v{k}"))))
                .collect::<Vec<_>>()
        );
        let root = Shard::builder().shard_id("s1").build();
        assert_eq!(split(&root, 1)[0].parent_shard_id, None);
        assert_eq!(split(&root, 1)[0].shard_id.as_deref(), Some("s1-v0"));
    }
}
