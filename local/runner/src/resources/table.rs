//! DynamoDB tables from their template properties.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType,
    LocalSecondaryIndex, PointInTimeRecoverySpecification, Projection, ProjectionType,
    ScalarAttributeType, StreamSpecification, StreamViewType, TimeToLiveSpecification,
};
use serde::Deserialize;
use serde_yaml::Value;

use super::ResourceError;

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct TableProperties {
    key_schema: Vec<KeyElement>,
    attribute_definitions: Vec<AttributeDef>,
    #[serde(default)]
    local_secondary_indexes: Vec<IndexDef>,
    #[serde(default)]
    global_secondary_indexes: Vec<IndexDef>,
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

impl ProjectionDef {
    fn projection(&self) -> Projection {
        Projection::builder()
            .projection_type(ProjectionType::from(self.projection_type.as_str()))
            .set_non_key_attributes(
                (!self.non_key_attributes.is_empty()).then(|| self.non_key_attributes.clone()),
            )
            .build()
    }
}

pub(super) struct CreatedTable {
    pub arn: String,
    pub stream_arn: Option<String>,
}

pub(super) async fn create_table(
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
        request = request.local_secondary_indexes(
            LocalSecondaryIndex::builder()
                .index_name(&index.index_name)
                .set_key_schema(Some(key_schema(&index.key_schema).map_err(shape)?))
                .projection(index.projection.projection())
                .build()
                .map_err(|e| shape(e.to_string()))?,
        );
    }
    // On-demand tables: the indexes take no provisioned throughput either.
    for index in &props.global_secondary_indexes {
        request = request.global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(&index.index_name)
                .set_key_schema(Some(key_schema(&index.key_schema).map_err(shape)?))
                .projection(index.projection.projection())
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
