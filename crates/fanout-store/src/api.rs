//! The write seam: what the capture path needs from a store, and nothing else.

use async_trait::async_trait;

use crate::error::StoreError;
use crate::model::{
    ImportFileRecord, MessageRecord, SessionRecord, SubagentRecord, TranscriptMark, TurnRecord,
    UsageRecord,
};

/// The write side of a store: the upserts capture and import drive. [`crate::SqlStore`]
/// implements it on both engines; a wrapper (the proxy's store that may be missing, a
/// test's store whose writes fail) implements only these methods. Everything else a
/// store does (reads, deletes, migrations, health, counts, the report) is an inherent
/// method of [`crate::SqlStore`]; the one read here, [`Store::transcript_applied`], is
/// part of writing: it says where the writes of a transcript stopped, so applying it
/// again resumes there and applies nothing twice.
#[async_trait]
pub trait Store: Send + Sync {
    /// Creates or merges one session row (the rules of `task_sessions`, DESIGN 4.1).
    async fn upsert_session(&self, session: &SessionRecord) -> Result<(), StoreError>;
    /// Creates or merges one turn row.
    async fn upsert_turn(&self, turn: &TurnRecord) -> Result<(), StoreError>;
    /// Creates or merges one tool-call message row (its metadata is replaced).
    async fn upsert_message(&self, message: &MessageRecord) -> Result<(), StoreError>;
    /// The one-statement merge of AC-1…AC-16, AC-30…AC-32.
    async fn upsert_subagent(&self, record: &SubagentRecord) -> Result<(), StoreError>;
    /// The one-statement usage-ledger merge of DESIGN 4.1 (one row per model response).
    async fn upsert_usage(&self, record: &UsageRecord) -> Result<(), StoreError>;
    /// What `fanout import` knows of one source file (`import_files`, DESIGN 3.7); the
    /// latest state replaces the stored one. An importer puts it in the same
    /// [`Store::write_batch`] as the rows read from the file, so a killed import never
    /// records an offset past what it committed.
    async fn upsert_import_file(&self, record: &ImportFileRecord) -> Result<(), StoreError>;
    /// Group commit: runs `ops` table by table, parents first (sessions, turns,
    /// messages, subagents, usage, import files), each table's in the order given, each
    /// through the same one statement as its single-record method above (the merge
    /// rules unchanged, no read-then-write), on ONE writer connection inside ONE
    /// transaction: every row meets its writes in the order given. All of them commit or none does:
    /// on `Err` nothing of the batch is written, and a caller that needs per-record
    /// outcomes retries record by record. Returns once the batch is committed.
    async fn write_batch(&self, ops: &[WriteOp<'_>]) -> Result<(), StoreError>;
    /// How far the transcript of `execution_id` is in the store: the `applied_through`
    /// of its [`TranscriptMark`], or `None` when nothing of it was applied here.
    async fn transcript_applied(&self, execution_id: &str) -> Result<Option<u64>, StoreError>;
}

/// One record of a [`Store::write_batch`].
#[derive(Clone, Copy, Debug)]
pub enum WriteOp<'a> {
    /// [`Store::upsert_session`].
    Session(&'a SessionRecord),
    /// [`Store::upsert_turn`].
    Turn(&'a TurnRecord),
    /// [`Store::upsert_message`].
    Message(&'a MessageRecord),
    /// [`Store::upsert_subagent`].
    Subagent(&'a SubagentRecord),
    /// How far a transcript is applied; only ever part of a batch, so it commits with
    /// the writes it covers.
    TranscriptMark(&'a TranscriptMark),
    /// [`Store::upsert_usage`].
    Usage(&'a UsageRecord),
    /// [`Store::upsert_import_file`].
    ImportFile(&'a ImportFileRecord),
}
