//! Ids a live run made up, learned from its requests. An agent names its own
//! run-specific ids (a Codex subagent's thread id, say) in what it sends, and
//! a recorded answer names the recorded run's (`wait_agent` on the recorded
//! child's id). The live request of an exchange is the recorded one with the
//! run's values changed, so walking the two bodies side by side pairs each
//! recorded id with the live id at the same place; the replay server then
//! sends the live id wherever a recorded answer names the recorded one.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::normalize::uuids_in;

/// Recorded id -> live id, first pairing wins.
#[derive(Debug, Default)]
pub struct LearnedIds {
    pairs: BTreeMap<String, String>,
}

impl LearnedIds {
    /// Learns from a recorded request body and the live one it was bound to.
    pub fn learn(&mut self, recorded: &Value, live: &Value) {
        match (recorded, live) {
            (Value::String(recorded), Value::String(live)) if recorded != live => {
                let (recorded_ids, live_ids) = (uuids_in(recorded), uuids_in(live));
                if recorded_ids.len() != live_ids.len() {
                    return;
                }
                for (recorded, live) in recorded_ids.into_iter().zip(live_ids) {
                    if recorded != live {
                        self.insert(recorded, live);
                    }
                }
            }
            (Value::Array(recorded), Value::Array(live)) => {
                for (recorded, live) in recorded.iter().zip(live) {
                    self.learn(recorded, live);
                }
            }
            (Value::Object(recorded), Value::Object(live)) => {
                for (key, recorded) in recorded {
                    if let Some(live) = live.get(key) {
                        self.learn(recorded, live);
                    }
                }
            }
            _ => {}
        }
    }

    /// Pairs a recorded id with its live id (a bound identity's, say).
    pub fn insert(&mut self, recorded: String, live: String) {
        if !recorded.is_empty() && recorded != live {
            self.pairs.entry(recorded).or_insert(live);
        }
    }

    /// Every (recorded, live) pair.
    pub fn pairs(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.pairs.iter().map(|(r, l)| (r.clone(), l.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_are_paired_where_the_bodies_differ() {
        let recorded = json!({"input": [
            {"type": "message", "content": "hi"},
            {"type": "function_call_output", "output": "{\"agent_id\":\"019ad1c2-0000-7000-8000-00000000000a\"}"},
            {"other": "0198a3f2-1111-7abc-8def-0123456789ab and 0198a3f2-2222-7abc-8def-0123456789ab"}
        ], "unchanged": "0198a3f2-3333-7abc-8def-0123456789ab"});
        let live = json!({"input": [
            {"type": "message", "content": "hi"},
            {"type": "function_call_output", "output": "{\"agent_id\":\"019ad1c2-ffff-7000-8000-00000000000b\"}"},
            {"other": "0198a3f2-1111-7abc-8def-0123456789ab only"}
        ], "unchanged": "0198a3f2-3333-7abc-8def-0123456789ab"});
        let mut learned = LearnedIds::default();
        learned.learn(&recorded, &live);
        assert_eq!(
            learned.pairs().collect::<Vec<_>>(),
            [(
                "019ad1c2-0000-7000-8000-00000000000a".to_string(),
                "019ad1c2-ffff-7000-8000-00000000000b".to_string()
            )],
            "a leaf whose ids do not line up teaches nothing"
        );
        learned.insert(
            "019ad1c2-0000-7000-8000-00000000000a".into(),
            "other".into(),
        );
        assert_eq!(learned.pairs().count(), 1, "the first pairing wins");
    }
}
