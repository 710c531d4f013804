//! The two manifests of an export, and the checksum files beside them.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use md5::{Digest, Md5};
use serde::Deserialize;

use crate::ReconcileError;

pub(crate) const SUMMARY_FILE: &str = "manifest-summary.json";
/// The only format this reader reads (the other one is ION).
const DYNAMODB_JSON: &str = "DYNAMODB_JSON";

/// `manifest-summary.json`: what the export is, and where its files manifest is.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestSummary {
    pub export_arn: String,
    pub table_arn: String,
    /// The point in time the export shows the table at (RFC 3339).
    pub export_time: String,
    pub item_count: u64,
    pub output_format: String,
    /// A full key, in the export's bucket.
    pub manifest_files_s3_key: String,
}

/// One line of `manifest-files.json`: a data file and what it must hold.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataFile {
    /// A full key, in the export's bucket.
    pub data_file_s3_key: String,
    pub item_count: u64,
    /// Base64 of the MD5 of the object's bytes (gzipped, as stored).
    pub md5_checksum: String,
    pub etag: String,
}

/// The key of `manifest-summary.json` for a location given either as that key itself or as
/// the export's folder (`<prefix>/AWSDynamoDB/<ExportId>`, with or without a trailing slash).
pub(crate) fn summary_key(location: &str) -> String {
    if location.ends_with(SUMMARY_FILE) {
        location.to_owned()
    } else {
        format!("{}/{SUMMARY_FILE}", location.trim_end_matches('/'))
    }
}

/// The checksum files DynamoDB may write beside a manifest: exports write `<name>.md5`, the
/// developer guide names them `<name>.checksum`.
pub(crate) fn checksum_keys(manifest_key: &str) -> [String; 2] {
    let stem = manifest_key.strip_suffix(".json").unwrap_or(manifest_key);
    [format!("{stem}.md5"), format!("{stem}.checksum")]
}

pub(crate) fn parse_summary(key: &str, bytes: &[u8]) -> Result<ManifestSummary, ReconcileError> {
    let summary: ManifestSummary =
        serde_json::from_slice(bytes).map_err(|e| ReconcileError::Manifest {
            key: key.to_owned(),
            reason: e.to_string(),
        })?;
    if summary.output_format != DYNAMODB_JSON {
        return Err(ReconcileError::Format {
            key: key.to_owned(),
            format: summary.output_format,
        });
    }
    Ok(summary)
}

/// The data files of `manifest-files.json` (JSON lines), checked to add up to the summary's
/// item count.
pub(crate) fn parse_files(
    key: &str,
    bytes: &[u8],
    summary: &ManifestSummary,
) -> Result<Vec<DataFile>, ReconcileError> {
    let invalid = |reason: String| ReconcileError::Manifest {
        key: key.to_owned(),
        reason,
    };
    let text = std::str::from_utf8(bytes).map_err(|e| invalid(e.to_string()))?;
    let files = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            serde_json::from_str::<DataFile>(line)
                .map_err(|e| invalid(format!("line {}: {e}", n + 1)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let listed: u64 = files.iter().map(|f| f.item_count).sum();
    if listed != summary.item_count {
        return Err(invalid(format!(
            "its files hold {listed} items, manifest-summary.json says {}",
            summary.item_count
        )));
    }
    Ok(files)
}

/// Base64 of an MD5 digest, as `md5Checksum` and the `.md5` files write it.
pub(crate) fn md5_base64(digest: &[u8]) -> String {
    STANDARD.encode(digest)
}

/// Checks a manifest's bytes against the content of its checksum file: base64 of the MD5 (what
/// exports write) or its hex digits (accepted too, since the format of `.checksum` files is
/// not documented).
pub(crate) fn verify_checksum_file(
    key: &str,
    bytes: &[u8],
    checksum: &[u8],
) -> Result<(), ReconcileError> {
    let digest = Md5::digest(bytes);
    let expected = String::from_utf8_lossy(checksum).trim().to_owned();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let base64 = md5_base64(&digest);
    if expected == base64 || expected.eq_ignore_ascii_case(&hex) {
        return Ok(());
    }
    Err(ReconcileError::Checksum {
        key: key.to_owned(),
        expected,
        actual: base64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(item_count: u64) -> ManifestSummary {
        ManifestSummary {
            export_arn: "arn".into(),
            table_arn: "table".into(),
            export_time: "2026-01-01T00:00:00.000Z".into(),
            item_count,
            output_format: DYNAMODB_JSON.into(),
            manifest_files_s3_key: "x/manifest-files.json".into(),
        }
    }

    #[test]
    fn a_location_is_the_summary_key_or_the_export_folder() {
        let key = "p/AWSDynamoDB/01-ab/manifest-summary.json";
        assert_eq!(summary_key(key), key);
        assert_eq!(summary_key("p/AWSDynamoDB/01-ab"), key);
        assert_eq!(summary_key("p/AWSDynamoDB/01-ab/"), key);
    }

    #[test]
    fn checksum_files_are_looked_for_under_both_names() {
        assert_eq!(
            checksum_keys("p/manifest-files.json"),
            ["p/manifest-files.md5", "p/manifest-files.checksum"]
        );
    }

    #[test]
    fn the_documented_summary_parses_and_ion_is_refused() {
        let doc = br#"{"version":"2020-06-30","exportArn":"arn:aws:dynamodb:us-east-1:123456789012:table/T/export/01234567890123-a1b2c3d4","startTime":"2020-11-04T07:28:34.028Z","endTime":"2020-11-04T07:33:43.897Z","tableArn":"arn:aws:dynamodb:us-east-1:123456789012:table/T","tableId":"12345a12-abcd-123a-ab12-1234abc12345","exportTime":"2020-11-04T07:28:34.028Z","s3Bucket":"b","s3Prefix":"2020-Nov","s3SseAlgorithm":"AES256","s3SseKmsKeyId":null,"manifestFilesS3Key":"2020-Nov/AWSDynamoDB/01234567890123-a1b2c3d4/manifest-files.json","billedSizeBytes":0,"itemCount":8,"outputFormat":"DYNAMODB_JSON"}"#;
        let parsed = parse_summary("k", doc).unwrap();
        assert_eq!(parsed.item_count, 8);
        assert_eq!(
            parsed.manifest_files_s3_key,
            "2020-Nov/AWSDynamoDB/01234567890123-a1b2c3d4/manifest-files.json"
        );
        let ion = String::from_utf8_lossy(doc).replace("DYNAMODB_JSON", "ION");
        assert!(matches!(
            parse_summary("k", ion.as_bytes()),
            Err(ReconcileError::Format { format, .. }) if format == "ION"
        ));
    }

    #[test]
    fn files_must_add_up_to_the_summary() {
        let lines = concat!(
            r#"{"itemCount":8,"md5Checksum":"sQMSpEILNgoQmarvDFonGQ==","etag":"af83d6f217c19b8b0fff8023d8ca4716-1","dataFileS3Key":"AWSDynamoDB/1-2/data/a.json.gz"}"#,
            "\n",
            r#"{"itemCount":0,"md5Checksum":"x","etag":"y","dataFileS3Key":"AWSDynamoDB/1-2/data/b.json.gz"}"#,
            "\n"
        );
        let files = parse_files("k", lines.as_bytes(), &summary(8)).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].data_file_s3_key, "AWSDynamoDB/1-2/data/a.json.gz");
        let err = parse_files("k", lines.as_bytes(), &summary(9)).unwrap_err();
        assert!(err.to_string().contains("hold 8 items"), "{err}");
    }

    #[test]
    fn checksum_files_hold_base64_or_hex_md5() {
        // MD5("abc") = 900150983cd24fb0d6963f7d28e17f72.
        verify_checksum_file("k", b"abc", b"kAFQmDzST7DWlj99KOF/cg==\n").unwrap();
        verify_checksum_file("k", b"abc", b"900150983CD24FB0D6963F7D28E17F72").unwrap();
        assert!(matches!(
            verify_checksum_file("k", b"abd", b"kAFQmDzST7DWlj99KOF/cg=="),
            Err(ReconcileError::Checksum { .. })
        ));
    }
}
