//! A table's exports, as DynamoDB serves them: its point-in-time recovery window, an export
//! asked for at a time, and what an export came to.

use aws_sdk_dynamodb::operation::export_table_to_point_in_time::ExportTableToPointInTimeError;
use aws_sdk_dynamodb::primitives::DateTime;
use aws_sdk_dynamodb::types::{ExportFormat, ExportStatus, PointInTimeRecoveryStatus};
use likes_aws::AwsError;
use likes_core::clock::now_ms;

/// How far behind now the end of a young table's recovery window is assumed to be, before
/// the window shows its own lag (AWS documents about 5 minutes).
const ASSUMED_PITR_LAG_MS: i64 = 5 * 60_000;

/// A table's point-in-time recovery window, and how far its end is behind now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryWindow {
    pub earliest_ms: i64,
    pub latest_ms: i64,
    pub lag_ms: i64,
}

/// What asking for an export came to.
#[derive(Debug)]
pub enum Asked {
    /// The export's ARN (a new export, or the one the same client token asked for before).
    Export(String),
    /// The time is outside the table's recovery window: it can never be exported.
    OutsideWindow(AwsError),
}

/// Where an export stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportState {
    InProgress,
    /// Complete: the S3 key of its `manifest-summary.json`.
    Completed {
        manifest: String,
    },
    /// DynamoDB gave up on it.
    Failed {
        status: String,
        message: String,
    },
}

/// The exports of the tables of one account and region into one bucket and prefix. Cheap to
/// clone.
#[derive(Debug, Clone)]
pub struct TableExports {
    client: aws_sdk_dynamodb::Client,
    bucket: String,
    prefix: String,
}

impl TableExports {
    pub fn new(
        client: aws_sdk_dynamodb::Client,
        bucket: impl Into<String>,
        prefix: impl Into<String>,
    ) -> Self {
        Self {
            client,
            bucket: bucket.into(),
            prefix: prefix.into(),
        }
    }

    /// A table's point-in-time recovery window, as DynamoDB states it.
    pub async fn recovery_window(&self, table_arn: &str) -> Result<RecoveryWindow, AwsError> {
        const OPERATION: &str = "DescribeContinuousBackups";
        let table = table_arn
            .rsplit_once(":table/")
            .map_or(table_arn, |(_, name)| name);
        let output = self
            .client
            .describe_continuous_backups()
            .table_name(table)
            .send()
            .await
            .map_err(|err| AwsError::new(OPERATION, err))?;
        let pitr = output
            .continuous_backups_description
            .and_then(|d| d.point_in_time_recovery_description)
            .filter(|p| p.point_in_time_recovery_status == Some(PointInTimeRecoveryStatus::Enabled))
            .ok_or_else(|| {
                AwsError::unusable(
                    OPERATION,
                    format!("point-in-time recovery is not enabled on {table}"),
                )
            })?;
        let millis = |t: Option<DateTime>| {
            t.and_then(|t| t.to_millis().ok()).ok_or_else(|| {
                AwsError::unusable(OPERATION, format!("no restorable window for {table}"))
            })
        };
        let now = now_ms();
        let (earliest, latest) = (
            millis(pitr.earliest_restorable_date_time)?,
            millis(pitr.latest_restorable_date_time)?,
        );
        Ok(RecoveryWindow {
            earliest_ms: earliest,
            latest_ms: latest,
            // A window that has not opened yet (a young table) does not show its lag.
            lag_ms: if latest > earliest {
                (now - latest).max(0)
            } else {
                (now - latest).max(ASSUMED_PITR_LAG_MS)
            },
        })
    }

    /// Asks for an export of the table at `at_ms`, in DynamoDB JSON. The same `token` within
    /// 8 hours gets the same export: an invocation that died after asking finds it again.
    pub async fn ask(&self, table_arn: &str, at_ms: i64, token: &str) -> Result<Asked, AwsError> {
        const OPERATION: &str = "ExportTableToPointInTime";
        let output = self
            .client
            .export_table_to_point_in_time()
            .table_arn(table_arn)
            .export_time(DateTime::from_millis(at_ms))
            .s3_bucket(&self.bucket)
            .s3_prefix(&self.prefix)
            .export_format(ExportFormat::DynamodbJson)
            .client_token(token)
            .send()
            .await;
        let output = match output {
            Ok(output) => output,
            Err(err)
                if matches!(
                    err.as_service_error(),
                    Some(ExportTableToPointInTimeError::InvalidExportTimeException(_))
                ) =>
            {
                return Ok(Asked::OutsideWindow(AwsError::new(OPERATION, err)));
            }
            Err(err) => return Err(AwsError::new(OPERATION, err)),
        };
        output
            .export_description
            .and_then(|d| d.export_arn)
            .map(Asked::Export)
            .ok_or_else(|| AwsError::unusable(OPERATION, "no export ARN in the answer"))
    }

    /// Where the export `arn` stands.
    pub async fn state(&self, arn: &str) -> Result<ExportState, AwsError> {
        const OPERATION: &str = "DescribeExport";
        let description = self
            .client
            .describe_export()
            .export_arn(arn)
            .send()
            .await
            .map_err(|err| AwsError::new(OPERATION, err))?
            .export_description
            .ok_or_else(|| AwsError::unusable(OPERATION, format!("no description of {arn}")))?;
        Ok(match description.export_status {
            Some(ExportStatus::Completed) => ExportState::Completed {
                manifest: description.export_manifest.ok_or_else(|| {
                    AwsError::unusable(OPERATION, format!("{arn} names no manifest"))
                })?,
            },
            Some(ExportStatus::InProgress) | None => ExportState::InProgress,
            Some(other) => ExportState::Failed {
                status: other.as_str().to_owned(),
                message: description.failure_message.unwrap_or_default(),
            },
        })
    }
}
