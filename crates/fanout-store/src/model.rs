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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Captured from ACP traffic: live behind the proxy, or replayed from the proxy's
    /// own transcript (the same frames, so the same rows).
    #[default]
    Live,
    /// Reconstructed by the backfill from tool-call messages (AC-21).
    Backfill,
    /// Read from a harness's own history (Claude Code logs, Codex rollouts) by
    /// `fanout import` (DESIGN 3.7, 8: `live` / `import`).
    Import,
}

impl Source {
    /// The text stored in `task_session_subagents.source`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Source::Live => "live",
            Source::Backfill => "backfill",
            Source::Import => "import",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "live" => Some(Source::Live),
            "backfill" => Some(Source::Backfill),
            "import" => Some(Source::Import),
            _ => None,
        }
    }
}

/// Where a usage-ledger row came from (`task_session_usage.source`, DESIGN 4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum UsageSource {
    /// A Claude Code session log (`projects/…/<session>.jsonl` and its subagent logs).
    #[serde(rename = "claude-log")]
    ClaudeLog,
    /// A Codex rollout file (`sessions/YYYY/MM/DD/rollout-*.jsonl`).
    #[serde(rename = "codex-rollout")]
    CodexRollout,
    /// ACP traffic (usage reported on the wire).
    #[serde(rename = "acp")]
    Acp,
}

impl UsageSource {
    /// The text stored in `task_session_usage.source`.
    pub fn as_str(&self) -> &'static str {
        match self {
            UsageSource::ClaudeLog => "claude-log",
            UsageSource::CodexRollout => "codex-rollout",
            UsageSource::Acp => "acp",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "claude-log" => Some(UsageSource::ClaudeLog),
            "codex-rollout" => Some(UsageSource::CodexRollout),
            "acp" => Some(UsageSource::Acp),
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
    /// Provenance, written once by the row's first writer ([`Source::Live`] by default).
    pub source: Source,
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

/// The token figures of one model response, each as the source reported it: `None` is
/// "not reported" (stored NULL, never 0). All five are disjoint, so a response's tokens
/// are their sum and a cost is each figure times its price (DESIGN 4.1a):
/// `input_tokens` excludes the cached input read and written (Anthropic's meaning; a
/// Codex `input_tokens`, which includes the cached part, is stored minus it), and
/// `output_tokens` excludes the reasoning tokens counted in `reasoning_tokens` (a Codex
/// `output_tokens` is stored minus its reasoning part; Claude reports no reasoning
/// figure, so its output includes any thinking and `reasoning_tokens` is NULL).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TokenCounts {
    /// Uncached input tokens.
    pub input_tokens: Option<i64>,
    /// Output tokens, reasoning excluded.
    pub output_tokens: Option<i64>,
    /// Input tokens written to the prompt cache.
    pub cache_creation_tokens: Option<i64>,
    /// Input tokens read from the prompt cache.
    pub cache_read_tokens: Option<i64>,
    /// Reasoning (thinking) output tokens, where the source reports them apart.
    pub reasoning_tokens: Option<i64>,
}

/// One model response for the usage ledger (`task_session_usage`, DESIGN 4.1), to be
/// merged by its one upsert: per token field the larger of stored and new (a NULL never
/// replaces), `model` and `turn_id` the first non-NULL, `subagent_tool_call_id` written
/// once by the row's first writer (NULL included). Negative token figures are stored as
/// NULL; `''` texts as NULL; a missing execution as `'unknown'`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageRecord {
    /// The `task_sessions.id` of the session whose agents made the call.
    pub task_session_id: String,
    pub task_id: String,
    /// The turn open when the response was made; never created for it.
    pub turn_id: Option<String>,
    /// The `tool_call_id` of the subagent invocation whose context made the call;
    /// `None` = the session's own agent.
    pub subagent_tool_call_id: Option<String>,
    /// `None` or empty is stored as [`UNKNOWN_EXECUTION`].
    pub agent_execution_id: Option<String>,
    /// The provider's response id (Anthropic `message.id`, OpenAI `response_id`).
    pub response_id: String,
    pub model: Option<String>,
    pub tokens: TokenCounts,
    pub source: UsageSource,
    /// When the response was made (the record's timestamp).
    pub observed_at: Timestamp,
}

/// One stored usage-ledger row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UsageRow {
    pub id: String,
    pub task_session_id: String,
    pub task_id: String,
    pub turn_id: Option<String>,
    pub subagent_tool_call_id: Option<String>,
    pub agent_execution_id: String,
    pub response_id: String,
    pub model: Option<String>,
    #[serde(flatten)]
    pub tokens: TokenCounts,
    pub source: UsageSource,
    /// Written once: the observation of the row's first writer.
    pub observed_at: Timestamp,
    /// The latest observation merged into the row.
    pub updated_at: Timestamp,
}

/// What `fanout import` knows of one source file (`import_files`, DESIGN 3.7): enough
/// to skip it unchanged, resume it appended and read it again rewritten.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ImportFileRecord {
    /// The file's path as the import walked it.
    pub path: String,
    /// Its size in bytes when it was read.
    pub size: i64,
    /// Its modification time when it was read, in nanoseconds since the Unix epoch.
    pub mtime: i64,
    /// The SHA-256 of its first 4 KiB (or of the whole file when shorter), lowercase hex.
    pub head_sha256: String,
    /// The byte offset just past the last complete line read (`<= size`).
    pub offset: i64,
    /// When this state was written (replaced by every write).
    pub imported_at: Timestamp,
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
    /// Subagent rows read from harness histories (`source = 'import'`).
    pub subagents_import: i64,
    /// Usage-ledger rows (one per model response).
    pub usage: i64,
    /// Source files `fanout import` keeps state for.
    pub import_files: i64,
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
