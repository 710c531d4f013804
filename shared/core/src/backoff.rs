//! The one bounded backoff of the service: how long to wait before retry `attempt` (1-based)
//! of a call that was throttled, refused or conflicted on, or of a failed batch.

use std::time::Duration;

/// A delay that doubles per attempt from `first`, never more than `cap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub first: Duration,
    pub cap: Duration,
}

impl Backoff {
    /// For AWS calls inside a function: 50 ms doubled per attempt, never more than 2 s, so a
    /// handful of attempts fits well inside a Lambda's timeout.
    pub const AWS_CALL: Backoff = Backoff {
        first: Duration::from_millis(50),
        cap: Duration::from_secs(2),
    };

    pub fn delay(self, attempt: u32) -> Duration {
        let doubled = self
            .first
            .saturating_mul(1 << attempt.saturating_sub(1).min(16));
        doubled.min(self.cap)
    }
}

/// [`Backoff::AWS_CALL`]'s delay before retry `attempt`.
pub fn delay(attempt: u32) -> Duration {
    Backoff::AWS_CALL.delay(attempt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_and_are_capped() {
        assert_eq!(delay(1), Duration::from_millis(50));
        assert_eq!(delay(2), Duration::from_millis(100));
        assert_eq!(delay(4), Duration::from_millis(400));
        assert_eq!(delay(30), Duration::from_secs(2));
        let short = Backoff {
            first: Duration::from_millis(100),
            cap: Duration::from_millis(500),
        };
        assert_eq!(short.delay(3), Duration::from_millis(400));
        assert_eq!(short.delay(4), Duration::from_millis(500));
    }
}
