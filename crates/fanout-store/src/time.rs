//! Canonical timestamps (DESIGN 4.3): UTC, microsecond precision, one fixed-width
//! text form `YYYY-MM-DDTHH:MM:SS.ffffffZ` so that on SQLite text order is time order.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, SubsecRound, Utc};

/// A UTC instant truncated to whole microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(DateTime<Utc>);

/// A timestamp text that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("not an RFC 3339 timestamp: {text:?}")]
pub struct TimestampError {
    pub text: String,
}

impl Timestamp {
    /// The current instant, truncated to microseconds.
    pub fn now() -> Self {
        Self::from_datetime(Utc::now())
    }

    /// Truncates (never rounds) to microseconds, so a value never moves forward in time.
    pub fn from_datetime(dt: DateTime<Utc>) -> Self {
        Self(dt.trunc_subsecs(6))
    }

    pub fn unix_micros(&self) -> i64 {
        self.0.timestamp_micros()
    }

    /// Parses any RFC 3339 form (any offset, any fraction length) into the canonical instant.
    pub fn parse(text: &str) -> Result<Self, TimestampError> {
        DateTime::parse_from_rfc3339(text.trim())
            .map(|dt| Self::from_datetime(dt.with_timezone(&Utc)))
            .map_err(|_| TimestampError {
                text: text.to_owned(),
            })
    }

    /// The canonical fixed-width text form.
    pub fn canonical(&self) -> String {
        self.0.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
    }

    /// This instant plus `micros` microseconds (negative moves back).
    pub fn plus_micros(&self, micros: i64) -> Self {
        Self(self.0 + chrono::Duration::microseconds(micros))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())
    }
}

impl FromStr for Timestamp {
    type Err = TimestampError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.canonical())
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_is_fixed_width_and_orders_like_time() {
        let whole = Timestamp::parse("2026-08-10T09:00:00Z").unwrap();
        let frac = Timestamp::parse("2026-08-10T09:00:00.123456Z").unwrap();
        assert_eq!(whole.canonical(), "2026-08-10T09:00:00.000000Z");
        assert_eq!(frac.canonical(), "2026-08-10T09:00:00.123456Z");
        assert!(whole.canonical() < frac.canonical());
        assert!(whole < frac);
    }

    #[test]
    fn parse_truncates_nanoseconds_and_converts_offsets() {
        let t = Timestamp::parse("2026-08-10T10:00:00.1234569+01:00").unwrap();
        assert_eq!(t.canonical(), "2026-08-10T09:00:00.123456Z");
    }

    #[test]
    fn parse_rejects_garbage() {
        assert!(Timestamp::parse("yesterday").is_err());
        assert!(Timestamp::parse("").is_err());
    }
}
