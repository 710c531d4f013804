//! SQS queues from their template properties.

use aws_sdk_sqs::types::QueueAttributeName;
use serde_yaml::Value;

use super::{ResourceError, Resources};
use crate::template::{get_att, ref_target, Template};

pub(super) struct CreatedQueue {
    pub url: String,
    pub arn: String,
    pub name: String,
}

/// Creates an SQS queue. Its properties are queue attributes of the same names; objects
/// (`RedrivePolicy`, `RedriveAllowPolicy`) are passed as JSON, with intrinsics resolved.
pub(super) async fn create_queue(
    client: &aws_sdk_sqs::Client,
    template: &Template,
    resources: &Resources,
    logical_id: &str,
    name: &str,
    properties: &Value,
) -> Result<CreatedQueue, ResourceError> {
    let shape = |message: String| ResourceError::Template {
        resource: logical_id.to_owned(),
        message,
    };
    let fifo = properties["FifoQueue"].as_bool() == Some(true);
    let name = if fifo {
        format!("{name}.fifo")
    } else {
        name.to_owned()
    };
    let mut request = client.create_queue().queue_name(&name);
    for (key, value) in properties.as_mapping().into_iter().flatten() {
        let Some(key) = key.as_str() else { continue };
        if matches!(key, "QueueName" | "Tags") {
            continue;
        }
        let value = match value {
            Value::Mapping(_) | Value::Sequence(_) => resolved_json(template, resources, value)
                .ok_or_else(|| shape(format!("cannot resolve {key} locally")))?
                .to_string(),
            scalar => resources
                .resolve(template, scalar)
                .ok_or_else(|| shape(format!("cannot resolve {key} locally")))?,
        };
        request = request.attributes(QueueAttributeName::from(key), value);
    }
    let url = request
        .send()
        .await
        .map_err(|e| ResourceError::aws(logical_id, e))?
        .queue_url
        .ok_or_else(|| shape("CreateQueue returned no URL".into()))?;
    let arn = client
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| ResourceError::aws(logical_id, e))?
        .attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .ok_or_else(|| shape("GetQueueAttributes returned no QueueArn".into()))?;
    Ok(CreatedQueue { url, arn, name })
}

/// A template value as JSON, with every `!Ref` / `!GetAtt` inside resolved.
fn resolved_json(
    template: &Template,
    resources: &Resources,
    value: &Value,
) -> Option<serde_json::Value> {
    if ref_target(value).is_some() || get_att(value).is_some() {
        return resources
            .resolve(template, value)
            .map(serde_json::Value::String);
    }
    Some(match value {
        Value::Mapping(map) => serde_json::Value::Object(
            map.iter()
                .map(|(k, v)| {
                    Some((
                        k.as_str()?.to_owned(),
                        resolved_json(template, resources, v)?,
                    ))
                })
                .collect::<Option<_>>()?,
        ),
        Value::Sequence(items) => serde_json::Value::Array(
            items
                .iter()
                .map(|v| resolved_json(template, resources, v))
                .collect::<Option<_>>()?,
        ),
        Value::String(s) => serde_json::Value::String(s.clone()),
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Number(n) => serde_json::to_value(n).ok()?,
        _ => return None,
    })
}
