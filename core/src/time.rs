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

/// Reads an RFC 3339 time in UTC (`…Z`, with or without fractions of a second), as this
/// service writes them; `None` for anything else or a time before the epoch.
pub fn parse_rfc3339(text: &str) -> Option<EpochMs> {
    let at = humantime::parse_rfc3339(text).ok()?;
    let ms = at.duration_since(UNIX_EPOCH).ok()?.as_millis();
    EpochMs::try_from(ms).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_it_writes_and_nothing_else() {
        for ms in [0, 1_796_041_234_567] {
            assert_eq!(parse_rfc3339(&rfc3339(ms)), Some(ms));
        }
        assert_eq!(parse_rfc3339("2026-11-30T12:20:34Z"), Some(1_796_041_234_000));
        for bad in ["", "yesterday", "2026-11-30 12:20:34", "2026-11-30T12:20:34+02:00", "1969-12-31T23:59:59Z"] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn renders_utc_with_milliseconds() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_796_041_234_567), "2026-11-30T12:20:34.567Z");
    }
}
