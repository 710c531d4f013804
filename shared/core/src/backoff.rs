//! The one bounded backoff of the service: how long to wait before retry `attempt` (1-based)
//! of a call that AWS throttled, refused or conflicted on.

use std::time::Duration;

/// 50 ms doubled per attempt, never more than 2 s: a handful of attempts fits well inside a
/// Lambda's timeout.
pub fn delay(attempt: u32) -> Duration {
    let doubled = 50u64.saturating_mul(1 << attempt.saturating_sub(1).min(16));
    Duration::from_millis(doubled.min(2_000))
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
    }
}
