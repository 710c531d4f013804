//! Reconciliation of Likes: the recount of the Reactions table, the source of truth, from a
//! DynamoDB point-in-time export in S3.
//!
//! [`ExportReader`] reads an export in the layout DynamoDB writes it:
//!
//! ```text
//! <prefix>/AWSDynamoDB/<ExportId>/manifest-summary.json   item count, format, the key below
//! <prefix>/AWSDynamoDB/<ExportId>/manifest-files.json     one line per data file: its full key,
//!                                                         item count and MD5
//! <prefix>/AWSDynamoDB/<ExportId>/data/<name>.json.gz     gzipped DynamoDB JSON, one
//!                                                         {"Item": {...}} per line; may be empty
//! <prefix>/AWSDynamoDB/<ExportId>/manifest-*.md5          MD5 of each manifest (the developer
//!                                          guide calls them .checksum; either is checked)
//! <prefix>/AWSDynamoDB/<ExportId>/_started                empty; ignored
//! ```
//!
//! What it promises:
//!
//! - **A recount or an error, never half of one.** A missing manifest or data file, a data file
//!   whose MD5 differs from its manifest line, a corrupt or truncated gzip, a file or export
//!   holding another number of items than its manifest says, a line that is not a Reactions
//!   row: each fails the whole read with a [`ReconcileError`] that names the object (and the
//!   line).
//! - **Bounded memory.** Objects are streamed: each data file's body goes through the MD5 and
//!   the gzip decoder chunk by chunk as it arrives and is cut into lines, one data file at a
//!   time. What stays in memory is the recount itself, one entry per item (at platform size the
//!   recount runs in Athena instead, over the same files: `infra/athena/`).
//! - **Every row accounted for.** A row whose `item_id` is a valid item id is a reaction and
//!   counts for its item in its state (an item whose rows are all NONE is recounted as 0 and
//!   0, so it is checked too); the pulse's probe rows (`item_id` `#probe`) are counted apart;
//!   any other row is foreign: skipped, counted, and the first [`FOREIGN_REPORTED`] reported
//!   with their keys. A reaction in a state the service never writes (or none) counts as no
//!   change, as the aggregator counts it, and is reported the same way: one such row never
//!   stops a run.

mod athena;
mod error;
pub mod export;
mod report;
mod run;

pub use athena::{
    AthenaConfig, AthenaJudge, Judged, JudgedExports, JudgedLine, Judgement, ResultLines, ATTEMPTS,
};
pub use error::{ReconcileError, Unexportable};
pub use export::{
    DataFile, Export, ExportReader, ManifestSummary, ReadProgress, Recount, RowKey,
    UnknownStateRow, FOREIGN_REPORTED,
};
pub use report::{Drift, DriftReport, GivenUp};
pub use run::{Progress, ReconcileConfig, Reconciler, RecountEngine, Step, MAX_ATTEMPTS};
