//! [`SqlStore`]: one open database on either engine. The logic lives in the modules of
//! each concern (open, write, migrate, read, health, report); this is the handle that
//! holds the pools and hands each call to its module.

use async_trait::async_trait;

use crate::api::{Store, WriteOp};
use crate::error::{StoreError, redact_url};
use crate::exec::Pools;
use crate::model::*;
use crate::open::{self, OpenOptions};
use crate::report::{self, FanoutReport, ReportScope};
use crate::write::{self, Statements};
use crate::{health, migrate, read, sql};

/// The SQL store. Open it with [`SqlStore::open`].
pub struct SqlStore {
    pools: Pools,
    statements: Statements,
    target: String,
    report: MigrationReport,
    read_only: bool,
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
        &self.statements.upsert_subagent
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

    async fn write_batch(&self, ops: &[WriteOp<'_>]) -> Result<(), StoreError> {
        write::write_batch(&self.pools, &self.statements, ops).await
    }

    async fn transcript_applied(&self, execution_id: &str) -> Result<Option<u64>, StoreError> {
        write::transcript_applied(&self.pools, execution_id).await
    }
}
