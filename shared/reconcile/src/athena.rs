//! The compare at platform size: Athena judges every item against the recount, over exports
//! of the Reactions table (at the cut) and of the read models (Counts, and the Leaderboard
//! when the board has passed the cut), and the run reads back only what it must act on: the
//! items that drifted, with the export's census and the totals (`infra/athena/`).
//!
//! Each statement of a run (a table per export, each judging query) is started with a client
//! request token derived from the run and the statement, so every invocation that gets this
//! far asks for the same query execution and none starts a second one. A statement that
//! fails is started again under a token chained to the failed execution, up to [`ATTEMPTS`]
//! times, then the run stops with the reasons: a transient Athena failure costs a query, not
//! the cut, and a lasting one (a table that cannot be read) surfaces.

use aws_sdk_athena::types::{QueryExecutionContext, QueryExecutionState};
use aws_sdk_s3::primitives::ByteStream;
use likes_aws::AwsError;
use likes_core::likers::LikeAt;
use likes_core::pipeline::Counts;
use likes_core::reconcile::{near_cut_attribute, subtotal_attributes};
use likes_core::ItemId;
use md5::{Digest, Md5};

use crate::export::Export;
use crate::ReconcileError;

const EXPORT_TABLE_SQL: &str = include_str!("../../../infra/athena/export_table.sql");
const RECOUNT_SQL: &str = include_str!("../../../infra/athena/recount.sql");
const JUDGE_COUNTS_SQL: &str = include_str!("../../../infra/athena/judge_counts.sql");
const JUDGE_SCORES_SQL: &str = include_str!("../../../infra/athena/judge_scores.sql");
const JUDGE_LIKERS_SQL: &str = include_str!("../../../infra/athena/judge_likers.sql");
/// Executions of one statement before a run gives up on it.
pub const ATTEMPTS: usize = 3;
const COUNTS_HEADER: &[&str] = &["kind", "item_id", "likes", "dislikes", "n"];
const SCORES_HEADER: &[&str] = &["kind", "item_id", "likes", "n"];
const LIKERS_HEADER: &[&str] = &[
    "kind",
    "item_id",
    "user_id",
    "listed_created",
    "listed_op_id",
    "listed_at",
    "exported_created",
    "exported_op_id",
    "exported_at",
    "n",
];
/// The attributes of each export's rows the queries read.
const REACTION_ATTRIBUTES: [(&str, &str); 6] = [
    ("user_id", "S"),
    ("item_id", "S"),
    ("state", "S"),
    ("created_at", "N"),
    ("op_id", "N"),
    ("updated_at", "N"),
];
const LIKER_ATTRIBUTES: [(&str, &str); 6] = [
    ("bucket", "S"),
    ("user_id", "S"),
    ("row_created", "N"),
    ("op_id", "N"),
    ("liked_at", "N"),
    ("position", "S"),
];
const COUNT_ATTRIBUTES: [(&str, &str); 4] = [
    ("item_id", "S"),
    ("shard", "S"),
    ("like_count", "N"),
    ("dislike_count", "N"),
];
const SCORE_ATTRIBUTES: [(&str, &str); 3] = [("board", "S"), ("item_id", "S"), ("score", "N")];

/// Where Athena runs: the work group (its result location, engine, limits) and the Glue
/// database the export tables are created in; and the read models' tables it exports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AthenaConfig {
    pub workgroup: String,
    pub database: String,
    pub counts_table_arn: String,
    pub leaderboard_table_arn: String,
    pub likers_table_arn: String,
}

/// The exports one run is judged over.
#[derive(Debug, Clone, Copy)]
pub struct JudgedExports<'a> {
    /// The Reactions table at the cut.
    pub reactions: &'a Export,
    /// The Counts table, once the pipeline had passed the cut.
    pub counts: &'a Export,
    /// The Leaderboard table, once the board had passed the cut.
    pub board: Option<&'a Export>,
    /// The Likers table, after the cut.
    pub likers: &'a Export,
    /// The cut less the uncertainty (epoch ms): a like listed since is left alone.
    pub settled_before_ms: i64,
    /// The cut's epoch, and the latest epoch a flip in the read models' exports can be
    /// attributed to.
    pub cut_epoch: i64,
    pub last_epoch: i64,
}

/// Where the judging queries' results are (`s3://` locations of their CSV).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    pub counts: String,
    pub scores: Option<String>,
    pub likers: String,
}

/// Which judging query a result is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judgement {
    Counts,
    Scores,
    Likers,
}

/// A line of a judging query's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JudgedLine {
    /// A total: `in_sync`, `deferred`, `drifted`, `rows`, `probes`, `foreign` or
    /// `unreadable`.
    Total { kind: String, n: u64 },
    /// An item with rows in no known state: they counted as no change.
    Unknown { item_id: String, rows: u64 },
    /// An item whose read model differs from its recount, with the recount.
    Drift { item: ItemId, recount: Counts },
    /// A user's entry in an item's likers list that may need repair: the entry's like when
    /// it is liked, the export's when the user liked the item at the cut.
    Liker {
        item: ItemId,
        user_id: String,
        listed: Option<LikeAt>,
        exported: Option<LikeAt>,
    },
}

#[derive(Debug, Clone)]
pub struct AthenaJudge {
    athena: aws_sdk_athena::Client,
    s3: aws_sdk_s3::Client,
    config: AthenaConfig,
}

impl AthenaJudge {
    pub fn new(
        athena: aws_sdk_athena::Client,
        s3: aws_sdk_s3::Client,
        config: AthenaConfig,
    ) -> Self {
        Self { athena, s3, config }
    }

    pub fn config(&self) -> &AthenaConfig {
        &self.config
    }

    /// Advances the judging of `exports` for run `run_id` as far as Athena has got: creates
    /// a table per export, then runs the judging queries over them. `None` while a statement
    /// is still running; call again.
    pub async fn poll(
        &self,
        run_id: &str,
        exports: &JudgedExports<'_>,
    ) -> Result<Option<Judged>, ReconcileError> {
        let epochs = exports.cut_epoch..=exports.last_epoch;
        let later = |suffix: &str| -> String {
            epochs
                .clone()
                .map(|j| format!(" - COALESCE(CAST(item.e{j}{suffix}.n AS BIGINT), 0)"))
                .collect()
        };
        let near = near_cut_attribute(exports.cut_epoch);
        let mut read_model = vec![(near.as_str(), "N")];
        let subtotals: Vec<_> = epochs.clone().map(subtotal_attributes).collect();
        for (likes, dislikes) in &subtotals {
            read_model.extend([(likes.as_str(), "N"), (dislikes.as_str(), "N")]);
        }
        let reactions = self
            .table(run_id, "reactions", exports.reactions, &REACTION_ATTRIBUTES)
            .await?;
        let counts_attributes = [&COUNT_ATTRIBUTES[..], &read_model].concat();
        let counts = self
            .table(run_id, "counts", exports.counts, &counts_attributes)
            .await?;
        let board = match exports.board {
            None => None,
            Some(export) => {
                let likes_only: Vec<_> = read_model
                    .iter()
                    .filter(|(name, _)| !name.ends_with('d'))
                    .copied()
                    .collect();
                let attributes = [&SCORE_ATTRIBUTES[..], &likes_only].concat();
                Some(self.table(run_id, "board", export, &attributes).await?)
            }
        };
        let likers = self
            .table(run_id, "likers", exports.likers, &LIKER_ATTRIBUTES)
            .await?;
        let (Some(reactions), Some(counts), Some(likers)) = (reactions, counts, likers) else {
            return Ok(None);
        };
        let recount = without_comments(RECOUNT_SQL).replace("${reactions}", &reactions);
        let query = without_comments(JUDGE_COUNTS_SQL)
            .replace("${recount}", &recount)
            .replace("${counts}", &counts)
            .replace("${later_likes}", &later("l"))
            .replace("${later_dislikes}", &later("d"))
            .replace("${near}", &near);
        let counts_result = self.statement(run_id, "judge-counts", &query).await?;
        let scores_result = match board {
            None => Some(None),
            Some(None) => None,
            Some(Some(board)) => {
                let query = without_comments(JUDGE_SCORES_SQL)
                    .replace("${recount}", &recount)
                    .replace("${board}", &board)
                    .replace("${later_likes}", &later("l"))
                    .replace("${near}", &near);
                self.statement(run_id, "judge-scores", &query)
                    .await?
                    .map(Some)
            }
        };
        let query = without_comments(JUDGE_LIKERS_SQL)
            .replace("${reactions}", &reactions)
            .replace("${likers}", &likers)
            .replace("${settled_before}", &exports.settled_before_ms.to_string());
        let likers_result = self.statement(run_id, "judge-likers", &query).await?;
        Ok(match (counts_result, scores_result, likers_result) {
            (Some(counts), Some(scores), Some(likers)) => Some(Judged {
                counts,
                scores,
                likers,
            }),
            _ => None,
        })
    }

    /// The table over `export` (created by its own statement): its name once created.
    async fn table(
        &self,
        run_id: &str,
        kind: &str,
        export: &Export,
        attributes: &[(&str, &str)],
    ) -> Result<Option<String>, ReconcileError> {
        let table = table_name(kind, export)?;
        let attributes: Vec<String> = attributes
            .iter()
            .map(|(name, kind)| format!("{name}: struct<{kind}: string>"))
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

    /// Drops the tables of `exports` once the run is done with them (the data files stay
    /// until their lifecycle expiry). Started, not awaited: a table left behind costs nothing.
    pub async fn drop_tables(
        &self,
        run_id: &str,
        exports: &JudgedExports<'_>,
    ) -> Result<(), ReconcileError> {
        let tables = [
            ("reactions", Some(exports.reactions)),
            ("counts", Some(exports.counts)),
            ("board", exports.board),
            ("likers", Some(exports.likers)),
        ];
        for (kind, export) in tables {
            if let Some(export) = export {
                let sql = format!("DROP TABLE IF EXISTS {}", table_name(kind, export)?);
                self.start(&sql, &token(&format!("{run_id}#{sql}"))).await?;
            }
        }
        Ok(())
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
        // The statement's text is in the token: an attempt of the run over new exports asks
        // for new executions, and an invocation that gets here again finds its own.
        let mut chain = format!("{run_id}#{step}#{}", token(&sql));
        let mut failures = Vec::new();
        while failures.len() < ATTEMPTS {
            let id = self.start(&sql, &token(&chain)).await?;
            let execution = self
                .athena
                .get_query_execution()
                .query_execution_id(&id)
                .send()
                .await
                .map_err(|e| AwsError::new("GetQueryExecution", e))?
                .query_execution
                .ok_or_else(|| {
                    AwsError::unusable("GetQueryExecution", format!("no execution {id}"))
                })?;
            let Some(status) = execution.status.clone() else {
                return Ok(None);
            };
            match status.state {
                Some(QueryExecutionState::Succeeded) => {
                    let output = execution
                        .result_configuration
                        .and_then(|r| r.output_location)
                        .ok_or_else(|| {
                            AwsError::unusable(
                                "GetQueryExecution",
                                format!("execution {id} names no output location"),
                            )
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
            .map_err(|e| AwsError::new("StartQueryExecution", e))?
            .query_execution_id
            .ok_or_else(|| {
                AwsError::unusable("StartQueryExecution", "no query execution id in the answer")
                    .into()
            })
    }

    /// The lines of a judging query's result (`s3://` location), streamed.
    pub async fn lines(
        &self,
        location: &str,
        judgement: Judgement,
    ) -> Result<ResultLines, ReconcileError> {
        let (bucket, key) = location
            .strip_prefix("s3://")
            .and_then(|rest| rest.split_once('/'))
            .ok_or_else(|| ReconcileError::Result {
                location: location.to_owned(),
                reason: "not an s3:// location".into(),
            })?;
        let body = self
            .s3
            .get_object()
            .bucket(bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| crate::export::s3_error(bucket, key, AwsError::new("GetObject", e)))?
            .body;
        Ok(ResultLines::new(location, Source::Stream(body), judgement))
    }
}

enum Source {
    Stream(ByteStream),
    #[cfg(test)]
    Chunks(std::vec::IntoIter<Vec<u8>>),
}

/// A judging query's CSV result, read a line at a time as it arrives. Its fields are kinds,
/// item ids, numbers and empty (NULL), none with a comma, quote or newline, but each line is
/// still read as CSV (Athena quotes every field).
pub struct ResultLines {
    location: String,
    source: Option<Source>,
    pending: Vec<u8>,
    line: u64,
    judgement: Judgement,
}

impl ResultLines {
    fn new(location: &str, source: Source, judgement: Judgement) -> Self {
        Self {
            location: location.to_owned(),
            source: Some(source),
            pending: Vec::new(),
            line: 0,
            judgement,
        }
    }

    /// The next line, `None` after the last.
    pub async fn next(&mut self) -> Result<Option<JudgedLine>, ReconcileError> {
        loop {
            if let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                if let Some(parsed) = self.parse(&line[..end])? {
                    return Ok(Some(parsed));
                }
                continue;
            }
            match self.chunk().await? {
                Some(chunk) => self.pending.extend_from_slice(&chunk),
                None if self.pending.is_empty() => {
                    return if self.line == 0 {
                        Err(self.invalid("empty: no header".into()))
                    } else {
                        Ok(None)
                    };
                }
                None => {
                    let rest = std::mem::take(&mut self.pending);
                    if let Some(parsed) = self.parse(&rest)? {
                        return Ok(Some(parsed));
                    }
                }
            }
        }
    }

    async fn chunk(&mut self) -> Result<Option<Vec<u8>>, ReconcileError> {
        let chunk = match &mut self.source {
            None => None,
            Some(Source::Stream(body)) => body
                .next()
                .await
                .transpose()
                .map_err(|e| self.invalid(format!("reading: {e}")))?
                .map(|bytes| bytes.to_vec()),
            #[cfg(test)]
            Some(Source::Chunks(chunks)) => chunks.next(),
        };
        if chunk.is_none() {
            self.source = None;
        }
        Ok(chunk)
    }

    fn invalid(&self, reason: String) -> ReconcileError {
        ReconcileError::Result {
            location: self.location.clone(),
            reason: format!("line {}: {reason}", self.line),
        }
    }

    /// One line: `None` for the header.
    fn parse(&mut self, line: &[u8]) -> Result<Option<JudgedLine>, ReconcileError> {
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
        let header = match self.judgement {
            Judgement::Counts => COUNTS_HEADER,
            Judgement::Scores => SCORES_HEADER,
            Judgement::Likers => LIKERS_HEADER,
        };
        if self.line == 1 {
            return if fields == header {
                Ok(None)
            } else {
                Err(self.invalid(format!("header {fields:?}, not {header:?}")))
            };
        }
        if fields.len() != header.len() {
            return Err(self.invalid(format!("{} fields, not {}", fields.len(), header.len())));
        }
        let field = |name: &str| fields[header.iter().position(|h| *h == name).expect("a column")];
        let number = |name: &str| {
            let text = field(name);
            text.parse::<u64>()
                .map_err(|_| self.invalid(format!("{name} {text:?} is not a count")))
        };
        let item = || {
            let text = field("item_id");
            ItemId::parse(text).map_err(|_| self.invalid(format!("{text:?} is not an item id")))
        };
        let like_at = |side: &str| -> Result<Option<LikeAt>, ReconcileError> {
            let values = ["created", "op_id", "at"].map(|part| field(&format!("{side}_{part}")));
            if values.iter().all(|v| v.is_empty()) {
                return Ok(None);
            }
            let [created, op_id, at] = values.map(|v| {
                v.parse::<i64>()
                    .map_err(|_| self.invalid(format!("{side} {v:?} is not a number")))
            });
            Ok(Some(LikeAt {
                row_created_ms: created?,
                op_id: u64::try_from(op_id?)
                    .map_err(|_| self.invalid(format!("{side} op_id is negative")))?,
                liked_at_ms: at?,
            }))
        };
        Ok(Some(match (self.judgement, field("kind")) {
            (Judgement::Likers, "repair") => JudgedLine::Liker {
                item: item()?,
                user_id: field("user_id").to_owned(),
                listed: like_at("listed")?,
                exported: like_at("exported")?,
            },
            (Judgement::Likers, "unreadable")
            | (Judgement::Counts | Judgement::Scores, "in_sync" | "deferred" | "drifted")
            | (Judgement::Counts, "rows" | "probes" | "foreign") => JudgedLine::Total {
                kind: field("kind").to_owned(),
                n: number("n")?,
            },
            (Judgement::Counts, "unknown") => JudgedLine::Unknown {
                item_id: field("item_id").to_owned(),
                rows: number("n")?,
            },
            (Judgement::Counts | Judgement::Scores, "drift") => JudgedLine::Drift {
                item: item()?,
                recount: Counts {
                    like_count: number("likes")?,
                    dislike_count: match self.judgement {
                        Judgement::Counts => number("dislikes")?,
                        _ => 0,
                    },
                },
            },
            (_, other) => return Err(self.invalid(format!("{other:?} is not a kind of line"))),
        }))
    }
}

/// The Glue table of an export: `<kind>_<ExportId>`, in the characters a table name allows.
fn table_name(kind: &str, export: &Export) -> Result<String, ReconcileError> {
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

/// The SQL without its `--` comment lines and final `;`: Athena's DDL parser refuses a
/// statement that begins with a comment, and a query is one statement. Taken off before the
/// `${...}` names are substituted, as the comments name them too.
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

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(
        text: &str,
        chunk: usize,
        judgement: Judgement,
    ) -> Result<Vec<JudgedLine>, ReconcileError> {
        let chunks: Vec<Vec<u8>> = text.as_bytes().chunks(chunk).map(<[u8]>::to_vec).collect();
        let mut lines = ResultLines::new(
            "s3://b/r.csv",
            Source::Chunks(chunks.into_iter()),
            judgement,
        );
        let mut all = Vec::new();
        while let Some(line) = lines.next().await? {
            all.push(line);
        }
        Ok(all)
    }

    const COUNTS: &str = "\"kind\",\"item_id\",\"likes\",\"dislikes\",\"n\"\n\
        \"deferred\",,,,\"1\"\n\
        \"in_sync\",,,,\"7\"\n\
        \"rows\",,,,\"13\"\n\
        \"unknown\",\"game:1\",,,\"2\"\n\
        \"drift\",\"avatar:9\",\"0\",\"2\",\n\
        \"drift\",\"game:1\",\"3\",\"1\",\n";

    fn drift(item: &str, like_count: u64, dislike_count: u64) -> JudgedLine {
        JudgedLine::Drift {
            item: ItemId::parse(item).unwrap(),
            recount: Counts {
                like_count,
                dislike_count,
            },
        }
    }

    #[tokio::test]
    async fn a_result_reads_line_by_line_in_any_chunking() {
        let whole = read(COUNTS, COUNTS.len(), Judgement::Counts).await.unwrap();
        for chunk in [1, 3, 17] {
            assert_eq!(read(COUNTS, chunk, Judgement::Counts).await.unwrap(), whole);
        }
        assert_eq!(whole.len(), 6);
        assert_eq!(
            whole[2],
            JudgedLine::Total {
                kind: "rows".into(),
                n: 13
            }
        );
        assert_eq!(
            whole[3],
            JudgedLine::Unknown {
                item_id: "game:1".into(),
                rows: 2
            }
        );
        assert_eq!(whole[4..], [drift("avatar:9", 0, 2), drift("game:1", 3, 1)]);
        let scores = "\"kind\",\"item_id\",\"likes\",\"n\"\n\"drift\",\"game:1\",\"3\",";
        assert_eq!(
            read(scores, 5, Judgement::Scores).await.unwrap(),
            [drift("game:1", 3, 0)]
        );
    }

    #[tokio::test]
    async fn a_result_that_is_not_the_judges_fails() {
        for wrong in [
            COUNTS.replacen("\"n\"", "\"rows\"", 1),
            String::new(),
            COUNTS.replace("\"13\"", "\"thirteen\""),
            COUNTS.replace("avatar:9", "avatar 9"),
            COUNTS.replace("\"deferred\"", "\"later\""),
            COUNTS.replace(",\"1\"\n", ",\"1\",\"2\"\n"),
        ] {
            assert!(
                matches!(
                    read(&wrong, 64, Judgement::Counts).await,
                    Err(ReconcileError::Result { .. })
                ),
                "{wrong}"
            );
        }
        assert!(matches!(
            read(COUNTS, 64, Judgement::Scores).await,
            Err(ReconcileError::Result { .. })
        ));
    }

    #[test]
    fn statements_go_without_their_comments_and_tokens_fit_athenas_bounds() {
        for query in [
            RECOUNT_SQL,
            JUDGE_COUNTS_SQL,
            JUDGE_SCORES_SQL,
            JUDGE_LIKERS_SQL,
        ] {
            let sql = without_comments(query);
            assert!(
                sql.trim_start().starts_with("SELECT") || sql.trim_start().starts_with("WITH"),
                "{sql}"
            );
            assert!(!sql.contains("--"));
        }
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
