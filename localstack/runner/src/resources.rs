//! Creates the template's resources in the emulator (or LocalStack), named
//! `<prefix>-<LogicalId>`, so several stacks (one per test) share one emulator: DynamoDB
//! tables, Kinesis streams and SQS queues, each from its own properties in the template.

use std::collections::BTreeMap;

use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, LocalSecondaryIndex,
    PointInTimeRecoverySpecification, Projection, ProjectionType, ScalarAttributeType,
    StreamSpecification, StreamViewType, TimeToLiveSpecification,
};
use aws_sdk_kinesis::types::{StreamMode, StreamModeDetails, StreamStatus};
use aws_sdk_sqs::types::QueueAttributeName;
use serde::Deserialize;
use serde_yaml::Value;

use crate::template::{get_att, ref_target, Template};

#[derive(Debug, thiserror::Error)]
pub enum ResourceError {
    #[error("{resource}: {message}")]
    Template { resource: String, message: String },
    #[error("creating {resource}: {source}")]
    Aws {
        resource: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl ResourceError {
    fn aws(resource: &str, err: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Aws {
            resource: resource.to_owned(),
            source: format!("{}", aws_sdk_dynamodb::error::DisplayErrorContext(err)).into(),
        }
    }
}

/// What was created: `!Ref` values (table and stream names, queue URLs) and attributes by
/// logical id.
#[derive(Debug, Clone, Default)]
pub struct Resources {
    pub names: BTreeMap<String, String>,
    /// `<LogicalId>.<Attribute>` → value, for `!GetAtt` (`Arn`, `StreamArn`, `QueueName`…).
    pub attributes: BTreeMap<String, String>,
    /// Secret values by the secret's logical id (local development defaults).
    pub secrets: BTreeMap<String, String>,
}

impl Resources {
    pub fn name(&self, logical_id: &str) -> Option<&str> {
        self.names.get(logical_id).map(String::as_str)
    }

    pub fn attribute(&self, logical_id: &str, attribute: &str) -> Option<&str> {
        self.attributes
            .get(&format!("{logical_id}.{attribute}"))
            .map(String::as_str)
    }

    /// A function's environment as CloudFormation would resolve it against these resources,
    /// then `overrides` (set by the caller for every function that declares the variable).
    pub fn function_environment(
        &self,
        template: &Template,
        function: &str,
        overrides: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>, String> {
        template
            .environment(function)
            .into_iter()
            .map(|(name, value)| {
                let resolved = match overrides.get(&name) {
                    Some(value) => value.clone(),
                    None => self.resolve(template, &value).ok_or_else(|| {
                        format!("cannot resolve environment variable {name} locally")
                    })?,
                };
                Ok((name, resolved))
            })
            .collect()
    }

    /// Resolves an environment variable's template value as CloudFormation would here.
    pub fn resolve(&self, template: &Template, value: &Value) -> Option<String> {
        if let Some(target) = ref_target(value) {
            return self
                .name(target)
                .map(str::to_owned)
                .or_else(|| template.parameter_default(target));
        }
        if let Some((resource, attribute)) = get_att(value) {
            return self.attribute(&resource, &attribute).map(str::to_owned);
        }
        match value {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            // `!Sub '{{resolve:secretsmanager:${Secret}:SecretString}}'`: the local secret.
            Value::Tagged(tagged) if tagged.tag == "!Sub" => {
                let text = tagged.value.as_str()?;
                let start = text.find("{{resolve:secretsmanager:${")? + 27;
                let end = start + text[start..].find('}')?;
                self.secrets.get(&text[start..end]).cloned()
            }
            _ => None,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct TableProperties {
    key_schema: Vec<KeyElement>,
    attribute_definitions: Vec<AttributeDef>,
    #[serde(default)]
    local_secondary_indexes: Vec<IndexDef>,
    stream_specification: Option<StreamDef>,
    time_to_live_specification: Option<TtlDef>,
    point_in_time_recovery_specification: Option<PitrDef>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct KeyElement {
    attribute_name: String,
    key_type: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct AttributeDef {
    attribute_name: String,
    attribute_type: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct IndexDef {
    index_name: String,
    key_schema: Vec<KeyElement>,
    projection: ProjectionDef,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ProjectionDef {
    projection_type: String,
    #[serde(default)]
    non_key_attributes: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct StreamDef {
    stream_view_type: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct TtlDef {
    attribute_name: String,
    enabled: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct PitrDef {
    point_in_time_recovery_enabled: bool,
}

fn key_schema(elements: &[KeyElement]) -> Result<Vec<KeySchemaElement>, String> {
    elements
        .iter()
        .map(|e| {
            KeySchemaElement::builder()
                .attribute_name(&e.attribute_name)
                .key_type(KeyType::from(e.key_type.as_str()))
                .build()
                .map_err(|err| err.to_string())
        })
        .collect()
}

/// Creates every resource the local stack emulates, from the template: DynamoDB tables,
/// Kinesis streams, SQS queues. Everything else (functions and the HTTP API, which the stack
/// runs itself; roles, log groups, secrets, alarms) has no local counterpart: it is left
/// out, not faked.
pub async fn create(
    template: &Template,
    sdk: &SdkConfig,
    prefix: &str,
    secrets: BTreeMap<String, String>,
) -> Result<Resources, ResourceError> {
    let mut resources = Resources {
        secrets,
        ..Resources::default()
    };
    let dynamodb = aws_sdk_dynamodb::Client::new(sdk);
    for (logical_id, resource) in template.resources_of("AWS::DynamoDB::Table") {
        let name = format!("{prefix}-{logical_id}");
        let table = create_table(&dynamodb, &logical_id, &name, &resource["Properties"]).await?;
        resources
            .attributes
            .insert(format!("{logical_id}.Arn"), table.arn);
        if let Some(stream_arn) = table.stream_arn {
            resources
                .attributes
                .insert(format!("{logical_id}.StreamArn"), stream_arn);
        }
        resources.names.insert(logical_id, name);
    }
    let kinesis = aws_sdk_kinesis::Client::new(sdk);
    for (logical_id, resource) in template.resources_of("AWS::Kinesis::Stream") {
        let name = format!("{prefix}-{logical_id}");
        let arn =
            create_kinesis_stream(&kinesis, &logical_id, &name, &resource["Properties"]).await?;
        resources
            .attributes
            .insert(format!("{logical_id}.Arn"), arn);
        resources.names.insert(logical_id, name);
    }
    let sqs = aws_sdk_sqs::Client::new(sdk);
    // Queues another queue names (a redrive target) come first, so its ARN resolves.
    let mut queues: Vec<(String, &Value)> = template
        .resources_of("AWS::SQS::Queue")
        .into_iter()
        .collect();
    queues.sort_by_key(|(_, queue)| !queue["Properties"]["RedrivePolicy"].is_null());
    for (logical_id, resource) in queues {
        let queue = create_queue(
            &sqs,
            template,
            &resources,
            &logical_id,
            &format!("{prefix}-{logical_id}"),
            &resource["Properties"],
        )
        .await?;
        for (attribute, value) in [
            ("Arn", queue.arn),
            ("QueueName", queue.name),
            ("QueueUrl", queue.url.clone()),
        ] {
            resources
                .attributes
                .insert(format!("{logical_id}.{attribute}"), value);
        }
        // `!Ref` of a queue is its URL.
        resources.names.insert(logical_id, queue.url);
    }
    let s3 = crate::stack::s3_client(sdk);
    for logical_id in template.resources_of("AWS::S3::Bucket").into_keys() {
        // Bucket names are lowercase and global; the prefix keeps stacks apart.
        let name = format!("{prefix}-{logical_id}").to_lowercase();
        s3.create_bucket()
            .bucket(&name)
            .send()
            .await
            .map_err(|e| ResourceError::aws(&logical_id, e))?;
        resources
            .attributes
            .insert(format!("{logical_id}.Arn"), format!("arn:aws:s3:::{name}"));
        resources.names.insert(logical_id, name);
    }
    Ok(resources)
}

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
async fn create_kinesis_stream(
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

struct CreatedQueue {
    url: String,
    arn: String,
    name: String,
}

/// Creates an SQS queue. Its properties are queue attributes of the same names; objects
/// (`RedrivePolicy`, `RedriveAllowPolicy`) are passed as JSON, with intrinsics resolved.
async fn create_queue(
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

struct CreatedTable {
    arn: String,
    stream_arn: Option<String>,
}

async fn create_table(
    client: &aws_sdk_dynamodb::Client,
    logical_id: &str,
    name: &str,
    properties: &Value,
) -> Result<CreatedTable, ResourceError> {
    let shape = |message: String| ResourceError::Template {
        resource: logical_id.to_owned(),
        message,
    };
    let props: TableProperties =
        serde_yaml::from_value(properties.clone()).map_err(|e| shape(e.to_string()))?;
    let attributes = props
        .attribute_definitions
        .iter()
        .map(|a| {
            AttributeDefinition::builder()
                .attribute_name(&a.attribute_name)
                .attribute_type(ScalarAttributeType::from(a.attribute_type.as_str()))
                .build()
                .map_err(|e| shape(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut request = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .set_key_schema(Some(key_schema(&props.key_schema).map_err(shape)?))
        .set_attribute_definitions(Some(attributes));
    for index in &props.local_secondary_indexes {
        let projection = Projection::builder()
            .projection_type(ProjectionType::from(
                index.projection.projection_type.as_str(),
            ))
            .set_non_key_attributes(
                (!index.projection.non_key_attributes.is_empty())
                    .then(|| index.projection.non_key_attributes.clone()),
            )
            .build();
        request = request.local_secondary_indexes(
            LocalSecondaryIndex::builder()
                .index_name(&index.index_name)
                .set_key_schema(Some(key_schema(&index.key_schema).map_err(shape)?))
                .projection(projection)
                .build()
                .map_err(|e| shape(e.to_string()))?,
        );
    }
    if let Some(stream) = &props.stream_specification {
        request = request.stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::from(stream.stream_view_type.as_str()))
                .build()
                .map_err(|e| shape(e.to_string()))?,
        );
    }
    let created = request
        .send()
        .await
        .map_err(|e| ResourceError::aws(logical_id, e))?;
    let description = created
        .table_description
        .ok_or_else(|| ResourceError::Template {
            resource: logical_id.to_owned(),
            message: "CreateTable returned no table description".into(),
        })?;
    if let Some(ttl) = props.time_to_live_specification.filter(|t| t.enabled) {
        client
            .update_time_to_live()
            .table_name(name)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .attribute_name(ttl.attribute_name)
                    .enabled(true)
                    .build()
                    .map_err(|e| shape(e.to_string()))?,
            )
            .send()
            .await
            .map_err(|e| ResourceError::aws(logical_id, e))?;
    }
    if props
        .point_in_time_recovery_specification
        .is_some_and(|p| p.point_in_time_recovery_enabled)
    {
        client
            .update_continuous_backups()
            .table_name(name)
            .point_in_time_recovery_specification(
                PointInTimeRecoverySpecification::builder()
                    .point_in_time_recovery_enabled(true)
                    .build()
                    .map_err(|e| shape(e.to_string()))?,
            )
            .send()
            .await
            .map_err(|e| ResourceError::aws(logical_id, e))?;
    }
    Ok(CreatedTable {
        arn: description.table_arn.unwrap_or_default(),
        stream_arn: description.latest_stream_arn,
    })
}
