//! Reads of stored subagent rows, in AC-13 order, and of `import_files`.

use crate::error::StoreError;
use crate::exec::Reader;
use crate::model::{ImportFileRecord, Source, SubagentRow};
use crate::sql;
use fanout_types::Timestamp;

/// A `task_session_subagents` row as [`sql::select_subagents`] returns it on either
/// engine: timestamps as canonical text, `is_async` and `source` as stored.
#[derive(sqlx::FromRow)]
pub(crate) struct RawSubagentRow {
    id: String,
    task_session_id: String,
    task_id: String,
    turn_id: Option<String>,
    tool_call_id: String,
    agent_execution_id: String,
    parent_tool_call_id: Option<String>,
    subagent_type: Option<String>,
    description: Option<String>,
    agent_id: Option<String>,
    child_session_id: Option<String>,
    model: Option<String>,
    agent_status: Option<String>,
    tool_status: Option<String>,
    is_async: i64,
    total_tokens: Option<i64>,
    tool_use_count: Option<i64>,
    duration_ms: Option<i64>,
    source: String,
    observed_at: String,
    settled_at: Option<String>,
    updated_at: String,
}

fn timestamp(column: &str, text: &str) -> Result<Timestamp, StoreError> {
    Timestamp::parse(text).map_err(|cause| StoreError::BadTimestamp {
        what: format!("task_session_subagents.{column}"),
        cause,
    })
}

impl TryFrom<RawSubagentRow> for SubagentRow {
    type Error = StoreError;

    fn try_from(raw: RawSubagentRow) -> Result<Self, StoreError> {
        Ok(SubagentRow {
            observed_at: timestamp("observed_at", &raw.observed_at)?,
            settled_at: raw
                .settled_at
                .as_deref()
                .map(|t| timestamp("settled_at", t))
                .transpose()?,
            updated_at: timestamp("updated_at", &raw.updated_at)?,
            id: raw.id,
            task_session_id: raw.task_session_id,
            task_id: raw.task_id,
            turn_id: raw.turn_id,
            tool_call_id: raw.tool_call_id,
            agent_execution_id: raw.agent_execution_id,
            parent_tool_call_id: raw.parent_tool_call_id,
            subagent_type: raw.subagent_type,
            description: raw.description,
            agent_id: raw.agent_id,
            child_session_id: raw.child_session_id,
            model: raw.model,
            agent_status: raw.agent_status,
            tool_status: raw.tool_status,
            is_async: raw.is_async != 0,
            total_tokens: raw.total_tokens,
            tool_use_count: raw.tool_use_count,
            duration_ms: raw.duration_ms,
            // Unknown provenance text can only come from another writer; call it backfill
            // so it is never counted as live capture.
            source: Source::parse(&raw.source).unwrap_or(Source::Backfill),
        })
    }
}

/// The rows whose `filter_column` is `value`, in AC-13 order; `op` names the read.
pub(crate) async fn subagents_where(
    reader: Reader<'_>,
    op: &'static str,
    filter_column: &str,
    value: &str,
) -> Result<Vec<SubagentRow>, StoreError> {
    let statement = sql::select_subagents(reader.engine(), filter_column);
    let rows: Vec<RawSubagentRow> = reader.fetch_all(op, &statement, &[Some(value)]).await?;
    rows.into_iter().map(SubagentRow::try_from).collect()
}

/// An `import_files` row as [`sql::select_import_files`] returns it.
#[derive(sqlx::FromRow)]
pub(crate) struct RawImportFile {
    pub(crate) path: String,
    pub(crate) size: i64,
    pub(crate) mtime: i64,
    pub(crate) head_sha256: String,
    pub(crate) byte_offset: i64,
    pub(crate) imported_at: String,
}

impl RawImportFile {
    pub(crate) fn into_record(self) -> Result<ImportFileRecord, StoreError> {
        Ok(ImportFileRecord {
            imported_at: Timestamp::parse(&self.imported_at).map_err(|cause| {
                StoreError::BadTimestamp {
                    what: "import_files.imported_at".to_owned(),
                    cause,
                }
            })?,
            path: self.path,
            size: self.size,
            mtime: self.mtime,
            head_sha256: self.head_sha256,
            offset: self.byte_offset,
        })
    }
}

/// Every `import_files` row, by path.
pub(crate) async fn import_files(reader: Reader<'_>) -> Result<Vec<ImportFileRecord>, StoreError> {
    let statement = sql::select_import_files(reader.engine());
    let rows: Vec<RawImportFile> = reader
        .fetch_all("import files read", &statement, &[])
        .await?;
    rows.into_iter().map(RawImportFile::into_record).collect()
}
