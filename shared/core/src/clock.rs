//! The one wall clock of the service, and its one way to write time: epoch milliseconds, as
//! every stored time is kept, and RFC 3339, as the API and reports show it.

use std::time::{SystemTime, UNIX_EPOCH};

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Now, in epoch milliseconds (0 if the system clock is before 1970, which no host is).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// RFC 3339 in UTC, with milliseconds when there are any: `2026-11-29T22:26:30.123Z`.
pub fn rfc3339(epoch_ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(epoch_ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}

/// Epoch milliseconds of an RFC 3339 time, in any offset.
pub fn parse_rfc3339(text: &str) -> Result<i64, String> {
    let parsed = OffsetDateTime::parse(text, &Rfc3339)
        .map_err(|e| format!("{text:?} is not an RFC 3339 time: {e}"))?;
    Ok((parsed.unix_timestamp_nanos() / 1_000_000) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips_milliseconds() {
        assert_eq!(rfc3339(1_764_455_190_123), "2025-11-29T22:26:30.123Z");
        assert_eq!(rfc3339(1_764_455_190_000), "2025-11-29T22:26:30Z");
        assert_eq!(
            parse_rfc3339("2025-11-29T22:26:30.123Z"),
            Ok(1_764_455_190_123)
        );
        assert_eq!(
            parse_rfc3339("2025-11-29T23:26:30+01:00"),
            Ok(1_764_455_190_000)
        );
        assert!(parse_rfc3339("yesterday").is_err());
    }
}
