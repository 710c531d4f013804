//! Fault injection for the local event source mappings, and what tests can count.
//!
//! Two kinds of faults, switched at runtime by tests through [`Faults`]:
//!
//! - **Lambda-side** ones the poller plays itself: a batch delivered twice, a retry cut longer
//!   or shorter than the attempt that failed, an invocation that fails or dies part-way.
//! - **AWS-side** ones played by smithy interceptors on the SDK clients the poller builds for
//!   the function (on DynamoDB and on Kinesis): a
//!   throttled count-row write, a refused `PutRecords`, and the "crash" of an invocation
//!   right after its k-th write succeeded. The function's code is the code Lambda runs,
//!   untouched; it sees real error responses, classified by the SDK as it would classify
//!   DynamoDB's and Kinesis's own.
//!
//! A faked response must never hide a write that happened: the interceptor turns the request
//! into a harmless read (`ListTables`, `ListStreams`) before it is signed and sent, then puts
//! the error response in place of that read's answer.
//!
//! The switches and the interceptors compile only into test builds (the `faults` feature,
//! which the test crate turns on, and this crate's own unit tests): `make run` has none, and
//! its pollers ask a [`Faults`] that never holds one.

mod counters;
#[cfg(any(test, feature = "faults"))]
mod interceptors;
#[cfg(any(test, feature = "faults"))]
mod switches;

pub(crate) use counters::CounterCells;
pub use counters::Counters;
#[cfg(any(test, feature = "faults"))]
pub(crate) use interceptors::{intercept, FaultContext, InvocationSlot};
#[cfg(any(test, feature = "faults"))]
pub use switches::Faults;
#[cfg(not(any(test, feature = "faults")))]
pub use without::Faults;

/// How a retry is cut compared with the attempt that failed (AWS may do either: records
/// arrived meanwhile, or the payload limit cut it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recut {
    /// This many records fewer (at least one record is still delivered).
    Shorter(usize),
    /// This many records more, as far as the stream has them and the batch size allows.
    Longer(usize),
}

/// A build without fault switches: every question a poller asks finds no fault.
#[cfg(not(any(test, feature = "faults")))]
mod without {
    use std::time::Duration;

    use super::Recut;

    #[derive(Debug, Default)]
    pub struct Faults;

    impl Faults {
        pub(crate) fn take_duplicate(&self) -> bool {
            false
        }

        pub(crate) fn take_recut(&self) -> Option<Recut> {
            None
        }

        pub(crate) fn batch_cap(&self) -> Option<usize> {
            None
        }

        pub(crate) fn take_invocation_failure(&self) -> bool {
            false
        }

        pub(crate) fn is_stalled(&self, _shard: usize, _stream_shard: &str) -> bool {
            false
        }

        pub(crate) fn is_failing(&self, _shard: usize) -> bool {
            false
        }

        pub(crate) fn holds_back(&self, _shard: usize, _stream_shard: &str) -> bool {
            false
        }

        pub(crate) fn take_stale_iterator(&self) -> bool {
            false
        }

        pub(crate) fn record_age_offset(&self) -> Duration {
            Duration::ZERO
        }
    }
}
