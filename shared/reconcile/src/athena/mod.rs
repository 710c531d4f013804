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

use std::collections::BTreeSet;

use aws_sdk_athena::types::{QueryExecutionContext, QueryExecutionState};
use likes_aws::AwsError;
use likes_core::likers::LIKER_BUCKETS;
use likes_core::reconcile::{
    near_cut_attribute, subtotal_attributes, BEFORE_FIRST_LIKES, FIRST_EPOCH, FIRST_NEAR_CUTS,
};
use likes_core::ItemId;
use likes_store::rows::listed_buckets;
use md5::{Digest, Md5};

use crate::export::Export;
use crate::ReconcileError;

mod results;
mod tables;

use results::Source;
pub use results::{JudgedLine, Judgement, ResultLines};
use tables::{
    table_name, COUNT_ATTRIBUTES, LIKER_ATTRIBUTES, REACTION_ATTRIBUTES, SCORE_ATTRIBUTES,
};

const RECOUNT_SQL: &str = include_str!("../../../../infra/athena/recount.sql");
const JUDGE_COUNTS_SQL: &str = include_str!("../../../../infra/athena/judge_counts.sql");
const JUDGE_SCORES_SQL: &str = include_str!("../../../../infra/athena/judge_scores.sql");
const JUDGE_LIKERS_SQL: &str = include_str!("../../../../infra/athena/judge_likers.sql");
/// Executions of one statement before a run gives up on it.
pub const ATTEMPTS: usize = 3;
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
    /// The items removed so far, in order: their reactions in the export are retracted.
    pub removed: &'a [ItemId],
}

/// Where the judging queries' results are (`s3://` locations of their CSV).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    pub counts: String,
    pub scores: Option<String>,
    pub likers: String,
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
        // An all-time score row's likes from before its first epoch, of these epochs.
        let before_first: String = epochs
            .clone()
            .map(|j| {
                format!(
                    " - CASE WHEN {j} < CAST(item.fe.n AS BIGINT) \
                     THEN COALESCE(CAST(item.e{j}l.n AS BIGINT), 0) ELSE 0 END"
                )
            })
            .collect();
        let near = near_cut_attribute(exports.cut_epoch);
        let mut read_model = vec![(near.as_str(), "N")];
        let subtotals: Vec<_> = epochs.clone().map(subtotal_attributes).collect();
        for (likes, dislikes) in &subtotals {
            read_model.extend([(likes.as_str(), "N"), (dislikes.as_str(), "N")]);
        }
        let reactions = self
            .table(run_id, "reactions", exports.reactions, &REACTION_ATTRIBUTES)
            .await?;
        let first = [
            (FIRST_EPOCH, "N"),
            (FIRST_NEAR_CUTS[0], "N"),
            (FIRST_NEAR_CUTS[1], "N"),
        ];
        let counts_attributes = [&COUNT_ATTRIBUTES[..], &read_model, &first].concat();
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
                let attributes = [
                    &SCORE_ATTRIBUTES[..],
                    &likes_only,
                    &first,
                    &[(BEFORE_FIRST_LIKES, "N")],
                ]
                .concat();
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
            .replace("${near}", &near)
            .replace("${cut_epoch}", &exports.cut_epoch.to_string());
        let counts_result = self.statement(run_id, "judge-counts", &query).await?;
        let scores_result = match board {
            None => Some(None),
            Some(None) => None,
            Some(Some(board)) => {
                let query = without_comments(JUDGE_SCORES_SQL)
                    .replace("${recount}", &recount)
                    .replace("${board}", &board)
                    .replace("${later_likes}", &later("l"))
                    .replace("${earlier_likes}", &before_first)
                    .replace("${near}", &near)
                    .replace("${cut_epoch}", &exports.cut_epoch.to_string());
                self.statement(run_id, "judge-scores", &query)
                    .await?
                    .map(Some)
            }
        };
        let query = without_comments(JUDGE_LIKERS_SQL)
            .replace("${reactions}", &reactions)
            .replace("${likers}", &likers)
            .replace("${counts}", &counts)
            .replace("${settled_before}", &exports.settled_before_ms.to_string())
            .replace("${bucket_blobs}", &bucket_blobs())
            .replace("${removed}", &quoted(exports.removed));
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

/// Every likers bucket beside its member of a count row's `lbs` set as the export writes it
/// (base64): `(VALUES (0, 'AA=='), ...) AS blobs(bucket, encoded)`.
fn bucket_blobs() -> String {
    use base64::Engine;
    let rows: Vec<String> = (0..LIKER_BUCKETS)
        .map(|bucket| {
            let set = listed_buckets(&BTreeSet::from([bucket]));
            let blob = set
                .as_bs()
                .ok()
                .and_then(|set| set.first())
                .map_or_else(Vec::new, |blob| blob.as_ref().to_vec());
            let encoded = base64::engine::general_purpose::STANDARD.encode(blob);
            format!("({bucket}, '{encoded}')")
        })
        .collect();
    format!("(VALUES {}) AS blobs(bucket, encoded)", rows.join(", "))
}

/// Item ids as an SQL list's members, quoted (an item id holds no quote; one is doubled
/// anyway); a typed NULL, which matches nothing, when there are none.
fn quoted(items: &[ItemId]) -> String {
    if items.is_empty() {
        return "CAST(NULL AS VARCHAR)".to_owned();
    }
    items
        .iter()
        .map(|item| format!("'{}'", item.as_str().replace('\'', "''")))
        .collect::<Vec<_>>()
        .join(", ")
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
    use super::tables::EXPORT_TABLE_SQL;
    use super::*;

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
