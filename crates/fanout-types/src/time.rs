//! The canonical timestamp (DESIGN 4.3): UTC, whole microseconds, one fixed-width
//! text form `YYYY-MM-DDTHH:MM:SS.ffffffZ`, so that text order is time order (on
//! SQLite, in session logs, in transcripts and stats files alike).

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, SecondsFormat, Utc};

/// A UTC instant truncated to whole microseconds. [`Display`](fmt::Display), serde
/// and [`Timestamp::canonical`] all write the canonical text; [`Timestamp::parse`],
/// [`FromStr`] and serde read any RFC 3339 form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(DateTime<Utc>);

/// A timestamp text that could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid timestamp {text:?}: expected RFC 3339, canonically YYYY-MM-DDTHH:MM:SS.ffffffZ")]
pub struct TimestampError {
    /// The rejected text.
    pub text: String,
}

/// The last value handed out by [`Timestamp::now`], in microseconds since the epoch.
static LAST_NOW_MICROS: AtomicI64 = AtomicI64::new(i64::MIN);

impl Timestamp {
    /// The current instant, truncated to microseconds. Strictly increasing within a
    /// process: two calls never return the same value, so what is observed (or
    /// created) first always has the smaller time, even within one microsecond.
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
                Ok(_) => {
                    return Self::from_micros(next)
                        .unwrap_or_else(|| Self::from_datetime(Utc::now()));
                }
                Err(seen) => prev = seen,
            }
        }
    }

    /// From any UTC instant, truncated (never rounded) to microseconds, so a value
    /// never moves forward in time.
    pub fn from_datetime(dt: DateTime<Utc>) -> Self {
        let micros = dt.timestamp_micros();
        // `timestamp_micros` floors, so this is the truncation for instants before
        // the epoch too; it is in range whenever `dt` is.
        Self(DateTime::<Utc>::from_timestamp_micros(micros).unwrap_or(dt))
    }

    /// From microseconds since the Unix epoch; `None` when out of range.
    pub fn from_micros(micros: i64) -> Option<Self> {
        DateTime::<Utc>::from_timestamp_micros(micros).map(Self)
    }

    /// Microseconds since the Unix epoch.
    pub fn unix_micros(&self) -> i64 {
        self.0.timestamp_micros()
    }

    /// Parses any RFC 3339 form (any offset, any fraction length, surrounding
    /// whitespace ignored) into the canonical instant.
    pub fn parse(text: &str) -> Result<Self, TimestampError> {
        DateTime::parse_from_rfc3339(text.trim())
            .map(|dt| Self::from_datetime(dt.with_timezone(&Utc)))
            .map_err(|_| TimestampError {
                text: text.to_owned(),
            })
    }

    /// The canonical fixed-width text form, `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
    pub fn canonical(&self) -> String {
        self.0.to_rfc3339_opts(SecondsFormat::Micros, true)
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

    /// The same as [`Timestamp::parse`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.canonical())
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
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
    fn display_serde_and_canonical_are_one_text() {
        let ts = Timestamp::from_micros(1_754_235_140_000_001).unwrap();
        assert_eq!(ts.to_string(), "2025-08-03T15:32:20.000001Z");
        assert_eq!(ts.canonical(), ts.to_string());
        let json = serde_json::to_string(&ts).unwrap();
        assert_eq!(json, "\"2025-08-03T15:32:20.000001Z\"");
        assert_eq!(serde_json::from_str::<Timestamp>(&json).unwrap(), ts);
        assert_eq!(ts.unix_micros(), 1_754_235_140_000_001);
    }

    #[test]
    fn canonical_matches_the_strftime_form_across_the_four_digit_years() {
        // The store used to render with this strftime pattern: the text stays the same.
        for text in [
            "0001-01-01T00:00:00Z",
            "1969-12-31T23:59:59.999999Z",
            "1970-01-01T00:00:00Z",
            "2026-08-10T09:00:00.000010Z",
            "9999-12-31T23:59:59.999999Z",
        ] {
            let ts = Timestamp::parse(text).unwrap();
            assert_eq!(
                ts.canonical(),
                ts.0.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
                "{text}"
            );
            assert_eq!(ts.canonical().len(), 27, "{text}");
        }
    }

    #[test]
    fn parse_truncates_nanoseconds_and_converts_offsets() {
        let t = Timestamp::parse("2026-08-10T10:00:00.1234569+01:00").unwrap();
        assert_eq!(t.canonical(), "2026-08-10T09:00:00.123456Z");
        let before_epoch = Timestamp::parse("1969-12-31T23:59:59.9999999Z").unwrap();
        assert_eq!(before_epoch.canonical(), "1969-12-31T23:59:59.999999Z");
        let parsed: Timestamp = " 2025-08-03T17:32:20.1234567+02:00\n".parse().unwrap();
        assert_eq!(parsed.canonical(), "2025-08-03T15:32:20.123456Z");
    }

    #[test]
    fn parse_rejects_garbage_and_names_it() {
        assert!(Timestamp::parse("").is_err());
        let err = "yesterday".parse::<Timestamp>().unwrap_err();
        assert_eq!(err.text, "yesterday");
        assert!(
            err.to_string()
                .starts_with("invalid timestamp \"yesterday\"")
        );
    }

    #[test]
    fn plus_micros_moves_both_ways() {
        let t = Timestamp::parse("2026-08-10T09:00:00Z").unwrap();
        assert_eq!(t.plus_micros(1).canonical(), "2026-08-10T09:00:00.000001Z");
        assert_eq!(t.plus_micros(-1).canonical(), "2026-08-10T08:59:59.999999Z");
    }

    #[test]
    fn now_is_strictly_increasing_and_truncated() {
        let mut prev = Timestamp::now();
        for _ in 0..1000 {
            let next = Timestamp::now();
            assert!(next > prev);
            assert_eq!(next.0.timestamp_subsec_nanos() % 1_000, 0);
            prev = next;
        }
    }
}
