//! Time in the core is milliseconds since the Unix epoch, passed in by the adapter. A stored or
//! answered moment is a [`Timestamp`]: milliseconds inside, RFC 3339 (UTC, millisecond
//! precision) wherever it is written, so a value is served as it is kept.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::time::{Duration, UNIX_EPOCH};

/// Milliseconds since 1970-01-01T00:00:00Z.
pub type EpochMs = i64;

/// A moment: epoch milliseconds, written as `2026-11-30T12:00:00.000Z`. It reads that form
/// back, and also a plain number of milliseconds (how values stored before it were written).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(EpochMs);

impl Timestamp {
    pub const fn from_ms(ms: EpochMs) -> Timestamp {
        Timestamp(ms)
    }

    pub const fn ms(self) -> EpochMs {
        self.0
    }
}

impl From<EpochMs> for Timestamp {
    fn from(ms: EpochMs) -> Timestamp {
        Timestamp(ms)
    }
}

impl std::str::FromStr for Timestamp {
    type Err = String;
    /// An RFC 3339 time in UTC, as [`parse_rfc3339`] reads it.
    fn from_str(text: &str) -> Result<Timestamp, String> {
        parse_rfc3339(text).map(Timestamp).ok_or_else(|| format!("not an RFC 3339 time in UTC: {text}"))
    }
}

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&rfc3339(self.0))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = Timestamp;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an RFC 3339 time in UTC, or epoch milliseconds")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Timestamp, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Timestamp, E> {
                Ok(Timestamp(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Timestamp, E> {
                EpochMs::try_from(v).map(Timestamp).map_err(|_| E::custom("a time past the year 292 million"))
            }
        }
        d.deserialize_any(Visit)
    }
}

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

    #[test]
    fn a_timestamp_is_written_in_rfc3339_and_read_from_it_or_from_stored_milliseconds() {
        let t = Timestamp::from_ms(1_796_041_234_567);
        assert_eq!(serde_json::to_string(&t).unwrap(), "\"2026-11-30T12:20:34.567Z\"");
        assert_eq!(serde_json::from_str::<Timestamp>("\"2026-11-30T12:20:34.567Z\"").unwrap(), t);
        assert_eq!(serde_json::from_str::<Timestamp>("1796041234567").unwrap(), t, "a value stored as milliseconds");
        for bad in ["\"yesterday\"", "\"2026-11-30T12:20:34+02:00\"", "null", "1.5", "[1]"] {
            assert!(serde_json::from_str::<Timestamp>(bad).is_err(), "{bad}");
        }
        assert_eq!(t.to_string(), rfc3339(t.ms()));
    }
}
