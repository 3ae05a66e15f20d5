//! [`SqlStore`]: one open database on either engine. The logic lives in the modules of
//! each concern (open, write, migrate, read, health, report); this is the handle that
//! holds the pools and hands each call to its module.

use async_trait::async_trait;

use crate::api::{Store, WriteOp};
use crate::bulk::{BulkWriter, run_blocking};
use crate::change_probe::ChangeProbe;
use crate::cost::UsageCell;
use crate::error::{StoreError, redact_url};
use crate::exec::Pools;
use crate::exports::{self, ExportMark, ExportScope, ExportSession};
use crate::model::*;
use crate::open::{self, OpenOptions};
use crate::read_sessions::{self, SessionFilter, SessionRow, TurnRow};
use crate::report::{self, FanoutReport, ReportScope};
use crate::usage::{self, InvocationUsage, SessionUsage, UsageGroup, UsageGrouping};
use crate::write::{self, Statements};
use crate::{health, migrate, read, sql};

/// The SQL store. Open it with [`SqlStore::open`].
pub struct SqlStore {
    pools: Pools,
    statements: Statements,
    target: String,
    report: MigrationReport,
    read_only: bool,
    /// Group commits on a connection of their own ([`OpenOptions::bulk_writes`]).
    bulk: Option<BulkWriter>,
    /// What keeps [`SqlStore::change_marker`] cheap while nothing is written.
    change_probe: ChangeProbe,
}

impl SqlStore {
    /// Opens `sqlite://PATH` or `postgres://…`, creates the schema (idempotent DDL),
    /// refuses a database written by a newer fanout, then runs the migration steps.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        Self::open_with(url, &OpenOptions::default()).await
    }

    /// [`SqlStore::open`] with options.
    pub async fn open_with(url: &str, options: &OpenOptions) -> Result<Self, StoreError> {
        let target = redact_url(url);
        let pools = open::connect(url, &target, options).await?;
        let found = open::check_schema_version(&pools, &target).await?;
        let mut store = SqlStore {
            statements: Statements::new(pools.engine()),
            pools,
            target,
            report: MigrationReport {
                schema_version: sql::SCHEMA_VERSION,
                steps: Vec::new(),
            },
            read_only: options.read_only,
            bulk: None,
            change_probe: ChangeProbe::default(),
        };
        if options.read_only {
            if found != Some(sql::SCHEMA_VERSION) {
                return Err(StoreError::NotMigrated {
                    target: store.target.clone(),
                    found: found.map_or_else(|| "none".to_owned(), |v| v.to_string()),
                    current: sql::SCHEMA_VERSION,
                });
            }
            return Ok(store);
        }
        open::create_schema(&store.pools, &store.target).await?;
        store.report.steps = migrate::run_migrations(&store.pools).await;
        if options.bulk_writes
            && let Some(path) = open::sqlite_path(url)
        {
            store.bulk = Some(BulkWriter::open(path, open::SQLITE_BUSY_TIMEOUT)?);
        }
        Ok(store)
    }

    /// Which engine this store runs on.
    pub fn engine(&self) -> Engine {
        self.pools.engine()
    }

    /// The URL with any password redacted, for messages.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// What [`SqlStore::open`] did.
    pub fn migration_report(&self) -> &MigrationReport {
        &self.report
    }

    /// Closes every connection. A writing SQLite store first folds its WAL into the
    /// database file, so the file alone holds everything written (a copy of it is a
    /// whole database); a read-only one leaves the file alone.
    pub async fn close(&self) {
        if let Some(bulk) = &self.bulk {
            bulk.close();
        }
        self.change_probe.close().await;
        self.pools.close(!self.read_only, &self.target).await;
    }

    /// Runs one SQL statement on the writer (for tests, benches and operators).
    pub async fn execute_raw(&self, statement: &str) -> Result<u64, StoreError> {
        self.pools
            .execute(statement, &[])
            .await
            .map_err(StoreError::query("raw statement"))
    }

    /// The subagent merge statement this store runs (for benchmarks and operators).
    pub fn subagent_upsert_statement(&self) -> &str {
        self.statements.single(write::Table::Subagent)
    }

    /// The backfill `INSERT … SELECT` this store runs (for benchmarks and operators).
    pub fn backfill_statement(&self) -> String {
        sql::backfill_insert(self.pools.engine())
    }

    /// Runs one scalar integer query on the reader (for tests, benches and operators).
    pub async fn query_i64(&self, statement: &str) -> Result<i64, StoreError> {
        self.pools
            .reader()
            .count("health query", statement, &[])
            .await
    }

    /// Deletes a session and (by cascade) its turns, messages and subagent rows.
    pub async fn delete_session(&self, session_id: &str) -> Result<u64, StoreError> {
        write::delete_session(&self.pools, session_id).await
    }

    /// Deletes a turn and its messages; subagent rows keep their turn_id (AC-16).
    pub async fn delete_turn(&self, turn_id: &str) -> Result<u64, StoreError> {
        write::delete_turn(&self.pools, turn_id).await
    }

    /// Rows of one session in AC-13 order.
    pub async fn subagents_by_session(
        &self,
        session_id: &str,
    ) -> Result<Vec<SubagentRow>, StoreError> {
        read::subagents_where(
            self.pools.reader(),
            "subagent read by session",
            "task_session_id",
            session_id,
        )
        .await
    }

    /// Rows of one turn in AC-13 order.
    pub async fn subagents_by_turn(&self, turn_id: &str) -> Result<Vec<SubagentRow>, StoreError> {
        read::subagents_where(
            self.pools.reader(),
            "subagent read by turn",
            "turn_id",
            turn_id,
        )
        .await
    }

    /// The usage-ledger rows of one session, by `observed_at` then `response_id`.
    pub async fn usage_rows(&self, session_id: &str) -> Result<Vec<UsageRow>, StoreError> {
        usage::usage_rows(self.pools.reader(), session_id).await
    }

    /// Usage totals per turn, model or task over the ledger rows in `scope` (the NULL
    /// group first, then by key).
    pub async fn usage_by(
        &self,
        scope: &ReportScope,
        grouping: UsageGrouping,
    ) -> Result<Vec<UsageGroup>, StoreError> {
        usage::usage_by(self.pools.reader(), scope, grouping).await
    }

    /// Usage per session in `scope`: its own agent's, its subagents' and both together.
    pub async fn usage_by_session(
        &self,
        scope: &ReportScope,
    ) -> Result<Vec<SessionUsage>, StoreError> {
        usage::usage_by_session(self.pools.reader(), scope).await
    }

    /// Usage per subagent invocation in `scope`: its own and with every invocation
    /// nested under it (DESIGN 4.1a roll-ups: each response counted once).
    pub async fn usage_by_invocation(
        &self,
        scope: &ReportScope,
    ) -> Result<Vec<InvocationUsage>, StoreError> {
        usage::usage_by_invocation(self.pools.reader(), scope).await
    }

    /// The sessions `filter` selects, newest first, with their turn counts.
    pub async fn sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRow>, StoreError> {
        read_sessions::sessions(self.pools.reader(), filter).await
    }

    /// The session ids `text` names: the exact id, else ids it prefixes, else sessions
    /// whose harness id (`acp_session_id`) is it or starts with it. Several: ambiguous.
    pub async fn session_ids_matching(&self, text: &str) -> Result<Vec<String>, StoreError> {
        read_sessions::session_ids_matching(self.pools.reader(), text).await
    }

    /// The turns of one session, by start.
    pub async fn turns_of(&self, session_id: &str) -> Result<Vec<TurnRow>, StoreError> {
        read_sessions::turns_of(self.pools.reader(), session_id).await
    }

    /// The subagent rows in `scope` (a window selects by `observed_at`).
    pub async fn subagents_in(&self, scope: &ReportScope) -> Result<Vec<SubagentRow>, StoreError> {
        read_sessions::subagents_in(self.pools.reader(), scope).await
    }

    /// The ledger in `scope` summed per session, turn, attribution and model: what
    /// cost is computed from (one model per cell, so each cell is priced exactly).
    pub async fn usage_cells(&self, scope: &ReportScope) -> Result<Vec<UsageCell>, StoreError> {
        read_sessions::usage_cells(self.pools.reader(), scope).await
    }

    /// A text that changes whenever sessions, turns, subagent rows or the ledger change
    /// (live views compare it instead of watching files). On SQLite it is computed again
    /// only once something committed since the last call (`crate::change_probe`).
    pub async fn change_marker(&self) -> Result<String, StoreError> {
        self.change_probe.marker(&self.pools).await
    }

    /// The sessions an OTLP export of `scope` reads (DESIGN 12): those with a turn in
    /// it, or invocations of no known turn; with [`ExportScope::pending_for`], only those
    /// with a span that receiver has not taken. Sorted by id.
    pub async fn export_session_ids(&self, scope: &ExportScope) -> Result<Vec<String>, StoreError> {
        exports::export_session_ids(self.pools.reader(), scope).await
    }

    /// One session's part of an export of `scope`: its turns, rows and ledger cells, and
    /// what the scope's receiver already took; `None` when it is gone.
    pub async fn export_session(
        &self,
        session_id: &str,
        scope: &ExportScope,
    ) -> Result<Option<ExportSession>, StoreError> {
        exports::export_session(self.pools.reader(), session_id, scope).await
    }

    /// Remembers spans a receiver took (`otlp_exports`), each once: a mark already there
    /// is kept. Returns how many were new.
    pub async fn record_exports(&self, marks: &[ExportMark]) -> Result<u64, StoreError> {
        exports::record_exports(&self.pools, marks).await
    }

    /// Everything `fanout import` knows of the files it read (`import_files`), by path.
    pub async fn import_files(&self) -> Result<Vec<ImportFileRecord>, StoreError> {
        if let Some(bulk) = &self.bulk {
            return run_blocking(|| bulk.import_files());
        }
        read::import_files(self.pools.reader()).await
    }

    /// The usage-ledger merge statement this store runs (for benchmarks and operators).
    pub fn usage_upsert_statement(&self) -> &str {
        self.statements.single(write::Table::Usage)
    }

    /// Runs the named migration steps (the backfill); failures are WARN, never errors
    /// (AC-20).
    pub async fn run_migrations(&self) -> Vec<StepOutcome> {
        migrate::run_migrations(&self.pools).await
    }

    /// The two activation keys of AC-24, as stored.
    pub async fn activation(&self) -> Result<Activation, StoreError> {
        migrate::activation(self.pools.reader()).await
    }

    /// AC-28, AC-28a, AC-29, from the database alone.
    pub async fn health(&self) -> Result<Health, StoreError> {
        health::health(self.pools.reader()).await
    }

    /// Row counts per table.
    pub async fn counts(&self) -> Result<TableCounts, StoreError> {
        health::counts(self.pools.reader()).await
    }

    /// The fan-out report over `scope`, provenance and unknown fan-out disclosed (AC-25).
    pub async fn fanout_report(&self, scope: &ReportScope) -> Result<FanoutReport, StoreError> {
        let reader = self.pools.reader();
        let activation = migrate::activation(reader).await?;
        report::fanout_report(reader, scope, activation).await
    }
}

/// The write seam; every method is one module call.
#[async_trait]
impl Store for SqlStore {
    async fn upsert_session(&self, s: &SessionRecord) -> Result<(), StoreError> {
        write::upsert_session(&self.pools, &self.statements, s).await
    }

    async fn upsert_turn(&self, t: &TurnRecord) -> Result<(), StoreError> {
        write::upsert_turn(&self.pools, &self.statements, t).await
    }

    async fn upsert_message(&self, m: &MessageRecord) -> Result<(), StoreError> {
        write::upsert_message(&self.pools, &self.statements, m).await
    }

    async fn upsert_subagent(&self, r: &SubagentRecord) -> Result<(), StoreError> {
        write::upsert_subagent(&self.pools, &self.statements, r).await
    }

    async fn upsert_usage(&self, u: &UsageRecord) -> Result<(), StoreError> {
        write::upsert_usage(&self.pools, &self.statements, u).await
    }

    async fn upsert_import_file(&self, f: &ImportFileRecord) -> Result<(), StoreError> {
        write::upsert_import_file(&self.pools, &self.statements, f).await
    }

    async fn write_batch(&self, ops: &[WriteOp<'_>]) -> Result<(), StoreError> {
        if let Some(bulk) = &self.bulk {
            return run_blocking(|| bulk.write_batch(&self.statements, ops));
        }
        write::write_batch(&self.pools, &self.statements, ops).await
    }

    async fn transcript_applied(&self, execution_id: &str) -> Result<Option<u64>, StoreError> {
        write::transcript_applied(&self.pools, execution_id).await
    }
}
