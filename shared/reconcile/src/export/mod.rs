//! DynamoDB exports: asking for one and following it ([`TableExports`]), then reading it
//! from S3 ([`ExportReader`]): its manifests, then its data files one at a time.

mod data;
mod manifest;
mod row;
mod table;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::Client;
use likes_aws::AwsError;

use crate::ReconcileError;
use data::DataFileStream;
pub use manifest::{DataFile, ManifestSummary};
pub use row::{ExportedLikes, Recount, RowKey, UnknownStateRow, FOREIGN_REPORTED};
pub use table::{Asked, ExportState, RecoveryWindow, TableExports};

/// An export whose manifests have been read and checked; its data files are not read yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    pub bucket: String,
    /// The key of its `manifest-summary.json`.
    pub summary_key: String,
    pub summary: ManifestSummary,
    /// Its data files, in the order `manifest-files.json` lists them.
    pub files: Vec<DataFile>,
}

/// How far a [`ExportReader::recount`] got: reported after each data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadProgress {
    pub files_done: usize,
    pub files_total: usize,
    pub rows_read: u64,
}

/// Reads DynamoDB exports from S3. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ExportReader {
    s3: Client,
}

impl ExportReader {
    pub fn new(s3: Client) -> Self {
        Self { s3 }
    }

    /// Reads and checks an export's manifests. `location` is the key of its
    /// `manifest-summary.json` (DescribeExport's `ExportManifest`) or its folder,
    /// `<prefix>/AWSDynamoDB/<ExportId>`.
    pub async fn open(&self, bucket: &str, location: &str) -> Result<Export, ReconcileError> {
        let summary_key = manifest::summary_key(location);
        let summary_bytes = self.manifest(bucket, &summary_key).await?;
        let summary = manifest::parse_summary(&summary_key, &summary_bytes)?;
        let files_key = &summary.manifest_files_s3_key;
        let files_bytes = self.manifest(bucket, files_key).await?;
        let files = manifest::parse_files(files_key, &files_bytes, &summary)?;
        Ok(Export {
            bucket: bucket.to_owned(),
            summary_key,
            summary,
            files,
        })
    }

    /// Recounts the export's rows per item, one data file at a time, calling `progress` after
    /// each. Fails on the first object that is missing or does not verify.
    pub async fn recount(
        &self,
        export: &Export,
        progress: impl FnMut(ReadProgress),
    ) -> Result<Recount, ReconcileError> {
        self.read_into(export, Recount::default(), progress).await
    }

    /// [`Self::recount`], keeping every like as well ([`Recount::likes`]).
    pub async fn recount_with_likes(
        &self,
        export: &Export,
        progress: impl FnMut(ReadProgress),
    ) -> Result<Recount, ReconcileError> {
        self.read_into(export, Recount::with_likes(), progress)
            .await
    }

    async fn read_into(
        &self,
        export: &Export,
        mut recount: Recount,
        mut progress: impl FnMut(ReadProgress),
    ) -> Result<Recount, ReconcileError> {
        for (done, file) in export.files.iter().enumerate() {
            let key = &file.data_file_s3_key;
            let mut body = self.get(&export.bucket, key).await?;
            let mut stream = DataFileStream::new(file, &mut recount);
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(|e| {
                    s3_error(&export.bucket, key, AwsError::broken_body("GetObject", e))
                })?;
                stream.feed(&chunk)?;
            }
            stream.finish()?;
            progress(ReadProgress {
                files_done: done + 1,
                files_total: export.files.len(),
                rows_read: recount.rows_read,
            });
        }
        Ok(recount)
    }

    /// A manifest's bytes (small: one line per data file at most), checked against its checksum
    /// file when there is one. Checksum files are optional: DynamoDB's names for them differ
    /// between its guide and its exports, and they are safe to delete.
    async fn manifest(&self, bucket: &str, key: &str) -> Result<Vec<u8>, ReconcileError> {
        let bytes = self.read_all(bucket, key).await?;
        for checksum_key in manifest::checksum_keys(key) {
            match self.read_all(bucket, &checksum_key).await {
                Ok(checksum) => {
                    return manifest::verify_checksum_file(key, &bytes, &checksum).map(|()| bytes)
                }
                Err(ReconcileError::Missing { .. }) => continue,
                Err(err) => return Err(err),
            }
        }
        Ok(bytes)
    }

    async fn read_all(&self, bucket: &str, key: &str) -> Result<Vec<u8>, ReconcileError> {
        let body = self.get(bucket, key).await?;
        let bytes = body
            .collect()
            .await
            .map_err(|e| s3_error(bucket, key, AwsError::broken_body("GetObject", e)))?;
        Ok(bytes.to_vec())
    }

    async fn get(&self, bucket: &str, key: &str) -> Result<ByteStream, ReconcileError> {
        match self.s3.get_object().bucket(bucket).key(key).send().await {
            Ok(output) => Ok(output.body),
            Err(err) if err.as_service_error().is_some_and(|e| e.is_no_such_key()) => {
                Err(ReconcileError::Missing {
                    bucket: bucket.to_owned(),
                    key: key.to_owned(),
                })
            }
            Err(err) => Err(s3_error(bucket, key, AwsError::new("GetObject", err))),
        }
    }
}

pub(crate) fn s3_error(bucket: &str, key: &str, source: AwsError) -> ReconcileError {
    ReconcileError::S3 {
        bucket: bucket.to_owned(),
        key: key.to_owned(),
        source,
    }
}
