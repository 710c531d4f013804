//! DynamoDB exports in S3 for the reconciliation tests: a bucket of one's own, exports written
//! by hand in DynamoDB's layout (to break them one way at a time), and rows as the export's
//! DynamoDB JSON shows them.

use std::io::Write;

use aws_sdk_s3::primitives::ByteStream;
use base64::Engine;
use flate2::write::GzEncoder;
use md5::{Digest, Md5};
use serde_json::{json, Value};

use crate::{unique_prefix, TestStack};

/// An S3 client for `sdk`: path-style, as the emulator needs.
pub fn s3_client(sdk: &aws_config::SdkConfig) -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::config::Builder::from(sdk)
        .force_path_style(true)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// A fresh bucket, uniquely named.
pub async fn create_bucket(s3: &aws_sdk_s3::Client) -> String {
    let bucket = format!("exports-{}", unique_prefix());
    s3.create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .expect("CreateBucket");
    bucket
}

impl TestStack {
    pub fn s3(&self) -> aws_sdk_s3::Client {
        s3_client(&self.stack.aws.sdk)
    }
}

/// A Reactions row as an export shows it, with the attributes the write path stores beside
/// the ones a recount reads.
pub fn reaction(user: &str, item: &str, state: &str) -> Value {
    let mut row = json!({
        "user_id": {"S": user},
        "item_id": {"S": item},
        "state": {"S": state},
        "op_id": {"N": "1"},
        "updated_at": {"N": "1732912345678"},
        "k#AAAAAAAAAAA": {"S": format!("{}|1732912345678", &state[..1])},
    });
    if state == "LIKE" {
        row["liked_at"] = json!({"N": "1732912345678"});
    }
    row
}

/// One of the pulse's probe rows.
pub fn probe(n: u32) -> Value {
    json!({
        "user_id": {"S": format!("#probe#{n}")},
        "item_id": {"S": "#probe"},
        "probed_at": {"N": "1732912345678"},
    })
}

/// gzipped DynamoDB JSON lines, as an export's data file holds them.
pub fn data_file(rows: &[Value]) -> Vec<u8> {
    let mut gzip = GzEncoder::new(Vec::new(), flate2::Compression::default());
    for row in rows {
        writeln!(gzip, "{}", json!({ "Item": row })).expect("gzip in memory");
    }
    gzip.finish().expect("gzip in memory")
}

/// Base64 of the MD5 of `bytes`, as the manifests write it.
pub fn md5_base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(Md5::digest(bytes))
}

/// A data file to write: its bytes and what its manifest line says about them.
pub struct FixtureFile {
    pub bytes: Vec<u8>,
    pub item_count: u64,
    pub md5_checksum: String,
}

impl FixtureFile {
    pub fn rows(rows: &[Value]) -> Self {
        let bytes = data_file(rows);
        Self {
            md5_checksum: md5_base64(&bytes),
            item_count: rows.len() as u64,
            bytes,
        }
    }
}

/// The keys of an export written by [`write_export`].
pub struct WrittenExport {
    /// `<prefix>/AWSDynamoDB/<ExportId>`.
    pub folder: String,
    pub summary_key: String,
    pub files_key: String,
    pub data_keys: Vec<String>,
}

/// Writes an export of `files` under `prefix` in DynamoDB's layout: `_started`, the data
/// files, `manifest-files.json` and `manifest-summary.json` with their `.md5` files.
pub async fn write_export(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
    files: &[FixtureFile],
) -> WrittenExport {
    let export_id = "01732912345678-a1b2c3d4";
    let folder = format!("{prefix}/AWSDynamoDB/{export_id}");
    put(s3, bucket, &format!("{folder}/_started"), Vec::new()).await;
    let mut data_keys = Vec::new();
    let mut lines = String::new();
    for (n, file) in files.iter().enumerate() {
        let key = format!("{folder}/data/fixture{n:02}.json.gz");
        let etag = put(s3, bucket, &key, file.bytes.clone()).await;
        let line = json!({
            "itemCount": file.item_count,
            "md5Checksum": file.md5_checksum,
            "etag": etag,
            "dataFileS3Key": key,
        });
        lines.push_str(&format!("{line}\n"));
        data_keys.push(key);
    }
    let files_key = format!("{folder}/manifest-files.json");
    put_with_md5(s3, bucket, &files_key, lines.into_bytes()).await;
    let summary = json!({
        "version": "2020-06-30",
        "exportArn": format!("arn:aws:dynamodb:us-east-1:123456789012:table/Reactions/export/{export_id}"),
        "startTime": "2024-11-29T20:32:25.678Z",
        "endTime": "2024-11-29T20:37:25.678Z",
        "tableArn": "arn:aws:dynamodb:us-east-1:123456789012:table/Reactions",
        "tableId": "12345a12-abcd-123a-ab12-1234abc12345",
        "exportTime": "2024-11-29T20:32:25.678Z",
        "s3Bucket": bucket,
        "s3Prefix": prefix,
        "s3SseAlgorithm": "AES256",
        "s3SseKmsKeyId": null,
        "manifestFilesS3Key": files_key,
        "billedSizeBytes": 0,
        "itemCount": files.iter().map(|f| f.item_count).sum::<u64>(),
        "outputFormat": "DYNAMODB_JSON",
    });
    let summary_key = format!("{folder}/manifest-summary.json");
    put_with_md5(s3, bucket, &summary_key, summary.to_string().into_bytes()).await;
    WrittenExport {
        folder,
        summary_key,
        files_key,
        data_keys,
    }
}

/// Writes an object; returns its ETag, unquoted.
pub async fn put(s3: &aws_sdk_s3::Client, bucket: &str, key: &str, bytes: Vec<u8>) -> String {
    let output = s3
        .put_object()
        .bucket(bucket)
        .key(key)
        .body(ByteStream::from(bytes))
        .send()
        .await
        .unwrap_or_else(|e| panic!("PutObject {key}: {e:?}"));
    output
        .e_tag()
        .unwrap_or_default()
        .trim_matches('"')
        .to_owned()
}

async fn put_with_md5(s3: &aws_sdk_s3::Client, bucket: &str, key: &str, bytes: Vec<u8>) {
    let md5_key = format!("{}.md5", key.trim_end_matches(".json"));
    put(s3, bucket, &md5_key, md5_base64(&bytes).into_bytes()).await;
    put(s3, bucket, key, bytes).await;
}

pub async fn delete(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) {
    s3.delete_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .unwrap_or_else(|e| panic!("DeleteObject {key}: {e:?}"));
}

/// An object's bytes.
pub async fn get(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Vec<u8> {
    s3.get_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GetObject {key}: {e:?}"))
        .body
        .collect()
        .await
        .expect("object body")
        .to_vec()
}

/// What [`TestStack::export_reactions`] saw.
pub struct FinishedExport {
    pub description: aws_sdk_dynamodb::types::ExportDescription,
    /// Every status DescribeExport reported, the first answer's included, repeats collapsed.
    pub statuses: Vec<aws_sdk_dynamodb::types::ExportStatus>,
}

impl TestStack {
    /// The Reactions table's ARN.
    pub async fn reactions_arn(&self) -> String {
        self.table_arn("ReactionsTable").await
    }

    /// The ARN of the template's table `logical_id`.
    pub async fn table_arn(&self, logical_id: &str) -> String {
        self.dynamodb()
            .describe_table()
            .table_name(self.name(logical_id))
            .send()
            .await
            .expect("DescribeTable")
            .table
            .and_then(|t| t.table_arn)
            .expect("a table ARN")
    }

    /// The Reactions table's latest restorable time (epoch millis), as DynamoDB states it.
    pub async fn latest_restorable_ms(&self) -> i64 {
        self.table_restorable_ms("ReactionsTable").await
    }

    /// The latest restorable time (epoch millis) of the template's table `logical_id`.
    async fn table_restorable_ms(&self, logical_id: &str) -> i64 {
        self.dynamodb()
            .describe_continuous_backups()
            .table_name(self.name(logical_id))
            .send()
            .await
            .expect("DescribeContinuousBackups")
            .continuous_backups_description
            .and_then(|d| d.point_in_time_recovery_description)
            .and_then(|p| p.latest_restorable_date_time)
            .and_then(|t| t.to_millis().ok())
            .expect("a latest restorable time")
    }

    /// Exports the Reactions table as of `at` (epoch millis) into `bucket` under `prefix`, as
    /// reconciliation does, once point-in-time recovery can serve `at` (its latest restorable
    /// time lags behind now), and waits until the export is no longer IN_PROGRESS (panics
    /// after 30 s).
    pub async fn export_reactions(&self, bucket: &str, prefix: &str, at_ms: i64) -> FinishedExport {
        self.export_table("ReactionsTable", bucket, prefix, at_ms)
            .await
    }

    /// As [`Self::export_reactions`], of the template's table `logical_id`.
    pub async fn export_table(
        &self,
        logical_id: &str,
        bucket: &str,
        prefix: &str,
        at_ms: i64,
    ) -> FinishedExport {
        use aws_sdk_dynamodb::primitives::DateTime;
        use aws_sdk_dynamodb::types::{ExportFormat, ExportStatus, ExportType};

        let restorable_by = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while self.table_restorable_ms(logical_id).await < at_ms {
            assert!(
                std::time::Instant::now() < restorable_by,
                "point-in-time recovery did not reach {at_ms} within 30 s"
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        let dynamodb = self.dynamodb();
        let started = dynamodb
            .export_table_to_point_in_time()
            .table_arn(self.table_arn(logical_id).await)
            .s3_bucket(bucket)
            .s3_prefix(prefix)
            .export_time(DateTime::from_millis(at_ms))
            .export_format(ExportFormat::DynamodbJson)
            .export_type(ExportType::FullExport)
            .send()
            .await
            .expect("ExportTableToPointInTime")
            .export_description
            .expect("an export description");
        let arn = started.export_arn.clone().expect("an export ARN");
        let mut statuses = vec![started.export_status.clone().expect("a status")];
        let description = crate::eventually(std::time::Duration::from_secs(30), async || {
            let description = dynamodb
                .describe_export()
                .export_arn(&arn)
                .send()
                .await
                .expect("DescribeExport")
                .export_description
                .expect("an export description");
            let status = description.export_status.clone().expect("a status");
            if statuses.last() != Some(&status) {
                statuses.push(status.clone());
            }
            if status != ExportStatus::InProgress {
                return Ok(description);
            }
            Err(format!("export {arn} still IN_PROGRESS"))
        })
        .await;
        FinishedExport {
            description,
            statuses,
        }
    }
}
