//! What an OTLP export reads and remembers (DESIGN 12): the sessions with turns in an
//! export's scope (or only those with something a receiver has not taken yet), one
//! session's turns, subagent rows and ledger cells, and the `otlp_exports` marks: which
//! spans a receiver took, written once each. The span mapping and the sending belong to
//! the exporter (`fanout-otel`); this knows keys and rows, never spans.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::cost::UsageCell;
use crate::error::StoreError;
use crate::exec::{Pools, Reader};
use crate::model::SubagentRow;
use crate::read_sessions::{self, SessionFilter, SessionRow, TurnRow};
use crate::report::sql::Binds;
use crate::report::{ReportScope, fetch_all};
use fanout_types::Timestamp;

/// Which turns an export reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportScope {
    /// Only this task's turns.
    pub task_id: Option<String>,
    /// Only turns started at or after this instant (invocations of no known turn: only
    /// those observed at or after it).
    pub since: Option<Timestamp>,
    /// Only sessions with a span this receiver has not taken ([`ExportMark::receiver`]).
    pub pending_for: Option<String>,
}

/// The row a span stands for, within its session: the key of an export mark.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum ExportKey {
    /// A turn (`task_session_turns.id`): the root of its trace.
    Turn(String),
    /// An invocation, by its `tool_call_id` (the tree's key: one row per launch).
    Invocation(String),
    /// The root that holds the session's invocations of no known turn.
    NoTurn,
}

impl ExportKey {
    /// The text stored in `otlp_exports.span_key`: `turn:<id>`, `call:<tool_call_id>`
    /// or `no-turn`.
    pub fn text(&self) -> String {
        match self {
            ExportKey::Turn(id) => format!("turn:{id}"),
            ExportKey::Invocation(call) => format!("call:{call}"),
            ExportKey::NoTurn => "no-turn".to_owned(),
        }
    }

    /// The key whose [`ExportKey::text`] is `text`; `None` for text of another writer.
    pub fn parse(text: &str) -> Option<ExportKey> {
        if let Some(id) = text.strip_prefix("turn:") {
            Some(ExportKey::Turn(id.to_owned()))
        } else if let Some(call) = text.strip_prefix("call:") {
            Some(ExportKey::Invocation(call.to_owned()))
        } else {
            (text == "no-turn").then_some(ExportKey::NoTurn)
        }
    }
}

/// One span a receiver took: a row of `otlp_exports`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExportMark {
    /// Who took it: the receiver's endpoint (no credentials).
    pub receiver: String,
    /// `task_sessions.id` of the span's session.
    pub task_session_id: String,
    /// The row it stands for.
    pub key: ExportKey,
    /// The trace id sent, lowercase hex.
    pub trace_id: String,
    /// The span id sent, lowercase hex.
    pub span_id: String,
    /// Sent before its row settled (it ended with its turn).
    pub unsettled: bool,
    /// When the receiver took it.
    pub exported_at: Timestamp,
}

/// One session's part of an export.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportSession {
    /// The session row.
    pub session: SessionRow,
    /// Every turn of the session, by start (the tree needs them all to place each
    /// invocation; which of them an export sends is the exporter's, by the scope).
    pub turns: Vec<TurnRow>,
    /// Every subagent row of the session, in AC-13 order (a tree needs them all).
    pub rows: Vec<SubagentRow>,
    /// Every ledger cell of the session.
    pub cells: Vec<UsageCell>,
    /// The spans of this session that [`ExportScope::pending_for`] already took (empty
    /// without a receiver).
    pub exported: BTreeSet<ExportKey>,
}

#[derive(sqlx::FromRow)]
struct RawId {
    id: String,
}

#[derive(sqlx::FromRow)]
struct RawKey {
    span_key: String,
}

/// `NOT EXISTS` a mark of `receiver` for `key_sql` in `session_sql`.
fn not_marked(binds: &mut Binds, receiver: &str, session_sql: &str, key_sql: &str) -> String {
    format!(
        "NOT EXISTS (SELECT 1 FROM otlp_exports e WHERE e.receiver = {} \
         AND e.task_session_id = {session_sql} AND e.span_key = {key_sql})",
        binds.text(receiver)
    )
}

/// The ids of the sessions with a turn in `scope`, or with invocations of no known turn
/// in it; with a receiver, only those with a span it has not taken. Sorted.
pub(crate) async fn export_session_ids(
    reader: Reader<'_>,
    scope: &ExportScope,
) -> Result<Vec<String>, StoreError> {
    let mut binds = Binds::new(reader.engine());
    let mut turn_where = vec!["1 = 1".to_owned()];
    let mut orphan_where = vec![
        "(s.turn_id IS NULL OR NOT EXISTS \
         (SELECT 1 FROM task_session_turns o WHERE o.id = s.turn_id))"
            .to_owned(),
    ];
    let mut narrow = Vec::new();
    if let Some(task_id) = &scope.task_id {
        narrow.push(ReportScope::Task {
            task_id: task_id.clone(),
        });
    }
    if let Some(since) = scope.since {
        narrow.push(ReportScope::Window {
            since: Some(since),
            until: None,
        });
    }
    for part in &narrow {
        turn_where.push(part.predicate(&mut binds, "t", "started_at"));
        orphan_where.push(part.predicate(&mut binds, "s", "observed_at"));
    }
    if let Some(receiver) = &scope.pending_for {
        let turn_unsent = not_marked(&mut binds, receiver, "t.task_session_id", "'turn:' || t.id");
        let call_unsent = not_marked(
            &mut binds,
            receiver,
            "c.task_session_id",
            "'call:' || c.tool_call_id",
        );
        turn_where.push(format!(
            "({turn_unsent} OR EXISTS (SELECT 1 FROM task_session_subagents c \
             WHERE c.turn_id = t.id AND c.task_session_id = t.task_session_id AND {call_unsent}))"
        ));
        orphan_where.push(not_marked(
            &mut binds,
            receiver,
            "s.task_session_id",
            "'call:' || s.tool_call_id",
        ));
    }
    let sql = format!(
        "SELECT id FROM (\
           SELECT t.task_session_id AS id FROM task_session_turns t WHERE {} \
           UNION SELECT s.task_session_id AS id FROM task_session_subagents s WHERE {}\
         ) u ORDER BY id",
        turn_where.join(" AND "),
        orphan_where.join(" AND ")
    );
    let rows: Vec<RawId> = fetch_all(reader, "export sessions", &binds.finish(sql)).await?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

/// One session's part of an export (only the marks depend on the scope: its receiver's);
/// `None` when the session is gone.
pub(crate) async fn export_session(
    reader: Reader<'_>,
    session_id: &str,
    scope: &ExportScope,
) -> Result<Option<ExportSession>, StoreError> {
    let only = SessionFilter {
        session_id: Some(session_id.to_owned()),
        ..SessionFilter::default()
    };
    let Some(session) = read_sessions::sessions(reader, &only).await?.pop() else {
        return Ok(None);
    };
    let in_session = ReportScope::Session {
        session_id: session_id.to_owned(),
    };
    let turns = read_sessions::turns_of(reader, session_id).await?;
    let rows = read_sessions::subagents_in(reader, &in_session).await?;
    let cells = read_sessions::usage_cells(reader, &in_session).await?;
    let exported = match &scope.pending_for {
        Some(receiver) => exported_keys(reader, receiver, session_id).await?,
        None => BTreeSet::new(),
    };
    Ok(Some(ExportSession {
        session,
        turns,
        rows,
        cells,
        exported,
    }))
}

async fn exported_keys(
    reader: Reader<'_>,
    receiver: &str,
    session_id: &str,
) -> Result<BTreeSet<ExportKey>, StoreError> {
    let mut binds = Binds::new(reader.engine());
    let sql = format!(
        "SELECT span_key FROM otlp_exports WHERE receiver = {} AND task_session_id = {}",
        binds.text(receiver),
        binds.text(session_id)
    );
    let rows: Vec<RawKey> = fetch_all(reader, "export marks", &binds.finish(sql)).await?;
    Ok(rows
        .iter()
        .filter_map(|r| ExportKey::parse(&r.span_key))
        .collect())
}

/// How many marks one statement writes (7 binds each: well under either engine's limit).
const MARKS_PER_STATEMENT: usize = 256;

/// Writes the marks, each once: a mark already there is kept (`DO NOTHING`), so the
/// first export of a span is the one remembered. Returns how many were new.
pub(crate) async fn record_exports(pools: &Pools, marks: &[ExportMark]) -> Result<u64, StoreError> {
    let e = pools.engine();
    let mut written = 0;
    for chunk in marks.chunks(MARKS_PER_STATEMENT) {
        let mut values = Vec::with_capacity(chunk.len());
        let mut binds: Vec<String> = Vec::with_capacity(chunk.len() * 6);
        for mark in chunk {
            let n = binds.len();
            values.push(format!(
                "(${}, ${}, ${}, ${}, ${}, {}, {})",
                n + 1,
                n + 2,
                n + 3,
                n + 4,
                n + 5,
                // Not a value of anyone's: 0 or 1, written out (the engines bind text).
                i64::from(mark.unsettled),
                e.ts_param(n + 6)
            ));
            binds.extend([
                mark.receiver.clone(),
                mark.task_session_id.clone(),
                mark.key.text(),
                mark.trace_id.clone(),
                mark.span_id.clone(),
                mark.exported_at.canonical(),
            ]);
        }
        let sql = format!(
            "INSERT INTO otlp_exports (receiver, task_session_id, span_key, trace_id, span_id, \
             unsettled, exported_at) VALUES {} \
             ON CONFLICT (receiver, task_session_id, span_key) DO NOTHING",
            values.join(", ")
        );
        let binds: Vec<&str> = binds.iter().map(String::as_str).collect();
        written += pools
            .execute(&sql, &binds)
            .await
            .map_err(StoreError::query("export marks write"))?;
    }
    Ok(written)
}
