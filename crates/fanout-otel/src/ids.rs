//! Trace and span ids derived from the rows' keys (DESIGN 12), so exporting the same
//! rows twice sends the same ids and a receiver that keys spans by id keeps one copy.
//!
//! A trace is one turn: the first 16 bytes of SHA-256 over a length-prefixed
//! (`fanout.trace`, session id, turn id) — `no-turn` for the root of a session's
//! invocations of no known turn. A span is one row of a session: the first 8 bytes of
//! SHA-256 over (`fanout.span`, session id, the row's [`ExportKey`] text). The prefixes
//! keep the two kinds apart; an all-zero id (invalid in OTLP) is never returned.

use fanout_store::ExportKey;
use opentelemetry::trace::{SpanId, TraceId};
use sha2::{Digest, Sha256};

fn digest(parts: &[&str]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for part in parts {
        // Length-prefixed, so no choice of ids makes two key lists hash alike.
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.finalize().into()
}

/// The trace of one turn of a session (`turn_id` `None`: the session's invocations of
/// no known turn).
pub fn trace_id(session_id: &str, turn_id: Option<&str>) -> TraceId {
    let hash = digest(&["fanout.trace", session_id, turn_id.unwrap_or("no-turn")]);
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&hash[..16]);
    if bytes == [0; 16] {
        bytes[15] = 1;
    }
    TraceId::from_bytes(bytes)
}

/// The span of one row of a session.
pub fn span_id(session_id: &str, key: &ExportKey) -> SpanId {
    let hash = digest(&["fanout.span", session_id, &key.text()]);
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&hash[..8]);
    if bytes == [0; 8] {
        bytes[7] = 1;
    }
    SpanId::from_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_distinct_per_key() {
        let turn = ExportKey::Turn("t1".into());
        assert_eq!(span_id("s1", &turn), span_id("s1", &turn));
        assert_ne!(span_id("s1", &turn), span_id("s2", &turn));
        assert_ne!(
            span_id("s1", &turn),
            span_id("s1", &ExportKey::Invocation("t1".into()))
        );
        assert_eq!(trace_id("s1", Some("t1")), trace_id("s1", Some("t1")));
        assert_ne!(trace_id("s1", Some("t1")), trace_id("s1", None));
        // Length-prefixed: moving a character between parts changes the id.
        assert_ne!(trace_id("s1a", Some("b")), trace_id("s1", Some("ab")));
        // Pinned (computed apart, by Python hashlib over the same framing), so a change of
        // derivation, which would send every span again under new ids, is seen.
        assert_eq!(
            trace_id("s1", Some("t1")).to_string(),
            "eadecb4a96392ab1bbc4e185351eecbd"
        );
        assert_ne!(span_id("s1", &turn), SpanId::INVALID);
    }
}
