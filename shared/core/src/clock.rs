//! The one wall clock of the service: epoch milliseconds, as every stored time is kept.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in epoch milliseconds (0 if the system clock is before 1970, which no host is).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}
