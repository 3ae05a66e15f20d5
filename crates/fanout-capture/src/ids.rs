//! Deterministic row identities (DESIGN 3.2): UUID v5 of the parts, so replaying the
//! same traffic (re-import) lands on the same rows instead of duplicating them.

use uuid::Uuid;

const SESSION_NAMESPACE: Uuid = Uuid::from_u128(0x3c1e_8f0a_51d2_4b7e_9a63_0d4f_2e18_c5a1);
const TURN_NAMESPACE: Uuid = Uuid::from_u128(0x8b24_61f3_0c9d_4e5a_b7f1_52a0_9e3d_7c64);
const MESSAGE_NAMESPACE: Uuid = Uuid::from_u128(0xd05a_3e7b_2f41_4c88_8e19_6b2c_a4f0_1d93);

/// `task_sessions.id` of (execution id or `'unknown'`, ACP session id).
pub fn session_row_id(agent_execution_id: &str, acp_session_id: &str) -> String {
    v5(SESSION_NAMESPACE, agent_execution_id, acp_session_id)
}

/// `task_session_turns.id` of (session row id, prompt request id).
pub fn turn_row_id(task_session_id: &str, request_id: &str) -> String {
    v5(TURN_NAMESPACE, task_session_id, request_id)
}

/// `task_session_messages.id` of a tool call: (session row id, tool_call_id).
pub fn message_row_id(task_session_id: &str, tool_call_id: &str) -> String {
    v5(MESSAGE_NAMESPACE, task_session_id, tool_call_id)
}

/// The first part is length-prefixed, so no choice of ids can make two pairs collide.
fn v5(namespace: Uuid, first: &str, second: &str) -> String {
    let name = format!("{}:{first}{second}", first.len());
    Uuid::new_v5(&namespace, name.as_bytes()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_unambiguous() {
        assert_eq!(session_row_id("e", "s"), session_row_id("e", "s"));
        assert_ne!(session_row_id("ab", "c"), session_row_id("a", "bc"));
        assert_ne!(turn_row_id("x", "1"), message_row_id("x", "1"));
    }
}
