//! The typed values the store reads and writes. They mirror DESIGN 4.1 column by column.

use serde::Serialize;

use fanout_types::Timestamp;

/// The execution id stored when none is known (AC-31): never NULL, never empty.
pub const UNKNOWN_EXECUTION: &str = "unknown";

/// Which engine a store runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    Sqlite,
    Postgres,
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Engine::Sqlite => "sqlite",
            Engine::Postgres => "postgres",
        })
    }
}

/// Where a subagent row came from (AC-25 provenance).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Live,
    Backfill,
}

impl Source {
    pub fn as_str(&self) -> &'static str {
        match self {
            Source::Live => "live",
            Source::Backfill => "backfill",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "live" => Some(Source::Live),
            "backfill" => Some(Source::Backfill),
            _ => None,
        }
    }
}

/// One ACP session (`task_sessions`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRecord {
    pub id: String,
    pub task_id: String,
    pub acp_session_id: Option<String>,
    pub agent_execution_id: Option<String>,
    pub agent_command: Option<String>,
    pub cwd: Option<String>,
    pub started_at: Timestamp,
    pub completed_at: Option<Timestamp>,
    pub updated_at: Timestamp,
}

/// One `session/prompt` until its response (`task_session_turns`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnRecord {
    pub id: String,
    pub task_session_id: String,
    pub task_id: String,
    pub started_at: Timestamp,
    pub completed_at: Option<Timestamp>,
    pub stop_reason: Option<String>,
    pub updated_at: Timestamp,
}

/// How far one transcript is in the store (`transcript_applied`): the writes of every
/// record of the transcript of execution `execution_id` up to byte `applied_through`
/// are committed. Written in the same transaction as the writes it covers, so it can
/// never claim a write that was lost, nor miss one that landed; it only grows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TranscriptMark {
    /// The transcript's execution id (its header's `executionId`).
    pub execution_id: String,
    /// A byte offset into the transcript file: the end of the last record applied.
    pub applied_through: u64,
}

/// One message row (`task_session_messages`); tool calls keep their contract JSON in `metadata`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageRecord {
    pub id: String,
    pub task_session_id: String,
    pub task_id: Option<String>,
    pub turn_id: Option<String>,
    pub author_type: Option<String>,
    pub message_type: Option<String>,
    pub content: Option<String>,
    /// JSON text; the tool-call shape of DESIGN 4.1 is a public contract read by the backfill.
    pub metadata: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// One subagent frame, already normalised by the writer, to be merged by the upsert.
///
/// The store applies the merge rules of AC-1…AC-16 inside its conflict clause. It
/// also re-applies the value rules it can enforce locally ('' -> NULL, negative or
/// unreported metrics -> NULL, missing execution -> `'unknown'`) so that no caller
/// can store a fake 0 or an empty string.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubagentRecord {
    pub task_session_id: String,
    pub task_id: String,
    pub turn_id: Option<String>,
    pub tool_call_id: String,
    /// `None` or empty is stored as [`UNKNOWN_EXECUTION`].
    pub agent_execution_id: Option<String>,
    pub parent_tool_call_id: Option<String>,
    pub subagent_type: Option<String>,
    pub description: Option<String>,
    pub agent_id: Option<String>,
    pub child_session_id: Option<String>,
    pub model: Option<String>,
    pub agent_status: Option<String>,
    pub tool_status: Option<String>,
    pub is_async: bool,
    pub total_tokens: Option<i64>,
    pub tool_use_count: Option<i64>,
    pub duration_ms: Option<i64>,
    pub observed_at: Option<Timestamp>,
    /// Set by the writer iff `tool_status` is terminal; the store keeps the first one.
    pub settled_at: Option<Timestamp>,
}

/// One stored subagent row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SubagentRow {
    pub id: String,
    pub task_session_id: String,
    pub task_id: String,
    pub turn_id: Option<String>,
    pub tool_call_id: String,
    pub agent_execution_id: String,
    pub parent_tool_call_id: Option<String>,
    pub subagent_type: Option<String>,
    pub description: Option<String>,
    pub agent_id: Option<String>,
    pub child_session_id: Option<String>,
    pub model: Option<String>,
    pub agent_status: Option<String>,
    pub tool_status: Option<String>,
    pub is_async: bool,
    pub total_tokens: Option<i64>,
    pub tool_use_count: Option<i64>,
    pub duration_ms: Option<i64>,
    pub source: Source,
    pub observed_at: Timestamp,
    pub settled_at: Option<Timestamp>,
    pub updated_at: Timestamp,
}

/// The terminal tool statuses (AC-11) are ACP's vocabulary and fanout-acp owns the one
/// definition (DESIGN 3.4); the store re-exports it and builds its backfill SQL from it.
pub use fanout_acp::{TERMINAL_TOOL_STATUSES, is_terminal_tool_status};

/// Row counts per table, for `fanout migrate` and summaries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TableCounts {
    pub sessions: i64,
    pub turns: i64,
    pub messages: i64,
    pub subagents: i64,
    pub subagents_live: i64,
    pub subagents_backfill: i64,
}

/// The two activation keys of AC-24, as stored (the value of `backfill_through` may be `''`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Activation {
    pub capture_since: Option<String>,
    pub backfill_through: Option<String>,
}

impl Activation {
    /// Activation means both keys exist (AC-24; `''` counts as present).
    pub fn is_active(&self) -> bool {
        self.capture_since.is_some() && self.backfill_through.is_some()
    }
}

/// What the health queries of AC-28/AC-29 found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Health {
    pub activation: Activation,
    /// `None` when there is no `capture_since` (AC-28a: no verdict).
    pub figures: Option<HealthFigures>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HealthFigures {
    pub since: Timestamp,
    /// Subagent messages with no subagent row: the alarm.
    pub shortfall: i64,
    /// Subagent rows with no message: attributed, never an alarm.
    pub excess: i64,
    /// MAX(observed_at) since activation; `None` means nothing written since activation.
    pub last_observed_at: Option<Timestamp>,
}

/// The verdict `fanout health` turns into an exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthVerdict {
    Healthy,
    Shortfall,
    NoVerdict,
}

impl Health {
    pub fn verdict(&self) -> HealthVerdict {
        match &self.figures {
            None => HealthVerdict::NoVerdict,
            Some(f) if f.shortfall > 0 => HealthVerdict::Shortfall,
            // AC-29: nothing written since activation is never "healthy".
            Some(f) if f.last_observed_at.is_none() => HealthVerdict::NoVerdict,
            Some(_) => HealthVerdict::Healthy,
        }
    }
}

/// The outcome of one named migration step (AC-20).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StepOutcome {
    pub name: &'static str,
    #[serde(flatten)]
    pub status: StepStatus,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum StepStatus {
    /// The step ran; `rows` is what it inserted.
    Applied { rows: u64 },
    /// The step had already run (its guard said so).
    AlreadyApplied,
    /// The step failed; start-up went on and it retries next time.
    Failed { error: String },
}

/// What opening the store did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MigrationReport {
    pub schema_version: i64,
    pub steps: Vec<StepOutcome>,
}
