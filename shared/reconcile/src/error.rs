/// Why a run could not go on. Reading errors fail the whole read: a recount of part of an
/// export would turn every row it missed into a false correction.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Config(#[from] likes_core::config::ConfigError),
    /// The Counts table (run state, count rows, corrections) failed.
    #[error(transparent)]
    Store(#[from] likes_store::StoreError),
    /// A DynamoDB, S3 or Athena call of the run itself failed.
    #[error(transparent)]
    Aws(#[from] likes_aws::AwsError),
    /// An operator asked for a cut older than one already reconciled, whose subtotals are
    /// gone.
    #[error("cut {asked} is before cut {reconciled}, which is already reconciled")]
    LaterCutReconciled { asked: i64, reconciled: i64 },
    /// The cut is outside the table's point-in-time recovery window; the run was given up.
    #[error("cut {} cannot be exported: {reason}", likes_core::clock::rfc3339(*cut_ms))]
    CutNotExportable {
        cut_ms: i64,
        #[source]
        reason: Unexportable,
    },
    /// PITR cannot serve the cut yet: its latest restorable time (some 5 minutes behind now
    /// on AWS) has not passed it. Nothing was started.
    #[error(
        "no cut can be exported yet: cut {} is restorable from about {}",
        likes_core::clock::rfc3339(*cut_ms),
        likes_core::clock::rfc3339(*servable_at_ms)
    )]
    NotYetRestorable { cut_ms: i64, servable_at_ms: i64 },
    /// The run did not finish within half the subtotal horizon of its start (an export that
    /// never completed, a pipeline stalled behind the cut): past the horizon its cut's
    /// subtotals may be pruned, so it is given up before.
    #[error(
        "the run of cut {} did not finish within {} s of its start ({waiting})",
        likes_core::clock::rfc3339(*cut_ms),
        deadline_ms / 1000
    )]
    Overdue {
        cut_ms: i64,
        deadline_ms: i64,
        waiting: String,
    },
    /// An operator asked for a cut older than the subtotal horizon: the subtotals that
    /// comparing it needs are pruned.
    #[error(
        "cut {} is before the subtotal horizon: every count row holds nothing before {}",
        likes_core::clock::rfc3339(*cut_ms),
        likes_core::clock::rfc3339(*cleaned_ms)
    )]
    BeyondHorizon { cut_ms: i64, cleaned_ms: i64 },
    /// The cut was given up: reported with why, and the next cut proceeds.
    #[error(
        "cut {} was given up (reported; the next cut proceeds): {reason}",
        likes_core::clock::rfc3339(*cut_ms)
    )]
    GivenUp { cut_ms: i64, reason: String },
    /// DynamoDB gave up on the export.
    #[error("export {arn} ended {status}: {message}")]
    ExportFailed {
        arn: String,
        status: String,
        message: String,
    },
    /// An object the export's manifests lead to is not there: the export is not complete
    /// (DynamoDB writes `manifest-summary.json` last), was partly deleted or expired, or the
    /// key given is not an export's.
    #[error("s3://{bucket}/{key} does not exist")]
    Missing { bucket: String, key: String },
    /// S3 refused or failed a read (access, throttling, network); whether retrying may
    /// help is the source's [`likes_aws::Failure`].
    #[error("reading s3://{bucket}/{key}: {source}")]
    S3 {
        bucket: String,
        key: String,
        #[source]
        source: likes_aws::AwsError,
    },
    /// A manifest that does not parse, or whose figures do not add up.
    #[error("manifest {key}: {reason}")]
    Manifest { key: String, reason: String },
    /// The export is in a format this reader does not read (ION).
    #[error("export {key} is in {format}; only DYNAMODB_JSON is read")]
    Format { key: String, format: String },
    /// An object's bytes are not the ones its manifest (or checksum file) vouches for.
    #[error("{key}: MD5 is {actual}, the manifest says {expected}")]
    Checksum {
        key: String,
        expected: String,
        actual: String,
    },
    /// A data file is not a whole gzip stream (corrupt, or cut short).
    #[error("{key}: not a whole gzip stream: {source}")]
    Gzip {
        key: String,
        #[source]
        source: std::io::Error,
    },
    /// A line of a data file that is not a DynamoDB JSON item of the Reactions table.
    #[error("{key} line {line}: {reason}")]
    Row {
        key: String,
        line: u64,
        reason: String,
    },
    /// A data file holds another number of items than its manifest line says.
    #[error("{key}: read {read} items, the manifest says {expected}")]
    ItemCount {
        key: String,
        expected: u64,
        read: u64,
    },
    /// Athena could not run a statement of the recount, each time it was started.
    #[error("Athena failed the {step} statement {} times: {}", failures.len(), failures.join("; "))]
    Query { step: String, failures: Vec<String> },
    /// Athena's result is not the recount's (columns, numbers, item ids).
    #[error("Athena result {location}: {reason}")]
    Result { location: String, reason: String },
}

/// Why a cut is outside the table's point-in-time recovery window.
#[derive(Debug, thiserror::Error)]
pub enum Unexportable {
    #[error(
        "it is before the table's earliest restorable time {}",
        likes_core::clock::rfc3339(*earliest_ms)
    )]
    BeforeEarliest { earliest_ms: i64 },
    /// DynamoDB itself refused the export's time.
    #[error("DynamoDB refused its time: {0}")]
    Refused(#[source] likes_aws::AwsError),
}
