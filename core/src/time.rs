//! Time in the core is milliseconds since the Unix epoch, passed in by the adapter;
//! it is rendered as RFC 3339 (UTC, millisecond precision) only at the edge.

use std::time::{Duration, UNIX_EPOCH};

/// Milliseconds since 1970-01-01T00:00:00Z.
pub type EpochMs = i64;

/// `2026-11-30T12:00:00.000Z`. Times before the epoch do not occur here and clamp to it.
pub fn rfc3339(ms: EpochMs) -> String {
    let since = Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(UNIX_EPOCH + since).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_utc_with_milliseconds() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_796_041_234_567), "2026-11-30T12:20:34.567Z");
    }
}
