//! Normalisation: what differs between two runs of the same scenario (paths,
//! session ids, other UUIDs, timestamps, durations) is collapsed to stable
//! placeholders, and nothing else is touched.
//!
//! Normalised session logs must stay valid logs, because a scenario's expected
//! logs are also what replay reads. So timestamps are not blanked but mapped
//! to their rank: the k-th distinct instant of the run becomes
//! `2000-01-01T00:00:00Z` plus k milliseconds, which keeps their order (and so
//! the `createdAt` order of the scripts), and durations become `0`.
//!
//! One more thing differs between runs without meaning anything: the last bits of a
//! float an agent sums in whatever order its subagents end (Claude Code's session cost
//! printed `0.0933084` in one run and `0.09330839999999999` in the next). A decimal
//! printed with more than 15 significant digits is rounded to 15, which a double
//! always holds, so both read `0.0933084`.

use std::collections::HashMap;

use fanout_sessionlog::Timestamp;

/// The instant the first normalised timestamp maps to.
const TIMESTAMP_BASE_MICROS: i64 = 946_684_800_000_000; // 2000-01-01T00:00:00Z
/// The spacing of normalised timestamps.
const TIMESTAMP_STEP_MICROS: i64 = 1_000;
/// JSON keys whose numeric values are wall-clock durations.
const DURATION_KEYS: [&str; 3] = ["\"durationMs\"", "\"duration_ms\"", "\"totalDurationMs\""];
/// A duration written as text (Claude Code's `<usage>` block in a tool result).
const TEXT_DURATION_KEY: &str = "duration_ms: ";
/// The shortest run of hex digits numbered as an id (with `number_hex_ids`).
const MIN_HEX_ID_LEN: usize = 16;
/// OpenCode's ids (`msg_`, `prt_`, `per_`, `ses_` …): a short lower-case
/// prefix, `_`, 12 hex digits of time and 14 random alphanumerics.
const PREFIXED_ID_TIME_LEN: usize = 12;
const PREFIXED_ID_RANDOM_LEN: usize = 14;

/// Collapses run-specific text to placeholders. Build it once per run (it
/// numbers UUIDs by first appearance across every document it normalises).
#[derive(Debug, Clone, Default)]
pub struct Normalizer {
    /// Literal text -> placeholder, longest first.
    literals: Vec<(String, String)>,
    /// Lower-case UUID -> placeholder.
    uuids: HashMap<String, String>,
    next_uuid: usize,
    /// Timestamp text -> its rank-mapped canonical text.
    timestamps: HashMap<String, String>,
    /// Whether runs of hex digits (agent ids, device ids) are numbered too.
    hex_ids: bool,
    /// Lower-case hex id -> placeholder.
    hexes: HashMap<String, String>,
    /// Prefixed id -> placeholder; prefix -> how many were numbered.
    prefixed: HashMap<String, String>,
    prefix_counts: HashMap<String, usize>,
}

impl Normalizer {
    /// A normaliser with no known paths or ids.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also numbers standalone runs of 16 or more hex digits (`<hex-N>`, by
    /// first appearance) and OpenCode-style prefixed ids (`msg_…` ->
    /// `<msg-N>`): the ids a third-party agent makes up per run.
    pub fn number_hex_ids(&mut self) {
        self.hex_ids = true;
    }

    /// Replaces every occurrence of `text` (and its JSON-escaped form) with
    /// `placeholder`. Empty text is ignored.
    pub fn literal(&mut self, text: &str, placeholder: &str) {
        if text.is_empty() {
            return;
        }
        let mut forms = vec![text.to_string()];
        if let Ok(quoted) = serde_json::to_string(text) {
            let escaped = quoted[1..quoted.len() - 1].to_string();
            if escaped != text {
                forms.push(escaped);
            }
        }
        for form in forms {
            if !self.literals.iter().any(|(known, _)| *known == form) {
                self.literals.push((form, placeholder.to_string()));
            }
        }
        // Longest first, so a path is replaced before any of its prefixes.
        self.literals
            .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
    }

    /// Names a session id: the id itself is replaced literally, and as a UUID
    /// (any case) too.
    pub fn session(&mut self, id: &str, placeholder: &str) {
        self.literal(id, placeholder);
        if is_uuid(id.as_bytes()) {
            self.uuids
                .insert(id.to_ascii_lowercase(), placeholder.to_string());
        }
    }

    /// Learns every timestamp in `documents` and maps each distinct instant to
    /// its rank. Call once with all documents of a run before normalising.
    pub fn learn_timestamps<'a>(&mut self, documents: impl IntoIterator<Item = &'a str>) {
        let mut found: Vec<(Timestamp, String)> = Vec::new();
        for document in documents {
            let bytes = document.as_bytes();
            let mut at = 0;
            while at < bytes.len() {
                if let Some(len) = timestamp_len(&bytes[at..]) {
                    let text = &document[at..at + len];
                    if let Ok(instant) = text.parse::<Timestamp>() {
                        found.push((instant, text.to_string()));
                    }
                    at += len;
                } else {
                    at += 1;
                }
            }
        }
        found.sort();
        let mut rank: i64 = -1;
        let mut last: Option<Timestamp> = None;
        for (instant, text) in found {
            if last != Some(instant) {
                rank += 1;
                last = Some(instant);
            }
            let mapped =
                Timestamp::from_micros(TIMESTAMP_BASE_MICROS + rank * TIMESTAMP_STEP_MICROS)
                    .map(|t| t.to_string())
                    .unwrap_or_else(|| "<timestamp>".to_string());
            self.timestamps.insert(text, mapped);
        }
    }

    /// Normalises one document.
    pub fn normalize(&mut self, text: &str) -> String {
        let mut text = text.to_string();
        for (literal, placeholder) in &self.literals {
            if text.contains(literal.as_str()) {
                text = text.replace(literal.as_str(), placeholder);
            }
        }
        self.scan(&text)
    }

    /// One pass over the text for UUIDs, timestamps and durations.
    fn scan(&mut self, text: &str) -> String {
        let bytes = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        let mut at = 0;
        while at < bytes.len() {
            let boundary_before = at == 0 || !bytes[at - 1].is_ascii_alphanumeric();
            if boundary_before
                && bytes.len() - at >= 36
                && is_uuid(&bytes[at..at + 36])
                && bytes
                    .get(at + 36)
                    .is_none_or(|b| !b.is_ascii_alphanumeric())
            {
                out.push_str(&text[copied..at]);
                let uuid = text[at..at + 36].to_ascii_lowercase();
                out.push_str(&self.uuid_placeholder(uuid));
                at += 36;
                copied = at;
                continue;
            }
            if boundary_before && let Some(len) = timestamp_len(&bytes[at..]) {
                let original = &text[at..at + len];
                if let Some(mapped) = self.timestamps.get(original) {
                    out.push_str(&text[copied..at]);
                    out.push_str(mapped);
                    copied = at + len;
                }
                at += len;
                continue;
            }
            if self.hex_ids
                && boundary_before
                && let Some((prefix, len)) = prefixed_id_len(&bytes[at..])
            {
                out.push_str(&text[copied..at]);
                let id = &text[at..at + len];
                let placeholder = match self.prefixed.get(id) {
                    Some(known) => known.clone(),
                    None => {
                        let prefix = &text[at..at + prefix];
                        let count = self.prefix_counts.entry(prefix.to_string()).or_default();
                        *count += 1;
                        let placeholder = format!("<{prefix}-{count}>");
                        self.prefixed.insert(id.to_string(), placeholder.clone());
                        placeholder
                    }
                };
                out.push_str(&placeholder);
                at += len;
                copied = at;
                continue;
            }
            if self.hex_ids
                && boundary_before
                && let Some(len) = hex_id_len(&bytes[at..])
            {
                out.push_str(&text[copied..at]);
                let hex = text[at..at + len].to_ascii_lowercase();
                let next = self.hexes.len() + 1;
                let placeholder = self
                    .hexes
                    .entry(hex)
                    .or_insert_with(|| format!("<hex-{next}>"))
                    .clone();
                out.push_str(&placeholder);
                at += len;
                copied = at;
                continue;
            }
            // A digit is one byte, so the slice starts on a character.
            if bytes[at].is_ascii_digit()
                && boundary_before
                && at.checked_sub(1).is_none_or(|before| bytes[before] != b'.')
                && let Some((len, rounded)) = long_decimal(&text[at..])
            {
                out.push_str(&text[copied..at]);
                out.push_str(&rounded);
                at += len;
                copied = at;
                continue;
            }
            if (bytes[at] == b'"' || bytes[at] == b'd')
                && let Some((digits_start, digits_end)) = duration_value(&bytes[at..])
            {
                out.push_str(&text[copied..at + digits_start]);
                out.push('0');
                at += digits_end;
                copied = at;
                continue;
            }
            at += 1;
        }
        out.push_str(&text[copied..]);
        out
    }

    fn uuid_placeholder(&mut self, uuid: String) -> String {
        if let Some(known) = self.uuids.get(&uuid) {
            return known.clone();
        }
        self.next_uuid += 1;
        let placeholder = format!("<uuid-{}>", self.next_uuid);
        self.uuids.insert(uuid, placeholder.clone());
        placeholder
    }
}

/// A standalone run of at least [`MIN_HEX_ID_LEN`] hex digits holding a digit
/// and a letter (so neither a number nor a word).
fn hex_id_len(bytes: &[u8]) -> Option<usize> {
    let len = bytes.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    let run = &bytes[..len];
    let standalone = bytes.get(len).is_none_or(|b| !b.is_ascii_alphanumeric());
    (len >= MIN_HEX_ID_LEN
        && standalone
        && run.iter().any(u8::is_ascii_digit)
        && run.iter().any(u8::is_ascii_alphabetic))
    .then_some(len)
}

/// An OpenCode-style id at the start of `bytes`: (prefix length, id length).
fn prefixed_id_len(bytes: &[u8]) -> Option<(usize, usize)> {
    let prefix = bytes.iter().take_while(|b| b.is_ascii_lowercase()).count();
    if !(2..=5).contains(&prefix) || bytes.get(prefix) != Some(&b'_') {
        return None;
    }
    let time = &bytes[prefix + 1..];
    let hex = time
        .iter()
        .take(PREFIXED_ID_TIME_LEN)
        .take_while(|b| b.is_ascii_hexdigit())
        .count();
    if hex < PREFIXED_ID_TIME_LEN {
        return None;
    }
    let random = &time[PREFIXED_ID_TIME_LEN..];
    let alnum = random
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric())
        .count();
    (alnum == PREFIXED_ID_RANDOM_LEN).then_some((prefix, prefix + 1 + PREFIXED_ID_TIME_LEN + alnum))
}

/// The standalone UUIDs in `text`, in order.
pub(crate) fn uuids_in(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while at + 36 <= bytes.len() {
        let boundary_before = at == 0 || !bytes[at - 1].is_ascii_alphanumeric();
        if boundary_before
            && is_uuid(&bytes[at..at + 36])
            && bytes
                .get(at + 36)
                .is_none_or(|b| !b.is_ascii_alphanumeric())
        {
            found.push(text[at..at + 36].to_string());
            at += 36;
        } else {
            at += 1;
        }
    }
    found
}

/// Whether `bytes` is exactly a UUID in 8-4-4-4-12 hex form.
fn is_uuid(bytes: &[u8]) -> bool {
    bytes.len() == 36
        && bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

/// The length of an RFC 3339 timestamp at the start of `bytes`
/// (`YYYY-MM-DDTHH:MM:SS`, optional fraction, then `Z` or `±HH:MM`).
fn timestamp_len(bytes: &[u8]) -> Option<usize> {
    const SHAPE: &[u8] = b"dddd-dd-ddTdd:dd:dd";
    if bytes.len() < SHAPE.len() + 1 {
        return None;
    }
    let shaped = SHAPE.iter().zip(bytes).all(|(want, got)| match want {
        b'd' => got.is_ascii_digit(),
        other => got == other,
    });
    if !shaped {
        return None;
    }
    let mut at = SHAPE.len();
    if bytes.get(at) == Some(&b'.') {
        let digits = bytes[at + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits == 0 {
            return None;
        }
        at += 1 + digits;
    }
    match bytes.get(at) {
        Some(b'Z') => Some(at + 1),
        Some(b'+' | b'-') => {
            let zone = bytes.get(at + 1..at + 6)?;
            let ok = zone[0].is_ascii_digit()
                && zone[1].is_ascii_digit()
                && zone[2] == b':'
                && zone[3].is_ascii_digit()
                && zone[4].is_ascii_digit();
            ok.then_some(at + 6)
        }
        _ => None,
    }
}

/// The significant digits a double always holds exactly when printed and read back.
const FLOAT_DIGITS: usize = 15;

/// At a decimal (`digits.digits`, maybe an exponent) printed with more than
/// [`FLOAT_DIGITS`] significant digits: its length and its value rounded to them.
fn long_decimal(text: &str) -> Option<(usize, String)> {
    let bytes = text.as_bytes();
    let digits = |from: usize| {
        bytes[from..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let whole = digits(0);
    if whole == 0 || bytes.get(whole) != Some(&b'.') {
        return None;
    }
    let fraction = digits(whole + 1);
    let mut len = whole + 1 + fraction;
    if fraction == 0 {
        return None;
    }
    if matches!(bytes.get(len), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(bytes.get(len + 1), Some(b'+' | b'-')));
        let exponent = digits(len + 1 + sign);
        if exponent > 0 {
            len += 1 + sign + exponent;
        }
    }
    if bytes
        .get(len)
        .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'.')
    {
        return None;
    }
    let significant = bytes[..whole + 1 + fraction]
        .iter()
        .filter(|b| b.is_ascii_digit())
        .skip_while(|b| **b == b'0')
        .count();
    if significant <= FLOAT_DIGITS {
        return None;
    }
    let value: f64 = text[..len].parse().ok()?;
    let rounded: f64 = format!("{value:.*e}", FLOAT_DIGITS - 1).parse().ok()?;
    Some((len, rounded.to_string()))
}

/// At a `"durationMs": 123` (or `duration_ms`), the byte range of the digits.
fn duration_value(bytes: &[u8]) -> Option<(usize, usize)> {
    if let Some(rest) = bytes.strip_prefix(TEXT_DURATION_KEY.as_bytes()) {
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        let start = TEXT_DURATION_KEY.len();
        return (digits > 0).then_some((start, start + digits));
    }
    let key = DURATION_KEYS
        .iter()
        .find(|key| bytes.starts_with(key.as_bytes()))?;
    let mut at = key.len();
    while bytes.get(at).is_some_and(|b| *b == b' ') {
        at += 1;
    }
    if bytes.get(at) != Some(&b':') {
        return None;
    }
    at += 1;
    while bytes.get(at).is_some_and(|b| *b == b' ') {
        at += 1;
    }
    let start = at;
    while bytes.get(at).is_some_and(u8::is_ascii_digit) {
        at += 1;
    }
    (at > start).then_some((start, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collapses_ids_paths_times_and_durations() {
        let parent = "0198a3f2-1111-7abc-8def-0123456789ab";
        let child = "0198A3F2-2222-7ABC-8DEF-0123456789AB";
        let doc = format!(
            r#"{{"id":"{parent}","cwd":"/tmp/run.x1/work","createdAt":"2025-08-03T15:32:20.000009Z"}}
{{"child":"{child}","other":"f47ac10b-58cc-4372-a567-0e02b2c3d479","ts":"2025-08-03T15:32:20.000001Z","durationMs":1234,"x":"2025-08-03T17:32:20.000009+02:00"}}
{{"again":"f47ac10b-58cc-4372-a567-0e02b2c3d479","durationMs": 7,"n":"{parent}x"}}"#
        );
        let mut n = Normalizer::new();
        n.literal("/tmp/run.x1/work", "<CWD>");
        n.literal("/tmp/run.x1", "<TMP>");
        n.session(parent, "<session>");
        n.session(&child.to_ascii_lowercase(), "<session.1>");
        n.learn_timestamps([doc.as_str()]);
        let out = n.normalize(&doc);
        assert_eq!(
            out,
            r#"{"id":"<session>","cwd":"<CWD>","createdAt":"2000-01-01T00:00:00.001000Z"}
{"child":"<session.1>","other":"<uuid-1>","ts":"2000-01-01T00:00:00.000000Z","durationMs":0,"x":"2000-01-01T00:00:00.001000Z"}
{"again":"<uuid-1>","durationMs": 0,"n":"<session>x"}"#
        );
        // Normalising is idempotent: a normalised document is a fixed point.
        let mut again = Normalizer::new();
        again.learn_timestamps([out.as_str()]);
        assert_eq!(again.normalize(&out), out);
    }

    #[test]
    fn float_noise_is_rounded_and_other_numbers_are_left_alone() {
        let mut n = Normalizer::new();
        assert_eq!(
            n.normalize(r#"{"amount":0.09330839999999999,"b":0.0933084,"c":-0.30000000000000004}"#),
            r#"{"amount":0.0933084,"b":0.0933084,"c":-0.3}"#
        );
        let kept =
            "1.2345678901234 v1.2.3456789012345678 12345678901234567 0.1e5 2.50000000000000000001x";
        assert_eq!(n.normalize(kept), kept);
        assert_eq!(n.normalize("1.00000000000000002e-7"), "0.0000001");
        assert_eq!(n.normalize("·0.30000000000000004·"), "·0.3·");
    }

    #[test]
    fn hex_ids_and_text_durations() {
        let text = r#"{"agentId":"a52c524a9f44afd3c","totalDurationMs":208,"t":"x\nduration_ms: 208</usage> a52c524a9f44afd3c 1234567890123456 deadbeefdeadbeefx"}"#;
        let mut plain = Normalizer::new();
        assert!(plain.normalize(text).contains("a52c524a9f44afd3c"));
        let mut n = Normalizer::new();
        n.number_hex_ids();
        assert_eq!(
            n.normalize(text),
            r#"{"agentId":"<hex-1>","totalDurationMs":0,"t":"x\nduration_ms: 0</usage> <hex-1> 1234567890123456 deadbeefdeadbeefx"}"#
        );
    }

    #[test]
    fn prefixed_ids_are_numbered_per_prefix() {
        let text = "msg_231a84a040014xnbvVUdEueQiA prt_231a84a040024xnbvVUdEueQiB msg_231a84a040014xnbvVUdEueQiA msg_231a84a050014xnbvVUdEueQiC msg_short x_231a84a040014xnbvVUdEueQiA";
        let mut n = Normalizer::new();
        n.number_hex_ids();
        assert_eq!(
            n.normalize(text),
            "<msg-1> <prt-1> <msg-1> <msg-2> msg_short x_231a84a040014xnbvVUdEueQiA"
        );
    }

    #[test]
    fn near_misses_are_left_alone() {
        let mut n = Normalizer::new();
        let text =
            "2025-08-03T15:32:20 x0198a3f2-1111-7abc-8def-0123456789ab \"durationMs\":\"slow\"";
        n.learn_timestamps([text]);
        assert_eq!(n.normalize(text), text);
    }
}
