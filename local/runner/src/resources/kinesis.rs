//! Kinesis streams from their template properties.

use aws_sdk_kinesis::types::{StreamMode, StreamModeDetails, StreamStatus};
use serde::Deserialize;
use serde_yaml::Value;

use super::ResourceError;

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct StreamProperties {
    shard_count: Option<i32>,
    stream_mode_details: Option<StreamModeDef>,
    retention_period_hours: Option<i32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct StreamModeDef {
    stream_mode: String,
}

/// Kinesis's default when a stream names neither a mode nor a shard count.
const DEFAULT_STREAM_RETENTION_HOURS: i32 = 24;
/// How long a new stream may stay CREATING (instant in the emulator, seconds in LocalStack).
const STREAM_ACTIVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Creates a Kinesis stream and waits until it is ACTIVE; returns its ARN.
pub(super) async fn create_kinesis_stream(
    client: &aws_sdk_kinesis::Client,
    logical_id: &str,
    name: &str,
    properties: &Value,
) -> Result<String, ResourceError> {
    let shape = |message: String| ResourceError::Template {
        resource: logical_id.to_owned(),
        message,
    };
    let props: StreamProperties = if properties.is_null() {
        StreamProperties {
            shard_count: None,
            stream_mode_details: None,
            retention_period_hours: None,
        }
    } else {
        serde_yaml::from_value(properties.clone()).map_err(|e| shape(e.to_string()))?
    };
    let on_demand = props
        .stream_mode_details
        .as_ref()
        .is_some_and(|m| m.stream_mode == "ON_DEMAND");
    let mut request = client.create_stream().stream_name(name);
    if on_demand {
        request = request.stream_mode_details(
            StreamModeDetails::builder()
                .stream_mode(StreamMode::OnDemand)
                .build()
                .map_err(|e| shape(e.to_string()))?,
        );
    } else {
        // CloudFormation's default for a provisioned stream without ShardCount is one shard.
        request = request.shard_count(props.shard_count.unwrap_or(1));
    }
    request
        .send()
        .await
        .map_err(|e| ResourceError::aws(logical_id, e))?;
    let started = std::time::Instant::now();
    let arn = loop {
        let summary = client
            .describe_stream_summary()
            .stream_name(name)
            .send()
            .await
            .map_err(|e| ResourceError::aws(logical_id, e))?;
        let summary = summary
            .stream_description_summary
            .ok_or_else(|| shape("DescribeStreamSummary returned no summary".into()))?;
        if summary.stream_status == StreamStatus::Active {
            break summary.stream_arn;
        }
        if started.elapsed() > STREAM_ACTIVE_TIMEOUT {
            return Err(shape(format!(
                "stream {name} still {} after {STREAM_ACTIVE_TIMEOUT:?}",
                summary.stream_status
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    if let Some(hours) = props
        .retention_period_hours
        .filter(|h| *h > DEFAULT_STREAM_RETENTION_HOURS)
    {
        client
            .increase_stream_retention_period()
            .stream_name(name)
            .retention_period_hours(hours)
            .send()
            .await
            .map_err(|e| ResourceError::aws(logical_id, e))?;
    }
    // StreamEncryption (KMS) is not emulated: the emulator stores records as they come.
    Ok(arn)
}
