//! Page sizes as clients ask for them, one rule for every list.

use crate::ValidationError;

/// Lists (my liked items, an item's likers) give this many entries when no limit is asked.
pub const DEFAULT_LIST_LIMIT: usize = 20;

/// `limit` as a client sends it: a whole number from 1 to 100, `default` when absent.
pub fn limit(raw: Option<&str>, default: usize) -> Result<usize, ValidationError> {
    const MAX: usize = 100;
    match raw {
        None => Ok(default),
        Some(raw) => raw
            .parse()
            .ok()
            .filter(|n| (1..=MAX).contains(n))
            .ok_or_else(|| ValidationError::Limit(raw.chars().take(32).collect())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_whole_numbers_from_1_to_100() {
        assert_eq!(limit(None, 10), Ok(10));
        assert_eq!(limit(None, 20), Ok(20));
        assert_eq!(limit(Some("1"), 10), Ok(1));
        assert_eq!(limit(Some("100"), 10), Ok(100));
        for bad in ["0", "101", "ten", "-1", "", "1.5"] {
            assert!(limit(Some(bad), 10).is_err(), "{bad}");
        }
    }
}
