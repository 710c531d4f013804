//! The Glue table over each export a run judges, created by its own statement: its name,
//! its columns (the attributes the queries read) and the folder of its data files.

use likes_store::rows::attr::LIKED_BUCKETS;

use super::{without_comments, AthenaJudge};
use crate::export::Export;
use crate::ReconcileError;

pub(super) const EXPORT_TABLE_SQL: &str = include_str!("../../../../infra/athena/export_table.sql");
/// The attributes of each export's rows the queries read.
pub(super) const REACTION_ATTRIBUTES: [(&str, &str); 7] = [
    ("user_id", "S"),
    ("item_id", "S"),
    ("state", "S"),
    ("created_at", "N"),
    ("op_id", "N"),
    ("updated_at", "N"),
    ("liked_at", "N"),
];
pub(super) const LIKER_ATTRIBUTES: [(&str, &str); 5] = [
    ("bucket", "S"),
    ("user_id", "S"),
    ("row_created", "N"),
    ("op_id", "N"),
    ("liked_at", "N"),
];
pub(super) const COUNT_ATTRIBUTES: [(&str, &str); 6] = [
    ("item_id", "S"),
    ("shard", "S"),
    ("like_count", "N"),
    ("dislike_count", "N"),
    // The overflow marker's: rows beyond it are no reader's.
    ("partitions", "N"),
    // The likers buckets a count row lists.
    (LIKED_BUCKETS, "BS"),
];
pub(super) const SCORE_ATTRIBUTES: [(&str, &str); 3] =
    [("board", "S"), ("item_id", "S"), ("score", "N")];

impl AthenaJudge {
    /// The table over `export` (created by its own statement): its name once created.
    pub(super) async fn table(
        &self,
        run_id: &str,
        kind: &str,
        export: &Export,
        attributes: &[(&str, &str)],
    ) -> Result<Option<String>, ReconcileError> {
        let table = table_name(kind, export)?;
        let attributes: Vec<String> = attributes
            .iter()
            .map(|(name, kind)| match *kind {
                // A set's members: strings in the export (numbers and base64 binaries too).
                "SS" | "NS" | "BS" => format!("{name}: struct<{kind}: array<string>>"),
                _ => format!("{name}: struct<{kind}: string>"),
            })
            .collect();
        let ddl = without_comments(EXPORT_TABLE_SQL)
            .replace("${table}", &table)
            .replace("${attributes}", &attributes.join(", "))
            .replace("${data_location}", &data_location(export)?);
        let created = self
            .statement(run_id, &format!("table-{kind}"), &ddl)
            .await?;
        Ok(created.map(|_| table))
    }
}

/// The Glue table of an export: `<kind>_<ExportId>`, in the characters a table name allows.
pub(super) fn table_name(kind: &str, export: &Export) -> Result<String, ReconcileError> {
    let arn = &export.summary.export_arn;
    let id = arn
        .rsplit_once("/export/")
        .map(|(_, id)| id)
        .filter(|id| !id.is_empty())
        .ok_or_else(|| ReconcileError::Manifest {
            key: export.summary_key.clone(),
            reason: format!("exportArn {arn:?} names no export id"),
        })?;
    let id: String = id
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '_',
        })
        .collect();
    Ok(format!("{kind}_{id}"))
}

/// `s3://<bucket>/<export folder>/data/`, the folder DynamoDB writes the data files to: the
/// table covers it, so every data file the manifest lists must be in it.
fn data_location(export: &Export) -> Result<String, ReconcileError> {
    let folder = export
        .summary_key
        .rsplit_once('/')
        .map_or("", |(folder, _)| folder);
    let data = format!("{folder}/data/");
    if let Some(stray) = export.files.iter().find(|f| {
        !f.data_file_s3_key.starts_with(&data) || f.data_file_s3_key[data.len()..].contains('/')
    }) {
        return Err(ReconcileError::Manifest {
            key: export.summary_key.clone(),
            reason: format!(
                "data file {} is not in {data}, so a table over that folder would miss it",
                stray.data_file_s3_key
            ),
        });
    }
    Ok(format!("s3://{}/{data}", export.bucket))
}
