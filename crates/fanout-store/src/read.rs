//! Reads of stored subagent rows, in AC-13 order.

use sqlx::Row;

use crate::error::StoreError;
use crate::exec::{Reader, with_reader};
use crate::model::{Source, SubagentRow};
use crate::sql;
use crate::time::Timestamp;

/// Decodes a `task_session_subagents` row from either engine's row type.
macro_rules! decode_subagent {
    ($row:expr) => {{
        let row = $row;
        let ts = |col: &str, text: String| {
            Timestamp::parse(&text).map_err(|cause| StoreError::BadTimestamp {
                what: format!("task_session_subagents.{col}"),
                cause,
            })
        };
        let opt_ts = |col: &str, text: Option<String>| text.map(|t| ts(col, t)).transpose();
        let get = |e| StoreError::Query {
            op: "reading task_session_subagents",
            cause: e,
        };
        let source_text: String = row.try_get("source").map_err(get)?;
        SubagentRow {
            id: row.try_get("id").map_err(get)?,
            task_session_id: row.try_get("task_session_id").map_err(get)?,
            task_id: row.try_get("task_id").map_err(get)?,
            turn_id: row.try_get("turn_id").map_err(get)?,
            tool_call_id: row.try_get("tool_call_id").map_err(get)?,
            agent_execution_id: row.try_get("agent_execution_id").map_err(get)?,
            parent_tool_call_id: row.try_get("parent_tool_call_id").map_err(get)?,
            subagent_type: row.try_get("subagent_type").map_err(get)?,
            description: row.try_get("description").map_err(get)?,
            agent_id: row.try_get("agent_id").map_err(get)?,
            child_session_id: row.try_get("child_session_id").map_err(get)?,
            model: row.try_get("model").map_err(get)?,
            agent_status: row.try_get("agent_status").map_err(get)?,
            tool_status: row.try_get("tool_status").map_err(get)?,
            is_async: row.try_get::<i64, _>("is_async").map_err(get)? != 0,
            total_tokens: row.try_get("total_tokens").map_err(get)?,
            tool_use_count: row.try_get("tool_use_count").map_err(get)?,
            duration_ms: row.try_get("duration_ms").map_err(get)?,
            // Unknown provenance text can only come from another writer; call it backfill
            // so it is never counted as live capture.
            source: Source::parse(&source_text).unwrap_or(Source::Backfill),
            observed_at: ts("observed_at", row.try_get("observed_at").map_err(get)?)?,
            settled_at: opt_ts("settled_at", row.try_get("settled_at").map_err(get)?)?,
            updated_at: ts("updated_at", row.try_get("updated_at").map_err(get)?)?,
        }
    }};
}

/// The rows whose `filter_column` is `value`, in AC-13 order; `op` names the read.
pub(crate) async fn subagents_where(
    reader: Reader<'_>,
    op: &'static str,
    filter_column: &str,
    value: &str,
) -> Result<Vec<SubagentRow>, StoreError> {
    let statement = sql::select_subagents(reader.engine(), filter_column);
    with_reader!(reader.pools(), pool => {
        let rows = sqlx::query(&statement).bind(value).fetch_all(pool).await
            .map_err(StoreError::query(op))?;
        rows.iter().map(|row| Ok(decode_subagent!(row))).collect()
    })
}
