//! Creates the template's resources in the emulator (or LocalStack), named
//! `<prefix>-<LogicalId>`, so several stacks (one per test) share one emulator.

use std::collections::BTreeMap;

use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, LocalSecondaryIndex,
    PointInTimeRecoverySpecification, Projection, ProjectionType, ScalarAttributeType,
    StreamSpecification, StreamViewType, TimeToLiveSpecification,
};
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

/// What was created: physical names and ARNs by logical id.
#[derive(Debug, Clone, Default)]
pub struct Resources {
    pub names: BTreeMap<String, String>,
    /// `<LogicalId>.<Attribute>` → value, for `!GetAtt` (`Arn`, `StreamArn`).
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

/// Creates every resource the local stack emulates, from the template.
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
    Ok(resources)
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
