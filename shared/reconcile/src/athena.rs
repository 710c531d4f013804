//! The recount at platform size: Athena runs `infra/athena/recount.sql` over the export's data
//! files, and the run reads the query's CSV result from S3 instead of the data files.
//!
//! Each statement of a run (the export's table, the recount) is started with a client request
//! token derived from the run and the statement, so every invocation that gets this far asks
//! for the same query execution and none starts a second one. A statement that fails is
//! started again under a token chained to the failed execution, up to [`ATTEMPTS`] times,
//! then the run stops with the reasons: a transient Athena failure costs a query, not the
//! cut, and a lasting one (a table that cannot be read) surfaces.

use aws_sdk_athena::error::DisplayErrorContext;
use aws_sdk_athena::types::{QueryExecutionContext, QueryExecutionState};
use likes_core::pipeline::Counts;
use likes_core::ItemId;
use likes_store::freshness::PROBE_ITEM;
use md5::{Digest, Md5};

use crate::export::{Export, Recount, UnknownStateRow, FOREIGN_REPORTED};
use crate::ReconcileError;

const EXPORT_TABLE_SQL: &str = include_str!("../../../infra/athena/export_table.sql");
const RECOUNT_SQL: &str = include_str!("../../../infra/athena/recount.sql");
/// Executions of one statement before a run gives up on it.
pub const ATTEMPTS: usize = 3;
const HEADER: [&str; 5] = [
    "item_id",
    "likes",
    "dislikes",
    "unknown_states",
    "row_count",
];

/// Where Athena runs: the work group (its result location, engine, limits) and the Glue
/// database the export tables are created in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AthenaConfig {
    pub workgroup: String,
    pub database: String,
}

#[derive(Debug, Clone)]
pub struct AthenaRecount {
    athena: aws_sdk_athena::Client,
    s3: aws_sdk_s3::Client,
    config: AthenaConfig,
}

impl AthenaRecount {
    pub fn new(
        athena: aws_sdk_athena::Client,
        s3: aws_sdk_s3::Client,
        config: AthenaConfig,
    ) -> Self {
        Self { athena, s3, config }
    }

    /// Advances the recount of `export` for run `run_id` as far as Athena has got: creates the
    /// export's table, then runs the recount over it and reads the result. `None` while a
    /// statement is still running; call again.
    pub async fn poll(
        &self,
        run_id: &str,
        export: &Export,
    ) -> Result<Option<Recount>, ReconcileError> {
        let table = table_name(export)?;
        let ddl = EXPORT_TABLE_SQL
            .replace("${table}", &table)
            .replace("${data_location}", &data_location(export)?);
        if self.statement(run_id, "table", &ddl).await?.is_none() {
            return Ok(None);
        }
        let query = RECOUNT_SQL.replace("${export}", &table);
        let Some(output) = self.statement(run_id, "recount", &query).await? else {
            return Ok(None);
        };
        let recount = self.read_result(&output).await?;
        if recount.rows_read != export.summary.item_count {
            return Err(ReconcileError::ItemCount {
                key: output,
                expected: export.summary.item_count,
                read: recount.rows_read,
            });
        }
        Ok(Some(recount))
    }

    /// Drops the export's table once the run has its recount (the data files stay until their
    /// lifecycle expiry). Started, not awaited: a table left behind costs nothing.
    pub async fn drop_table(&self, run_id: &str, export: &Export) -> Result<(), ReconcileError> {
        let sql = format!("DROP TABLE IF EXISTS {}", table_name(export)?);
        self.start(&sql, &token(&format!("{run_id}#drop")))
            .await
            .map(drop)
    }

    /// The statement's output location once an execution of it succeeded, `None` while one
    /// runs; a new execution after each failed one, up to [`ATTEMPTS`].
    async fn statement(
        &self,
        run_id: &str,
        step: &str,
        sql: &str,
    ) -> Result<Option<String>, ReconcileError> {
        let sql = without_comments(sql);
        let mut chain = format!("{run_id}#{step}");
        let mut failures = Vec::new();
        while failures.len() < ATTEMPTS {
            let id = self.start(&sql, &token(&chain)).await?;
            let execution = self
                .athena
                .get_query_execution()
                .query_execution_id(&id)
                .send()
                .await
                .map_err(|e| aws("GetQueryExecution", e))?
                .query_execution
                .ok_or_else(|| ReconcileError::Aws {
                    operation: "GetQueryExecution",
                    message: format!("no execution {id}"),
                })?;
            let Some(status) = execution.status.clone() else {
                return Ok(None);
            };
            match status.state {
                Some(QueryExecutionState::Succeeded) => {
                    let output = execution
                        .result_configuration
                        .and_then(|r| r.output_location)
                        .ok_or_else(|| ReconcileError::Aws {
                            operation: "GetQueryExecution",
                            message: format!("execution {id} names no output location"),
                        })?;
                    return Ok(Some(output));
                }
                Some(QueryExecutionState::Failed) | Some(QueryExecutionState::Cancelled) => {
                    let reason = status
                        .athena_error
                        .and_then(|e| e.error_message)
                        .or(status.state_change_reason)
                        .unwrap_or_default();
                    failures.push(format!("{id}: {reason}"));
                    chain = format!("{chain}#{id}");
                }
                _ => return Ok(None),
            }
        }
        Err(ReconcileError::Query {
            step: step.to_owned(),
            failures,
        })
    }

    async fn start(&self, sql: &str, token: &str) -> Result<String, ReconcileError> {
        self.athena
            .start_query_execution()
            .query_string(sql)
            .work_group(&self.config.workgroup)
            .query_execution_context(
                QueryExecutionContext::builder()
                    .database(&self.config.database)
                    .build(),
            )
            .client_request_token(token)
            .send()
            .await
            .map_err(|e| aws("StartQueryExecution", e))?
            .query_execution_id
            .ok_or_else(|| ReconcileError::Aws {
                operation: "StartQueryExecution",
                message: "no query execution id in the answer".into(),
            })
    }

    /// Reads the recount's CSV result, streamed: one line at a time is parsed.
    async fn read_result(&self, output: &str) -> Result<Recount, ReconcileError> {
        let (bucket, key) = output
            .strip_prefix("s3://")
            .and_then(|rest| rest.split_once('/'))
            .ok_or_else(|| ReconcileError::Result {
                location: output.to_owned(),
                reason: "not an s3:// location".into(),
            })?;
        let mut body = self
            .s3
            .get_object()
            .bucket(bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| crate::export::s3_error(bucket, key, &e))?
            .body;
        let mut result = ResultLines::new(output);
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| crate::export::s3_error(bucket, key, &e))?;
            result.feed(&chunk)?;
        }
        result.finish()
    }
}

/// The recount's CSV result cut into lines as it arrives. Its fields are item ids, `#probe`,
/// numbers and empty (NULL), none with a comma, quote or newline, but each line is still
/// read as CSV (Athena quotes every field).
struct ResultLines<'a> {
    location: &'a str,
    pending: Vec<u8>,
    line: u64,
    recount: Recount,
}

impl<'a> ResultLines<'a> {
    fn new(location: &'a str) -> Self {
        Self {
            location,
            pending: Vec::new(),
            line: 0,
            recount: Recount::default(),
        }
    }

    fn feed(&mut self, chunk: &[u8]) -> Result<(), ReconcileError> {
        self.pending.extend_from_slice(chunk);
        let Some(end) = self.pending.iter().rposition(|&b| b == b'\n') else {
            return Ok(());
        };
        let whole: Vec<u8> = self.pending.drain(..=end).collect();
        for line in whole[..end].split(|&b| b == b'\n') {
            self.add(line)?;
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Recount, ReconcileError> {
        let rest = std::mem::take(&mut self.pending);
        if !rest.is_empty() {
            self.add(&rest)?;
        }
        if self.line == 0 {
            return Err(self.invalid("empty: no header".into()));
        }
        Ok(self.recount)
    }

    fn invalid(&self, reason: String) -> ReconcileError {
        ReconcileError::Result {
            location: self.location.to_owned(),
            reason: format!("line {}: {reason}", self.line),
        }
    }

    fn add(&mut self, line: &[u8]) -> Result<(), ReconcileError> {
        self.line += 1;
        let record = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(line.strip_suffix(b"\r").unwrap_or(line))
            .records()
            .next()
            .transpose()
            .map_err(|e| self.invalid(e.to_string()))?
            .ok_or_else(|| self.invalid("blank".into()))?;
        let fields: Vec<&str> = record.iter().collect();
        if self.line == 1 {
            return if fields == HEADER {
                Ok(())
            } else {
                Err(self.invalid(format!("header {fields:?}, not {HEADER:?}")))
            };
        }
        let [item, likes, dislikes, unknown, rows] = fields[..] else {
            return Err(self.invalid(format!("{} fields, not 5", fields.len())));
        };
        let number = |text: &str| {
            text.parse::<u64>()
                .map_err(|_| self.invalid(format!("{text:?} is not a count")))
        };
        let (likes, dislikes, unknown, rows) = (
            number(likes)?,
            number(dislikes)?,
            number(unknown)?,
            number(rows)?,
        );
        self.recount.rows_read += rows;
        match item {
            "" => self.recount.foreign_rows += rows,
            PROBE_ITEM => self.recount.probes += rows,
            item => {
                let item_id = ItemId::parse(item)
                    .map_err(|_| self.invalid(format!("{item:?} is not an item id")))?;
                // Athena's result has no row keys: the item and how many of its rows are in
                // an unknown state are reported, and they count as no change.
                if unknown > 0 {
                    self.recount.unknown_state_rows += unknown;
                    if self.recount.unknown_states.len() < FOREIGN_REPORTED {
                        self.recount.unknown_states.push(UnknownStateRow {
                            item_id: item.to_owned(),
                            user_id: None,
                            state: None,
                            rows: unknown,
                        });
                    }
                }
                self.recount.reactions += rows;
                self.recount.per_item.insert(
                    item_id,
                    Counts {
                        like_count: likes,
                        dislike_count: dislikes,
                    },
                );
            }
        }
        Ok(())
    }
}

/// The Glue table of an export: `reactions_<ExportId>`, in the characters a table name allows.
fn table_name(export: &Export) -> Result<String, ReconcileError> {
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
    Ok(format!("reactions_{id}"))
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

/// The SQL without its `--` comment lines and final `;`: Athena's DDL parser refuses a
/// statement that begins with a comment, and a query is one statement.
fn without_comments(sql: &str) -> String {
    sql.lines()
        .filter(|line| !line.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n")
        .trim_end()
        .trim_end_matches(';')
        .to_owned()
}

/// A client request token (32 to 128 characters) for one statement of one run.
fn token(chain: &str) -> String {
    Md5::digest(chain.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn aws(operation: &'static str, err: impl std::error::Error) -> ReconcileError {
    ReconcileError::Aws {
        operation,
        message: DisplayErrorContext(err).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, chunk: usize) -> Result<Recount, ReconcileError> {
        let mut lines = ResultLines::new("s3://b/r.csv");
        for piece in text.as_bytes().chunks(chunk) {
            lines.feed(piece)?;
        }
        lines.finish()
    }

    const RESULT: &str = "\"item_id\",\"likes\",\"dislikes\",\"unknown_states\",\"row_count\"\n\
        \"avatar:9\",\"0\",\"2\",\"0\",\"2\"\n\
        \"game:1\",\"3\",\"1\",\"0\",\"5\"\n\
        \"#probe\",\"0\",\"0\",\"1\",\"4\"\n\
        ,\"1\",\"0\",\"0\",\"2\"\n";

    #[test]
    fn a_result_reads_into_the_readers_recount_in_any_chunking() {
        let whole = read(RESULT, RESULT.len()).unwrap();
        for chunk in [1, 3, 17] {
            assert_eq!(read(RESULT, chunk).unwrap(), whole);
        }
        assert_eq!(
            (
                whole.rows_read,
                whole.reactions,
                whole.probes,
                whole.foreign_rows
            ),
            (13, 7, 4, 2)
        );
        let game = whole.per_item[&ItemId::parse("game:1").unwrap()];
        assert_eq!((game.like_count, game.dislike_count), (3, 1));
        assert_eq!(whole.per_item.len(), 2);
    }

    #[test]
    fn a_result_that_is_not_the_recounts_fails_and_unknown_states_count_as_no_change() {
        let whole = read(RESULT, RESULT.len()).unwrap();
        let wrong_header = RESULT.replacen("row_count", "rows", 1);
        assert!(matches!(
            read(&wrong_header, 64),
            Err(ReconcileError::Result { .. })
        ));
        assert!(matches!(read("", 64), Err(ReconcileError::Result { .. })));
        let unknown = RESULT.replace(
            "\"game:1\",\"3\",\"1\",\"0\"",
            "\"game:1\",\"3\",\"1\",\"2\"",
        );
        let with_unknown = read(&unknown, 64).unwrap();
        assert_eq!(
            with_unknown.per_item[&ItemId::parse("game:1").unwrap()],
            whole.per_item[&ItemId::parse("game:1").unwrap()],
            "rows in an unknown state count as no change"
        );
        assert_eq!(with_unknown.unknown_state_rows, 2);
        assert_eq!(with_unknown.unknown_states[0].item_id, "game:1");
        let not_a_number = RESULT.replace("\"2\"\n", "\"two\"\n");
        assert!(matches!(
            read(&not_a_number, 64),
            Err(ReconcileError::Result { .. })
        ));
        let bad_item = RESULT.replace("avatar:9", "avatar 9");
        assert!(matches!(
            read(&bad_item, 64),
            Err(ReconcileError::Result { .. })
        ));
    }

    #[test]
    fn statements_go_without_their_comments_and_tokens_fit_athenas_bounds() {
        let sql = without_comments(RECOUNT_SQL);
        assert!(sql.trim_start().starts_with("SELECT"), "{sql}");
        assert!(!sql.contains("--"));
        let ddl = without_comments(EXPORT_TABLE_SQL);
        assert!(
            ddl.trim_start().starts_with("CREATE EXTERNAL TABLE"),
            "{ddl}"
        );
        let token = token("cut-1#table");
        assert_eq!(token.len(), 32);
        assert_ne!(token, super::token("cut-1#recount"));
    }
}
