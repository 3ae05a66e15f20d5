//! Test support (feature `testing`): the subagent rows a store holds for a real-agent
//! fixture, compared with the fixture's hand-written expected rows (resolved by
//! `fanout_acp::fixtures`), for the import tests and the live runs behind the proxy.

use fanout_store::{SqlStore, SubagentRow};
use serde_json::{Map, Value, json};

use crate::ids::{session_row_id, turn_row_id};

/// Every difference between the rows stored for the expected rows' session and the
/// expected rows (a missing or extra row, a column that differs); empty when they agree.
/// The session is the one of the first expected row (`agent_execution_id`,
/// `acp_session_id`); `turn_request_id` is compared as the turn id it names.
pub async fn row_differences(store: &SqlStore, expected: &[Map<String, Value>]) -> Vec<String> {
    let Some(first) = expected.first() else {
        return vec!["no expected rows".to_owned()];
    };
    let text = |key: &str| first[key].as_str().unwrap_or_default().to_owned();
    let session = session_row_id(&text("agent_execution_id"), &text("acp_session_id"));
    let stored = match store.subagents_by_session(&session).await {
        Ok(rows) => rows,
        Err(error) => return vec![format!("reading the rows: {error}")],
    };
    let stored: Vec<Value> = stored
        .iter()
        .map(|row| {
            let turn = expected
                .iter()
                .map(|want| &want["turn_request_id"])
                .find(|request| {
                    row.turn_id.as_deref() == Some(&turn_row_id(&session, &request.to_string()))
                })
                .cloned()
                .unwrap_or(Value::Null);
            subagent_row_json(row, &first["acp_session_id"], turn)
        })
        .collect();
    let mut differences = Vec::new();
    for want in expected {
        let id = &want["tool_call_id"];
        let Some(got) = stored.iter().find(|row| row["tool_call_id"] == *id) else {
            differences.push(format!("row {id} is missing"));
            continue;
        };
        for (column, value) in want {
            if got[column] != *value {
                differences.push(format!(
                    "row {id}: {column} is {}, expected {value}",
                    got[column]
                ));
            }
        }
    }
    for got in &stored {
        if !expected
            .iter()
            .any(|want| want["tool_call_id"] == got["tool_call_id"])
        {
            differences.push(format!("row {} is not expected", got["tool_call_id"]));
        }
    }
    differences
}

/// A stored row in the fields the hand-written expectations spell (`acp_session_id`
/// and `turn_request_id` as given: the row holds the session and turn row ids).
pub fn subagent_row_json(
    row: &SubagentRow,
    acp_session_id: &Value,
    turn_request_id: Value,
) -> Value {
    json!({
        "acp_session_id": acp_session_id,
        "task_id": row.task_id,
        "agent_execution_id": row.agent_execution_id,
        "turn_request_id": turn_request_id,
        "tool_call_id": row.tool_call_id,
        "parent_tool_call_id": row.parent_tool_call_id,
        "subagent_type": row.subagent_type,
        "description": row.description,
        "agent_id": row.agent_id,
        "child_session_id": row.child_session_id,
        "model": row.model,
        "agent_status": row.agent_status,
        "tool_status": row.tool_status,
        "settled": row.settled_at.is_some(),
        "is_async": i64::from(row.is_async),
        "total_tokens": row.total_tokens,
        "tool_use_count": row.tool_use_count,
        "duration_ms": row.duration_ms,
        "source": row.source.as_str(),
    })
}
