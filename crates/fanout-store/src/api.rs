//! The store interface other crates code against.

use async_trait::async_trait;

use crate::error::StoreError;
use crate::model::*;
use crate::report::{FanoutReport, ReportScope};

/// The store interface every other crate codes against; [`crate::SqlStore`] implements
/// it on both engines, and tests may wrap it (for example to make writes fail).
#[async_trait]
pub trait Store: Send + Sync {
    fn engine(&self) -> Engine;
    /// The URL with any password redacted, for messages.
    fn target(&self) -> &str;

    async fn upsert_session(&self, session: &SessionRecord) -> Result<(), StoreError>;
    async fn upsert_turn(&self, turn: &TurnRecord) -> Result<(), StoreError>;
    async fn upsert_message(&self, message: &MessageRecord) -> Result<(), StoreError>;
    /// The one-statement merge of AC-1…AC-16, AC-30…AC-32.
    async fn upsert_subagent(&self, record: &SubagentRecord) -> Result<(), StoreError>;
    /// Group commit: runs `ops` in order, each through the same one statement as its
    /// single-record method above (the merge rules unchanged, no read-then-write), on
    /// ONE writer connection inside ONE transaction. All of them commit or none does:
    /// on `Err` nothing of the batch is written, and a caller that needs per-record
    /// outcomes retries record by record. Returns once the batch is committed.
    async fn write_batch(&self, ops: &[WriteOp<'_>]) -> Result<(), StoreError>;

    /// Deletes a session and (by cascade) its turns, messages and subagent rows.
    async fn delete_session(&self, session_id: &str) -> Result<u64, StoreError>;
    /// Deletes a turn and its messages; subagent rows keep their turn_id (AC-16).
    async fn delete_turn(&self, turn_id: &str) -> Result<u64, StoreError>;

    /// Rows of one session in AC-13 order.
    async fn subagents_by_session(&self, session_id: &str) -> Result<Vec<SubagentRow>, StoreError>;
    /// Rows of one turn in AC-13 order.
    async fn subagents_by_turn(&self, turn_id: &str) -> Result<Vec<SubagentRow>, StoreError>;

    /// Runs the named migration steps (the backfill); failures are WARN, never errors (AC-20).
    async fn run_migrations(&self) -> Vec<StepOutcome>;
    async fn activation(&self) -> Result<Activation, StoreError>;
    /// AC-28, AC-28a, AC-29, from the database alone.
    async fn health(&self) -> Result<Health, StoreError>;
    async fn counts(&self) -> Result<TableCounts, StoreError>;
    /// The fan-out report over `scope`, provenance and unknown fan-out disclosed (AC-25).
    async fn fanout_report(&self, scope: &ReportScope) -> Result<FanoutReport, StoreError>;
}

/// One record of a [`Store::write_batch`].
#[derive(Clone, Copy, Debug)]
pub enum WriteOp<'a> {
    Session(&'a SessionRecord),
    Turn(&'a TurnRecord),
    Message(&'a MessageRecord),
    Subagent(&'a SubagentRecord),
}
