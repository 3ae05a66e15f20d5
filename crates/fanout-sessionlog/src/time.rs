//! The canonical timestamp: UTC, microsecond precision, fixed-width text.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A UTC instant with microsecond precision. Its text form is always
/// `YYYY-MM-DDTHH:MM:SS.ffffffZ`, so text order is time order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(DateTime<Utc>);

/// The last value handed out by [`Timestamp::now`], in microseconds since the epoch.
static LAST_NOW_MICROS: AtomicI64 = AtomicI64::new(i64::MIN);

impl Timestamp {
    /// The current time, truncated to microseconds. Strictly increasing within a
    /// process: two calls never return the same value, so a parent session
    /// created before its child always has the smaller `createdAt`.
    pub fn now() -> Self {
        let wall = Utc::now().timestamp_micros();
        let mut prev = LAST_NOW_MICROS.load(Ordering::Relaxed);
        loop {
            let next = wall.max(prev.saturating_add(1));
            match LAST_NOW_MICROS.compare_exchange_weak(
                prev,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Self::from_micros(next).unwrap_or(Self(Utc::now())),
                Err(seen) => prev = seen,
            }
        }
    }

    /// From microseconds since the Unix epoch; `None` when out of range.
    pub fn from_micros(micros: i64) -> Option<Self> {
        DateTime::<Utc>::from_timestamp_micros(micros).map(Self)
    }

    /// Microseconds since the Unix epoch.
    pub fn unix_micros(&self) -> i64 {
        self.0.timestamp_micros()
    }

    /// From any UTC instant, truncated to microseconds.
    pub fn from_datetime(dt: DateTime<Utc>) -> Self {
        Self::from_micros(dt.timestamp_micros()).unwrap_or(Self(dt))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.to_rfc3339_opts(SecondsFormat::Micros, true))
    }
}

/// A timestamp text that is not RFC 3339.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid timestamp {text:?}: expected YYYY-MM-DDTHH:MM:SS.ffffffZ")]
pub struct TimestampParseError {
    /// The rejected text.
    pub text: String,
}

impl FromStr for Timestamp {
    type Err = TimestampParseError;

    /// Accepts any RFC 3339 instant (the canonical form included) and normalises
    /// it to UTC microseconds.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DateTime::parse_from_rfc3339(s)
            .map(|dt| Self::from_datetime(dt.with_timezone(&Utc)))
            .map_err(|_| TimestampParseError {
                text: s.to_string(),
            })
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_text_is_fixed_width_micros_utc() {
        let ts = Timestamp::from_micros(1_754_235_140_000_001).unwrap();
        assert_eq!(ts.to_string(), "2025-08-03T15:32:20.000001Z");
        assert_eq!(ts.unix_micros(), 1_754_235_140_000_001);
        let zero = Timestamp::from_micros(1_754_235_140_000_000).unwrap();
        assert_eq!(zero.to_string(), "2025-08-03T15:32:20.000000Z");
    }

    #[test]
    fn parse_normalises_offsets_and_truncates() {
        let ts: Timestamp = "2025-08-03T17:32:20.1234567+02:00".parse().unwrap();
        assert_eq!(ts.to_string(), "2025-08-03T15:32:20.123456Z");
        assert!("yesterday".parse::<Timestamp>().is_err());
    }

    #[test]
    fn now_is_strictly_increasing() {
        let mut prev = Timestamp::now();
        for _ in 0..1000 {
            let next = Timestamp::now();
            assert!(next > prev);
            prev = next;
        }
    }
}
