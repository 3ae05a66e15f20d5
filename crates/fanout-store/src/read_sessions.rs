//! Reads for looking at runs (DESIGN 8): the sessions with their turn counts, the turns
//! of a session, session ids by prefix or by the harness's own id, subagent rows and
//! ledger cells (usage summed per session, turn, attribution and model) in a scope, and
//! a cheap change marker for live views. Nothing here writes.

use serde::Serialize;

use crate::cost::UsageCell;
use crate::error::StoreError;
use crate::exec::Reader;
use crate::model::{SubagentRow, TokenCounts};
use crate::read::RawSubagentRow;
use crate::report::ReportScope;
use crate::report::fetch_all;
use crate::report::sql::{Binds, Statement};
use crate::sql::{SUBAGENT_COLUMNS, USAGE_TOKEN_COLUMNS, select_list};
use crate::usage::TokenTotals;
use fanout_types::Timestamp;

/// Which sessions [`crate::SqlStore::sessions`] lists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionFilter {
    /// Only this task's sessions.
    pub task_id: Option<String>,
    /// Only sessions started at or after this instant.
    pub since: Option<Timestamp>,
    /// Only sessions started before this instant.
    pub until: Option<Timestamp>,
    /// Only this session (its full `task_sessions.id`): one row by its key, where a
    /// caller that wants one session would otherwise read them all.
    pub session_id: Option<String>,
}

/// One `task_sessions` row with the figures a list needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SessionRow {
    /// `task_sessions.id`.
    pub id: String,
    /// The task.
    pub task_id: String,
    /// The harness's own session id (ACP `sessionId`, Claude or Codex session id).
    pub acp_session_id: Option<String>,
    /// The proxy run that saw it first.
    pub agent_execution_id: Option<String>,
    /// The agent command line (live capture).
    pub agent_command: Option<String>,
    /// The working directory.
    pub cwd: Option<String>,
    /// The first frame.
    pub started_at: Timestamp,
    /// When it ended, if known.
    pub completed_at: Option<Timestamp>,
    /// The latest write.
    pub updated_at: Timestamp,
    /// Its turns.
    pub turns: i64,
    /// The ledger's source for it (`claude-log`, `codex-rollout`, `acp`), the first by
    /// name when several; `None` without usage rows.
    pub usage_source: Option<String>,
}

/// One `task_session_turns` row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TurnRow {
    /// `task_session_turns.id`.
    pub id: String,
    /// The session.
    pub task_session_id: String,
    /// When the prompt was observed.
    pub started_at: Timestamp,
    /// When its response was observed.
    pub completed_at: Option<Timestamp>,
    /// `stopReason`, or `error: …`.
    pub stop_reason: Option<String>,
}

#[derive(sqlx::FromRow)]
struct RawSessionRow {
    id: String,
    task_id: String,
    acp_session_id: Option<String>,
    agent_execution_id: Option<String>,
    agent_command: Option<String>,
    cwd: Option<String>,
    started_at: String,
    completed_at: Option<String>,
    updated_at: String,
    turns: i64,
    usage_source: Option<String>,
}

#[derive(sqlx::FromRow)]
struct RawTurnRow {
    id: String,
    task_session_id: String,
    started_at: String,
    completed_at: Option<String>,
    stop_reason: Option<String>,
}

#[derive(sqlx::FromRow)]
struct RawCell {
    task_session_id: String,
    task_id: String,
    turn_id: Option<String>,
    subagent_tool_call_id: Option<String>,
    model: Option<String>,
    responses: i64,
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    cache_creation_tokens: Option<i64>,
    cache_read_tokens: Option<i64>,
    reasoning_tokens: Option<i64>,
}

#[derive(sqlx::FromRow)]
struct RawId {
    id: String,
}

#[derive(sqlx::FromRow)]
struct RawMarker {
    marker: Option<String>,
}

fn timestamp(what: &str, text: &str) -> Result<Timestamp, StoreError> {
    Timestamp::parse(text).map_err(|cause| StoreError::BadTimestamp {
        what: what.to_owned(),
        cause,
    })
}

fn optional_timestamp(what: &str, text: Option<&str>) -> Result<Option<Timestamp>, StoreError> {
    text.map(|t| timestamp(what, t)).transpose()
}

/// The sessions `filter` selects, newest first.
pub(crate) async fn sessions(
    reader: Reader<'_>,
    filter: &SessionFilter,
) -> Result<Vec<SessionRow>, StoreError> {
    let e = reader.engine();
    let mut binds = Binds::new(e);
    let mut predicates = vec!["1 = 1".to_owned()];
    if let Some(task) = &filter.task_id {
        predicates.push(format!("s.task_id = {}", binds.text(task)));
    }
    if let Some(id) = &filter.session_id {
        predicates.push(format!("s.id = {}", binds.text(id)));
    }
    if let Some(since) = filter.since {
        predicates.push(format!("s.started_at >= {}", binds.timestamp(Some(since))));
    }
    if let Some(until) = filter.until {
        predicates.push(format!("s.started_at < {}", binds.timestamp(Some(until))));
    }
    let sql = format!(
        "SELECT s.id, s.task_id, s.acp_session_id, s.agent_execution_id, s.agent_command, s.cwd,
           {} AS started_at, {} AS completed_at, {} AS updated_at,
           (SELECT COUNT(*) FROM task_session_turns t WHERE t.task_session_id = s.id) AS turns,
           (SELECT MIN(u.source) FROM task_session_usage u WHERE u.task_session_id = s.id) AS usage_source
         FROM task_sessions s WHERE {}
         ORDER BY s.started_at DESC, s.id",
        e.ts_out("s.started_at"),
        e.ts_out("s.completed_at"),
        e.ts_out("s.updated_at"),
        predicates.join(" AND ")
    );
    let statement = binds.finish(sql);
    let rows: Vec<RawSessionRow> = fetch_all(reader, "sessions", &statement).await?;
    rows.into_iter()
        .map(|r| {
            Ok(SessionRow {
                started_at: timestamp("task_sessions.started_at", &r.started_at)?,
                completed_at: optional_timestamp(
                    "task_sessions.completed_at",
                    r.completed_at.as_deref(),
                )?,
                updated_at: timestamp("task_sessions.updated_at", &r.updated_at)?,
                id: r.id,
                task_id: r.task_id,
                acp_session_id: r.acp_session_id,
                agent_execution_id: r.agent_execution_id,
                agent_command: r.agent_command,
                cwd: r.cwd,
                turns: r.turns,
                usage_source: r.usage_source,
            })
        })
        .collect()
}

/// The ids of the sessions `text` names: its exact id; else the ids it is a prefix of;
/// else the sessions whose harness id is `text`, or starts with it. Sorted.
pub(crate) async fn session_ids_matching(
    reader: Reader<'_>,
    text: &str,
) -> Result<Vec<String>, StoreError> {
    // LIKE patterns need their wildcards escaped; the same escape works on both engines.
    let escaped: String = text
        .chars()
        .flat_map(|c| match c {
            '%' | '_' | '\\' => vec!['\\', c],
            c => vec![c],
        })
        .collect();
    let pattern = format!("{escaped}%");
    for (column, exact) in [
        ("id", true),
        ("id", false),
        ("acp_session_id", true),
        ("acp_session_id", false),
    ] {
        let mut binds = Binds::new(reader.engine());
        let condition = if exact {
            format!("{column} = {}", binds.text(text))
        } else {
            format!("{column} LIKE {} ESCAPE '\\'", binds.text(&pattern))
        };
        let statement = binds.finish(format!(
            "SELECT id FROM task_sessions WHERE {condition} ORDER BY id"
        ));
        let ids: Vec<RawId> = fetch_all(reader, "session lookup", &statement).await?;
        if !ids.is_empty() {
            let mut ids: Vec<String> = ids.into_iter().map(|r| r.id).collect();
            ids.dedup();
            return Ok(ids);
        }
    }
    Ok(Vec::new())
}

/// The turns of one session, by start.
pub(crate) async fn turns_of(
    reader: Reader<'_>,
    session_id: &str,
) -> Result<Vec<TurnRow>, StoreError> {
    let e = reader.engine();
    let mut binds = Binds::new(e);
    let sql = format!(
        "SELECT id, task_session_id, {} AS started_at, {} AS completed_at, stop_reason
         FROM task_session_turns WHERE task_session_id = {} ORDER BY started_at, id",
        e.ts_out("started_at"),
        e.ts_out("completed_at"),
        binds.text(session_id)
    );
    let rows: Vec<RawTurnRow> = fetch_all(reader, "turns of a session", &binds.finish(sql)).await?;
    rows.into_iter()
        .map(|r| {
            Ok(TurnRow {
                started_at: timestamp("task_session_turns.started_at", &r.started_at)?,
                completed_at: optional_timestamp(
                    "task_session_turns.completed_at",
                    r.completed_at.as_deref(),
                )?,
                id: r.id,
                task_session_id: r.task_session_id,
                stop_reason: r.stop_reason,
            })
        })
        .collect()
}

/// The subagent rows in `scope` (a window selects by `observed_at`), in AC-13 order
/// within each session.
pub(crate) async fn subagents_in(
    reader: Reader<'_>,
    scope: &ReportScope,
) -> Result<Vec<SubagentRow>, StoreError> {
    let e = reader.engine();
    let mut binds = Binds::new(e);
    let in_scope = scope.predicate(&mut binds, "s", "observed_at");
    let sql = format!(
        "SELECT {} FROM task_session_subagents s WHERE {in_scope} \
         ORDER BY task_session_id, observed_at, tool_call_id, agent_execution_id",
        select_list(e, &SUBAGENT_COLUMNS)
    );
    let rows: Vec<RawSubagentRow> =
        fetch_all(reader, "subagents in scope", &binds.finish(sql)).await?;
    rows.into_iter().map(SubagentRow::try_from).collect()
}

/// The ledger in `scope` (a window selects by `observed_at`), summed per session, turn,
/// attribution and model.
pub(crate) async fn usage_cells(
    reader: Reader<'_>,
    scope: &ReportScope,
) -> Result<Vec<UsageCell>, StoreError> {
    let mut binds = Binds::new(reader.engine());
    let in_scope = scope.predicate(&mut binds, "u", "observed_at");
    let sums: Vec<String> = USAGE_TOKEN_COLUMNS
        .iter()
        .map(|c| format!("CAST(SUM(u.{c}) AS BIGINT) AS {c}"))
        .collect();
    let keys = "u.task_session_id, u.task_id, u.turn_id, u.subagent_tool_call_id, u.model";
    let sql = format!(
        "SELECT {keys}, COUNT(*) AS responses, {} FROM task_session_usage u WHERE {in_scope} \
         GROUP BY {keys} ORDER BY {keys}",
        sums.join(", ")
    );
    let statement: Statement = binds.finish(sql);
    let rows: Vec<RawCell> = fetch_all(reader, "usage cells", &statement).await?;
    Ok(rows
        .into_iter()
        .map(|r| UsageCell {
            task_session_id: r.task_session_id,
            task_id: r.task_id,
            turn_id: r.turn_id,
            subagent_tool_call_id: r.subagent_tool_call_id,
            model: r.model,
            totals: TokenTotals {
                responses: r.responses,
                tokens: TokenCounts {
                    input_tokens: r.input_tokens,
                    output_tokens: r.output_tokens,
                    cache_creation_tokens: r.cache_creation_tokens,
                    cache_read_tokens: r.cache_read_tokens,
                    reasoning_tokens: r.reasoning_tokens,
                },
            },
        })
        .collect())
}

/// A text that changes whenever a row of sessions, turns, subagents or the ledger is
/// written: the counts and latest `updated_at` of each (what a live view polls, one
/// cheap statement, instead of watching files).
pub(crate) async fn change_marker(reader: Reader<'_>) -> Result<String, StoreError> {
    let e = reader.engine();
    let part = |table: &str| {
        format!(
            "(SELECT CAST(COUNT(*) AS TEXT) || '/' || COALESCE({}, '') FROM {table})",
            e.ts_out("MAX(updated_at)")
        )
    };
    let sql = format!(
        "SELECT {} || ';' || {} || ';' || {} || ';' || {} AS marker",
        part("task_sessions"),
        part("task_session_turns"),
        part("task_session_subagents"),
        part("task_session_usage"),
    );
    let rows: Vec<RawMarker> =
        fetch_all(reader, "change marker", &Binds::new(e).finish(sql)).await?;
    Ok(rows
        .into_iter()
        .next()
        .and_then(|r| r.marker)
        .unwrap_or_default())
}
