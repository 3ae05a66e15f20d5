//! `_meta.fanout.subagent`: what fanout's reference agent says about a subagent tool
//! call (DESIGN 5.2). One type serves both sides of the contract: the agent writes it,
//! the fanout dialect reads it.
//!
//! Writing is plain serde. Reading is as lenient as the rest of this crate: every field
//! is optional, unknown fields are passed over, and a field of the wrong type reads as
//! absent (through the same accessors as the untyped reads, [`text`] and [`metric`])
//! instead of rejecting the whole block.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};

use crate::json::{metric, text};

/// The `_meta` key of fanout's namespace.
const NAMESPACE: &str = "fanout";
/// The key of the block inside the namespace.
const BLOCK: &str = "subagent";

/// `_meta.fanout.subagent = {childSessionId, mode, subagentType, status, model,
/// totalTokens, durationMs, toolUseCount}`.
///
/// The field names on the wire are the camelCase names above. The agent writes
/// `{status}` alone for arguments it could not read, `{mode, subagentType, status}` for
/// a refused launch, then `{childSessionId, mode, subagentType, status, model}` when
/// the child starts and all eight fields when it ends.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
// `default`: an absent field reads as `None`.
#[serde(default, rename_all = "camelCase")]
pub struct FanoutSubagentMeta {
    /// The child session's id (also linked by a `{"type":"session"}` content block).
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_text"
    )]
    pub child_session_id: Option<String>,
    /// `spawn` or `fork`.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_text"
    )]
    pub mode: Option<String>,
    /// The requested `subagent_type`. The outer `Option` is whether the field is
    /// written at all, the inner one its value: `Some(None)` is written as `null` (a
    /// launch without a type). Read as `Some(None)` when present but not a non-empty
    /// string; see [`Self::subagent_type`].
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_nullable_text"
    )]
    pub subagent_type: Option<Option<String>>,
    /// `running`, then `completed`, `cancelled` or `failed`.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_text"
    )]
    pub status: Option<String>,
    /// The model name the child runs with.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_text"
    )]
    pub model: Option<String>,
    /// Tokens used by the child's model calls.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_metric"
    )]
    pub total_tokens: Option<i64>,
    /// Wall time of the child, in milliseconds.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_metric"
    )]
    pub duration_ms: Option<i64>,
    /// Tool calls the child made.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_metric"
    )]
    pub tool_use_count: Option<i64>,
}

impl FanoutSubagentMeta {
    /// The block in a frame's `_meta`, when `_meta.fanout.subagent` is an object.
    pub fn from_meta(meta: &Value) -> Option<Self> {
        // Every field reads leniently, so an object always deserializes; `ok()`
        // only turns the impossible error into "absent".
        Self::deserialize(block(meta)?).ok()
    }

    /// The `_meta` object carrying this block: `{"fanout": {"subagent": …}}`.
    pub fn to_meta(&self) -> Value {
        json!({ NAMESPACE: { BLOCK: self } })
    }

    /// The subagent type, when written as a non-empty string.
    pub fn subagent_type(&self) -> Option<&str> {
        self.subagent_type.as_ref()?.as_deref()
    }
}

/// `_meta.fanout.subagent` when it is an object: what makes a frame fanout's.
pub(crate) fn block(meta: &Value) -> Option<&Value> {
    meta.get(NAMESPACE)?
        .get(BLOCK)
        .filter(|block| block.is_object())
}

fn lenient_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    let value = Value::deserialize(deserializer)?;
    Ok(text(Some(&value)).map(str::to_owned))
}

fn lenient_nullable_text<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Option<String>>, D::Error> {
    lenient_text(deserializer).map(Some)
}

fn lenient_metric<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    let value = Value::deserialize(deserializer)?;
    Ok(metric(Some(&value)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished() -> FanoutSubagentMeta {
        FanoutSubagentMeta {
            child_session_id: Some("child-1".into()),
            mode: Some("fork".into()),
            subagent_type: Some(None),
            status: Some("completed".into()),
            model: Some("m".into()),
            total_tokens: Some(1346),
            duration_ms: Some(0),
            tool_use_count: Some(1),
        }
    }

    #[test]
    fn writes_the_wire_names_and_reads_them_back() {
        let meta = finished().to_meta();
        // The exact bytes of the snapshot transcripts (serde_json sorts object keys).
        assert_eq!(
            meta.to_string(),
            r#"{"fanout":{"subagent":{"childSessionId":"child-1","durationMs":0,"mode":"fork","model":"m","status":"completed","subagentType":null,"toolUseCount":1,"totalTokens":1346}}}"#
        );
        assert_eq!(FanoutSubagentMeta::from_meta(&meta), Some(finished()));
    }

    #[test]
    fn unwritten_fields_are_absent_and_a_null_type_is_written() {
        let failed = FanoutSubagentMeta {
            status: Some("failed".into()),
            ..FanoutSubagentMeta::default()
        };
        assert_eq!(
            failed.to_meta().to_string(),
            r#"{"fanout":{"subagent":{"status":"failed"}}}"#
        );
        let refused = FanoutSubagentMeta {
            mode: Some("spawn".into()),
            subagent_type: Some(None),
            ..failed
        };
        assert_eq!(
            refused.to_meta().to_string(),
            r#"{"fanout":{"subagent":{"mode":"spawn","status":"failed","subagentType":null}}}"#
        );
    }

    #[test]
    fn a_wrong_typed_field_reads_as_absent_without_rejecting_the_block() {
        let meta = json!({"fanout": {"subagent": {
            "childSessionId": 7, "mode": ["spawn"], "subagentType": {"custom": {}},
            "status": "running", "model": "", "totalTokens": "10", "durationMs": 12.9,
            "toolUseCount": null, "unknown": true
        }}});
        let read = FanoutSubagentMeta::from_meta(&meta).unwrap();
        assert_eq!(
            read,
            FanoutSubagentMeta {
                subagent_type: Some(None),
                status: Some("running".into()),
                duration_ms: Some(12),
                tool_use_count: None,
                ..FanoutSubagentMeta::default()
            }
        );
        assert_eq!(read.subagent_type(), None);
    }

    #[test]
    fn only_an_object_block_is_fanout_s() {
        for meta in [
            json!({}),
            json!({"fanout": "x"}),
            json!({"fanout": {"subagent": "yes"}}),
            json!({"fanout": {"subagent": null}}),
            json!({"fanout": {"subagent": [1]}}),
            json!("fanout"),
        ] {
            assert_eq!(FanoutSubagentMeta::from_meta(&meta), None, "{meta}");
        }
        assert_eq!(
            FanoutSubagentMeta::from_meta(&json!({"fanout": {"subagent": {}}})),
            Some(FanoutSubagentMeta::default())
        );
    }
}
