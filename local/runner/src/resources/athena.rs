//! Athena work groups and the Glue databases Athena queries in. The emulator's Athena runs
//! queries for real (DuckDB over the S3 objects a table covers) and keeps its own catalog,
//! so a database is created there the way one can on AWS too: by Athena DDL, in a work group.

use std::time::Duration;

use super::{ResourceError, Resources};
use crate::template::Template;
use aws_config::SdkConfig;
use aws_sdk_athena::types::{
    QueryExecutionContext, QueryExecutionState, ResultConfiguration, WorkGroupConfiguration,
};

const DDL_POLL: Duration = Duration::from_millis(50);
const DDL_POLLS: usize = 200;

pub(super) async fn create(
    template: &Template,
    sdk: &SdkConfig,
    prefix: &str,
    resources: &mut Resources,
) -> Result<(), ResourceError> {
    let athena = aws_sdk_athena::Client::new(sdk);
    let mut workgroups = Vec::new();
    for (logical_id, resource) in template.resources_of("AWS::Athena::WorkGroup") {
        let name = format!("{prefix}-{logical_id}");
        let result = &resource["Properties"]["WorkGroupConfiguration"]["ResultConfiguration"];
        let output = resources
            .resolve(template, &result["OutputLocation"])
            .ok_or_else(|| template_error(&logical_id, "no OutputLocation resolves locally"))?;
        athena
            .create_work_group()
            .name(&name)
            .configuration(
                WorkGroupConfiguration::builder()
                    .enforce_work_group_configuration(true)
                    .result_configuration(
                        ResultConfiguration::builder()
                            .output_location(output)
                            .build(),
                    )
                    .build(),
            )
            .send()
            .await
            .map_err(|e| ResourceError::aws(&logical_id, e))?;
        resources.names.insert(logical_id, name.clone());
        workgroups.push(name);
    }
    for (logical_id, _) in template.resources_of("AWS::Glue::Database") {
        let Some(workgroup) = workgroups.first() else {
            return Err(template_error(
                &logical_id,
                "a Glue database is created locally by Athena DDL, so the template needs an \
                 AWS::Athena::WorkGroup",
            ));
        };
        // Glue keeps names lowercase, and Athena DDL takes [a-z0-9_].
        let name = format!("{prefix}_{logical_id}")
            .to_lowercase()
            .replace('-', "_");
        ddl(
            &athena,
            workgroup,
            &format!("CREATE DATABASE IF NOT EXISTS {name}"),
            &logical_id,
        )
        .await?;
        resources.names.insert(logical_id, name);
    }
    Ok(())
}

/// Runs one DDL statement and waits for it to succeed.
async fn ddl(
    athena: &aws_sdk_athena::Client,
    workgroup: &str,
    sql: &str,
    logical_id: &str,
) -> Result<(), ResourceError> {
    let id = athena
        .start_query_execution()
        .query_string(sql)
        .work_group(workgroup)
        .query_execution_context(QueryExecutionContext::builder().database("default").build())
        .send()
        .await
        .map_err(|e| ResourceError::aws(logical_id, e))?
        .query_execution_id
        .unwrap_or_default();
    for _ in 0..DDL_POLLS {
        let status = athena
            .get_query_execution()
            .query_execution_id(&id)
            .send()
            .await
            .map_err(|e| ResourceError::aws(logical_id, e))?
            .query_execution
            .and_then(|e| e.status);
        match status.as_ref().and_then(|s| s.state.as_ref()) {
            Some(QueryExecutionState::Succeeded) => return Ok(()),
            Some(QueryExecutionState::Failed) | Some(QueryExecutionState::Cancelled) => {
                let reason = status.and_then(|s| s.state_change_reason);
                return Err(template_error(
                    logical_id,
                    &format!("{sql}: {}", reason.unwrap_or_default()),
                ));
            }
            _ => tokio::time::sleep(DDL_POLL).await,
        }
    }
    Err(template_error(logical_id, &format!("{sql}: still running")))
}

fn template_error(logical_id: &str, message: &str) -> ResourceError {
    ResourceError::Template {
        resource: logical_id.to_owned(),
        message: message.to_owned(),
    }
}
