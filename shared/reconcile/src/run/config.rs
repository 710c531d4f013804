//! What a reconcile function is configured with.

use std::time::Duration;

use likes_core::config::ConfigError;
use likes_core::reconcile::Period;

use crate::athena::AthenaConfig;
use crate::ReconcileError;

#[derive(Debug, Clone)]
pub struct ReconcileConfig {
    pub reactions_table_arn: String,
    pub counts_table: String,
    /// The Reactions table's name, for the retraction of reactions to removed items.
    pub reactions_table: String,
    /// Where removed items are marked.
    pub moderation_table: String,
    /// The likers lists, repaired from the same export.
    pub likers_table: String,
    pub leaderboard_table: String,
    /// The shards each board's score rows spread over.
    pub leaderboard_shards: u32,
    pub export_bucket: String,
    /// Exports go under `<prefix>AWSDynamoDB/<export id>/`.
    pub export_prefix: String,
    /// Drift reports go to `<prefix><cut>.json`.
    pub report_prefix: String,
    pub period: Period,
    /// How long the compare step's lease lasts: the function's timeout.
    pub lease: Duration,
    /// Subtotals of epochs this far behind now are pruned whether or not a run completed;
    /// a run not done within half of it is given up (well inside the export bucket's
    /// lifecycle too, so an export is never read after it expired).
    pub horizon: Duration,
    pub engine: RecountEngine,
}

/// Where the export is recounted: in the function, which reads every data file and holds the
/// recount, the export's likes and the count rows at once (so its memory grows with the
/// table), or by Athena over the same files (its work in the function grows with the drift).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecountEngine {
    Function,
    Athena(AthenaConfig),
    /// Chosen per run from the export's `manifest-summary.json`: in the function up to
    /// `function_max_rows` items, in Athena above. The bound is measured (`make
    /// bench-reconcile-size`), not guessed: past it an invocation would not fit its memory.
    BySize {
        athena: AthenaConfig,
        function_max_rows: u64,
    },
}

impl RecountEngine {
    /// Athena's resources, where this engine may use them.
    pub fn athena(&self) -> Option<&AthenaConfig> {
        match self {
            Self::Function => None,
            Self::Athena(athena) | Self::BySize { athena, .. } => Some(athena),
        }
    }

    /// Whether an export of `export_items` items (its manifest-summary's `itemCount`) is
    /// recounted in Athena.
    pub fn in_athena(&self, export_items: u64) -> bool {
        match self {
            Self::Function => false,
            Self::Athena(_) => true,
            Self::BySize {
                function_max_rows, ..
            } => export_items > *function_max_rows,
        }
    }
}

impl ReconcileConfig {
    pub fn from_env() -> Result<Self, ReconcileError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ReconcileError> {
        let var = |name: &'static str| ConfigError::var(&lookup, name);
        let seconds = |name: &'static str| -> Result<i64, ReconcileError> {
            Ok(ConfigError::in_range(name, var(name)?)? as i64)
        };
        Ok(Self {
            reactions_table_arn: var("REACTIONS_TABLE_ARN")?,
            counts_table: var("COUNTS_TABLE")?,
            reactions_table: var("REACTIONS_TABLE")?,
            moderation_table: var("MODERATION_TABLE")?,
            likers_table: var("LIKERS_TABLE")?,
            leaderboard_table: var("LEADERBOARD_TABLE")?,
            leaderboard_shards: ConfigError::in_range(
                "LEADERBOARD_SHARDS",
                var("LEADERBOARD_SHARDS")?,
            )? as u32,
            export_bucket: var("EXPORT_BUCKET")?,
            export_prefix: var("EXPORT_PREFIX")?,
            report_prefix: var("REPORT_PREFIX")?,
            period: Period {
                length_ms: seconds("RECONCILE_EPOCH_SECONDS")? * 1000,
                uncertainty_ms: seconds("EXPORT_UNCERTAINTY_SECONDS")? * 1000,
            },
            lease: Duration::from_secs(seconds("RECONCILE_LEASE_SECONDS")? as u64),
            horizon: Duration::from_secs(seconds("RECONCILE_HORIZON_SECONDS")? as u64),
            engine: {
                let athena = || -> Result<AthenaConfig, ReconcileError> {
                    Ok(AthenaConfig {
                        workgroup: var("ATHENA_WORKGROUP")?,
                        database: var("GLUE_DATABASE")?,
                        counts_table_arn: var("COUNTS_TABLE_ARN")?,
                        leaderboard_table_arn: var("LEADERBOARD_TABLE_ARN")?,
                        likers_table_arn: var("LIKERS_TABLE_ARN")?,
                    })
                };
                match var("RECOUNT_ENGINE")?.as_str() {
                    "function" => RecountEngine::Function,
                    "athena" => RecountEngine::Athena(athena()?),
                    "auto" => RecountEngine::BySize {
                        athena: athena()?,
                        function_max_rows: ConfigError::in_range(
                            "RECOUNT_FUNCTION_MAX_ROWS",
                            var("RECOUNT_FUNCTION_MAX_ROWS")?,
                        )? as u64,
                    },
                    other => {
                        return Err(ConfigError::Choice {
                            name: "RECOUNT_ENGINE",
                            allowed: &["auto", "function", "athena"],
                            value: other.to_owned(),
                        }
                        .into())
                    }
                }
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(engine: &str) -> Result<ReconcileConfig, ReconcileError> {
        ReconcileConfig::from_lookup(|name| {
            Some(
                match name {
                    "RECOUNT_ENGINE" => engine,
                    "LEADERBOARD_SHARDS" | "RECONCILE_EPOCH_SECONDS" => "300",
                    "EXPORT_UNCERTAINTY_SECONDS" => "60",
                    "RECONCILE_LEASE_SECONDS" => "900",
                    "RECONCILE_HORIZON_SECONDS" => "21600",
                    "RECOUNT_FUNCTION_MAX_ROWS" => "1000",
                    _ => "x",
                }
                .to_owned(),
            )
        })
    }

    #[test]
    fn by_size_recounts_in_the_function_up_to_the_bound_and_in_athena_past_it() {
        let engine = config("auto").unwrap().engine;
        assert!(engine.athena().is_some());
        assert!(!engine.in_athena(1000));
        assert!(engine.in_athena(1001));
    }

    #[test]
    fn a_fixed_engine_ignores_the_export_size() {
        let function = config("function").unwrap().engine;
        assert!(function.athena().is_none());
        assert!(!function.in_athena(u64::MAX));
        let athena = config("athena").unwrap().engine;
        assert!(athena.in_athena(0));
        assert!(config("spark").is_err());
    }
}
