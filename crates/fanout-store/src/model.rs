//! The typed values the store reads and writes. They mirror DESIGN 4.1 column by column.

use serde::Serialize;

use fanout_types::Timestamp;

/// The execution id stored when none is known (AC-31): never NULL, never empty.
pub const UNKNOWN_EXECUTION: &str = "unknown";

/// Which engine a store runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// An embedded SQLite file (the default).
    Sqlite,
    /// A PostgreSQL server.
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
    /// The row id: UUID v5 of (execution, ACP session id) (DESIGN 3.2).
    pub id: String,
    /// The task the session belongs to; write-once.
    pub task_id: String,
    /// The agent's own `sessionId`.
    pub acp_session_id: Option<String>,
    /// The agent execution (proxy run) that saw the session; the first one wins.
    pub agent_execution_id: Option<String>,
    /// The agent's command line, as the proxy ran it.
    pub agent_command: Option<String>,
    /// The working directory of `session/new` (or load/resume/fork).
    pub cwd: Option<String>,
    /// The first frame of the session; write-once.
    pub started_at: Timestamp,
    /// When the session ended; capture never sets it (ACP has no session end).
    pub completed_at: Option<Timestamp>,
    /// The latest write (turn activity).
    pub updated_at: Timestamp,
}

/// One `session/prompt` until its response (`task_session_turns`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnRecord {
    /// The row id: UUID v5 of (session row id, JSON-RPC request id).
    pub id: String,
    /// The session row the turn belongs to.
    pub task_session_id: String,
    /// The session's task; write-once.
    pub task_id: String,
    /// When the `session/prompt` request was observed; write-once.
    pub started_at: Timestamp,
    /// When its response was observed; the first value wins.
    pub completed_at: Option<Timestamp>,
    /// `result.stopReason`, or `error: <message>` when the prompt failed.
    pub stop_reason: Option<String>,
    /// The latest write.
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
    /// The row id: UUID v5 of (session row id, tool_call_id).
    pub id: String,
    /// The session row the message belongs to.
    pub task_session_id: String,
    /// The session's task; write-once.
    pub task_id: Option<String>,
    /// The turn open when the tool call was first seen; the first non-NULL wins.
    pub turn_id: Option<String>,
    /// Who wrote it (`agent` for tool calls); write-once.
    pub author_type: Option<String>,
    /// The message kind (`tool_call`), stored in the `type` column.
    pub message_type: Option<String>,
    /// The tool call's title.
    pub content: Option<String>,
    /// JSON text; the tool-call shape of DESIGN 4.1 is a public contract read by the backfill.
    pub metadata: String,
    /// The first frame of the tool call; write-once.
    pub created_at: Timestamp,
    /// The latest frame.
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
    /// The session row the subagent was launched in; part of the key.
    pub task_session_id: String,
    /// The session's task; write-once.
    pub task_id: String,
    /// The turn open when the frame was observed; the first non-NULL wins (AC-2a).
    pub turn_id: Option<String>,
    /// The launching tool call, as `fanout-acp` emits it; part of the key.
    pub tool_call_id: String,
    /// `None` or empty is stored as [`UNKNOWN_EXECUTION`].
    pub agent_execution_id: Option<String>,
    /// The subagent that launched this one, for nested subagents (AC-6).
    pub parent_tool_call_id: Option<String>,
    /// The agent's name for the kind of subagent (`reviewer`, `explore`, …).
    pub subagent_type: Option<String>,
    /// The short task description the parent gave.
    pub description: Option<String>,
    /// The agent's own id for the subagent.
    pub agent_id: Option<String>,
    /// The child's session, where the agent runs it as one.
    pub child_session_id: Option<String>,
    /// The model the subagent ran on.
    pub model: Option<String>,
    /// The agent's own status for the subagent, verbatim (open vocabulary).
    pub agent_status: Option<String>,
    /// The launching tool call's ACP status, verbatim; frozen once settled (AC-12).
    pub tool_status: Option<String>,
    /// Launched in the background; sticky once true.
    pub is_async: bool,
    /// Tokens the subagent used; `None` = not reported (a 0 is not a report).
    pub total_tokens: Option<i64>,
    /// Tool calls the subagent made; a reported 0 is kept (AC-8).
    pub tool_use_count: Option<i64>,
    /// How long the subagent ran; `None` = not reported (a 0 is not a report).
    pub duration_ms: Option<i64>,
    /// When fanout observed the frame; `None` means now. Write-once (AC-1a).
    pub observed_at: Option<Timestamp>,
    /// Set by the writer iff `tool_status` is terminal; the store keeps the first one.
    pub settled_at: Option<Timestamp>,
    /// Provenance, written once by the row's first writer ([`Source::Live`] by default).
    pub source: Source,
}

/// One stored subagent row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SubagentRow {
    /// The row id: UUID v5 of the key live, the source message's id when backfilled.
    pub id: String,
    /// The session row the subagent was launched in.
    pub task_session_id: String,
    /// The session's task.
    pub task_id: String,
    /// The turn it was launched in; no foreign key, so it survives the turn's deletion.
    pub turn_id: Option<String>,
    /// The launching tool call.
    pub tool_call_id: String,
    /// The agent execution, [`UNKNOWN_EXECUTION`] when none was known.
    pub agent_execution_id: String,
    /// The subagent that launched this one, if nested.
    pub parent_tool_call_id: Option<String>,
    /// The agent's name for the kind of subagent.
    pub subagent_type: Option<String>,
    /// The short task description.
    pub description: Option<String>,
    /// The agent's own id for the subagent.
    pub agent_id: Option<String>,
    /// The child's session.
    pub child_session_id: Option<String>,
    /// The model it ran on.
    pub model: Option<String>,
    /// The agent's last status for it, verbatim.
    pub agent_status: Option<String>,
    /// The last tool status before it settled (frozen after).
    pub tool_status: Option<String>,
    /// Launched in the background.
    pub is_async: bool,
    /// Reported tokens; `None` = never reported.
    pub total_tokens: Option<i64>,
    /// Reported tool calls; `None` = never reported.
    pub tool_use_count: Option<i64>,
    /// Reported duration; `None` = never reported.
    pub duration_ms: Option<i64>,
    /// Whether capture or the backfill wrote the row.
    pub source: Source,
    /// When fanout first observed it (its message's `created_at` when backfilled).
    pub observed_at: Timestamp,
    /// The first terminal tool status; `None` while it never settled.
    pub settled_at: Option<Timestamp>,
    /// The latest write.
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
    /// The session's task.
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
    /// The model that answered, as the source names it.
    pub model: Option<String>,
    /// The response's token figures.
    pub tokens: TokenCounts,
    /// Where the figures were read.
    pub source: UsageSource,
    /// When the response was made (the record's timestamp).
    pub observed_at: Timestamp,
}

/// One stored usage-ledger row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UsageRow {
    /// Deterministic from session and response id ([`crate::usage_row_id`]).
    pub id: String,
    /// The session's row id.
    pub task_session_id: String,
    /// The session's task.
    pub task_id: String,
    /// The turn open when the response was made (first non-NULL).
    pub turn_id: Option<String>,
    /// The invocation whose context made the call; `None` = the session's own agent.
    pub subagent_tool_call_id: Option<String>,
    /// The execution, `'unknown'` when none was known.
    pub agent_execution_id: String,
    /// The provider's response id.
    pub response_id: String,
    /// The model (first non-NULL).
    pub model: Option<String>,
    /// The merged token figures.
    #[serde(flatten)]
    pub tokens: TokenCounts,
    /// Where the first writer read the figures.
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
    /// Rows of `task_sessions`.
    pub sessions: i64,
    /// Rows of `task_session_turns`.
    pub turns: i64,
    /// Rows of `task_session_messages`.
    pub messages: i64,
    /// Rows of `task_session_subagents`.
    pub subagents: i64,
    /// Of those, written by capture.
    pub subagents_live: i64,
    /// Of those, written by the backfill.
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
    /// `subagent_context_capture_since`: from when every subagent is captured.
    pub capture_since: Option<String>,
    /// `subagent_context_backfill_through`: the newest backfilled message, or `''`.
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
    /// The activation keys the figures are scoped by.
    pub activation: Activation,
    /// `None` when there is no `capture_since` (AC-28a: no verdict).
    pub figures: Option<HealthFigures>,
}

/// The health counts since activation (AC-28, AC-29).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HealthFigures {
    /// `capture_since`, parsed: the figures cover what was observed from then on.
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
    /// Every subagent message since activation has its row, and rows were written.
    Healthy,
    /// Some subagent messages since activation have no row (the alarm).
    Shortfall,
    /// Not activated, or nothing written since activation (AC-28a, AC-29).
    NoVerdict,
}

impl Health {
    /// The verdict these figures give.
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
    /// The step's name, as its WARN names it (`task_session_subagents.backfill`).
    pub name: &'static str,
    #[serde(flatten)]
    /// What it did.
    pub status: StepStatus,
}

/// How one migration step went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum StepStatus {
    /// The step ran.
    Applied {
        /// The rows it inserted.
        rows: u64,
    },
    /// The step had already run (its guard said so).
    AlreadyApplied,
    /// The step failed; start-up went on and it retries next time.
    Failed {
        /// The error, as logged.
        error: String,
    },
}

/// What opening the store did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MigrationReport {
    /// The schema version the database is at after opening.
    pub schema_version: i64,
    /// Every migration step and how it went.
    pub steps: Vec<StepOutcome>,
}
