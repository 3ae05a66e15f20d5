//! [`SqlStore`]: the [`Store`] interface over SQLite (one writer connection, WAL,
//! foreign keys, busy timeout, a read-only reader pool) or PostgreSQL (a pool).

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{PgPool, Row, SqlitePool};
use uuid::Uuid;

use crate::error::{StoreError, redact_url};
use crate::model::*;
use crate::report::{self, FanoutReport, ReportScope};
use crate::sql;
use crate::time::Timestamp;

/// Namespace for deterministic subagent row ids (UUID v5).
const SUBAGENT_ID_NAMESPACE: Uuid = Uuid::from_u128(0x6f1d_2c3b_8a4e_4f5a_9b0c_7d6e_5f4a_3b21);

/// The store interface every other crate codes against; [`SqlStore`] implements it on
/// both engines, and tests may wrap it (for example to make writes fail).
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

struct Statements {
    upsert_session: String,
    upsert_turn: String,
    upsert_message: String,
    upsert_subagent: String,
    /// SQLite only (see [`sql::upsert_message_then_subagent`]).
    message_then_subagent: Option<String>,
}

impl Statements {
    fn new(e: Engine) -> Self {
        Statements {
            upsert_session: sql::upsert_session(e),
            upsert_turn: sql::upsert_turn(e),
            upsert_message: sql::upsert_message(e),
            upsert_subagent: sql::upsert_subagent(e),
            message_then_subagent: (e == Engine::Sqlite)
                .then(|| sql::upsert_message_then_subagent(e)),
        }
    }
}

/// The bind values of one subagent upsert that are computed rather than read.
struct SubagentBinds<'a> {
    r: &'a SubagentRecord,
    id: String,
    execution: &'a str,
    observed_at: String,
    settled_at: Option<String>,
    updated_at: String,
}

impl<'a> SubagentBinds<'a> {
    fn new(r: &'a SubagentRecord) -> Self {
        let execution = non_empty(&r.agent_execution_id).unwrap_or(UNKNOWN_EXECUTION);
        let now = Timestamp::now();
        let observed_at = r.observed_at.unwrap_or(now);
        SubagentBinds {
            r,
            id: subagent_row_id(&r.task_session_id, execution, &r.tool_call_id),
            execution,
            observed_at: observed_at.canonical(),
            settled_at: r.settled_at.map(|t| t.canonical()),
            updated_at: observed_at.max(now).canonical(),
        }
    }
}

/// Appends the binds of [`sql::upsert_session`] to `$query`.
macro_rules! bind_session {
    ($query:expr, $s:expr) => {{
        let s: &SessionRecord = $s;
        $query
            .bind(&s.id)
            .bind(&s.task_id)
            .bind(non_empty(&s.acp_session_id))
            .bind(non_empty(&s.agent_execution_id))
            .bind(non_empty(&s.agent_command))
            .bind(non_empty(&s.cwd))
            .bind(s.started_at.canonical())
            .bind(s.completed_at.map(|t| t.canonical()))
            .bind(s.updated_at.canonical())
    }};
}

/// Appends the binds of [`sql::upsert_turn`] to `$query`.
macro_rules! bind_turn {
    ($query:expr, $t:expr) => {{
        let t: &TurnRecord = $t;
        $query
            .bind(&t.id)
            .bind(&t.task_session_id)
            .bind(&t.task_id)
            .bind(t.started_at.canonical())
            .bind(t.completed_at.map(|x| x.canonical()))
            .bind(non_empty(&t.stop_reason))
            .bind(t.updated_at.canonical())
    }};
}

/// Appends the [`sql::MESSAGE_PARAMS`] binds of [`sql::upsert_message`] to `$query`.
macro_rules! bind_message {
    ($query:expr, $m:expr) => {{
        let m: &MessageRecord = $m;
        $query
            .bind(&m.id)
            .bind(&m.task_session_id)
            .bind(non_empty(&m.task_id))
            .bind(non_empty(&m.turn_id))
            .bind(non_empty(&m.author_type))
            .bind(non_empty(&m.message_type))
            .bind(non_empty(&m.content))
            .bind(&m.metadata)
            .bind(m.created_at.canonical())
            .bind(m.updated_at.canonical())
    }};
}

/// Appends the binds of [`sql::upsert_subagent`] to `$query`.
macro_rules! bind_subagent {
    ($query:expr, $b:expr) => {{
        let b: &SubagentBinds<'_> = $b;
        let r = b.r;
        $query
            .bind(&b.id)
            .bind(&r.task_session_id)
            .bind(&r.task_id)
            .bind(non_empty(&r.turn_id))
            .bind(&r.tool_call_id)
            .bind(b.execution)
            .bind(non_empty(&r.parent_tool_call_id))
            .bind(non_empty(&r.subagent_type))
            .bind(non_empty(&r.description))
            .bind(non_empty(&r.agent_id))
            .bind(non_empty(&r.child_session_id))
            .bind(non_empty(&r.model))
            .bind(non_empty(&r.agent_status))
            .bind(non_empty(&r.tool_status))
            .bind(i64::from(r.is_async))
            .bind(metric(r.total_tokens, true))
            .bind(metric(r.tool_use_count, false))
            .bind(metric(r.duration_ms, true))
            .bind(Source::Live.as_str())
            .bind(&b.observed_at)
            .bind(&b.settled_at)
            .bind(&b.updated_at)
    }};
}

enum Pools {
    Sqlite {
        writer: SqlitePool,
        reader: SqlitePool,
    },
    Postgres(PgPool),
}

impl Pools {
    fn engine(&self) -> Engine {
        match self {
            Pools::Sqlite { .. } => Engine::Sqlite,
            Pools::Postgres(_) => Engine::Postgres,
        }
    }
}

/// How to open a store.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// PostgreSQL only: the session `TimeZone` of every connection (sqlx starts sessions
    /// in UTC). Results never depend on it (AC-24e); tests use it to prove that.
    pub postgres_session_time_zone: Option<String>,
    /// Open an existing fanout database to read it, changing nothing: no file is
    /// created, no schema or migration (backfill, activation keys) runs, and
    /// PostgreSQL sessions are read-only. A missing SQLite file or a database without
    /// the current schema is an error that says so.
    pub read_only: bool,
}

/// The SQL store. Open it with [`SqlStore::open`].
pub struct SqlStore {
    pools: Pools,
    /// The hot-path statements, generated once per store (they are also sqlx's
    /// prepared-statement cache keys).
    statements: Statements,
    target: String,
    report: MigrationReport,
    read_only: bool,
}

/// Runs `$body` with `$pool` bound to the writer pool of whichever engine is in use.
macro_rules! with_writer {
    ($store:expr, $pool:ident => $body:expr) => {
        match &$store.pools {
            Pools::Sqlite { writer: $pool, .. } => $body,
            Pools::Postgres($pool) => $body,
        }
    };
}

/// Runs `$body` with `$pool` bound to the pool reads should use.
macro_rules! with_reader {
    ($store:expr, $pool:ident => $body:expr) => {
        match &$store.pools {
            Pools::Sqlite { reader: $pool, .. } => $body,
            Pools::Postgres($pool) => $body,
        }
    };
}

/// Decodes a `task_session_subagents` row from either engine's row type.
macro_rules! decode_subagent {
    ($row:expr) => {{
        let row = $row;
        let ts = |col: &str, text: String| {
            Timestamp::parse(&text).map_err(|cause| StoreError::BadTimestamp {
                what: format!("task_session_subagents.{col}"),
                cause,
            })
        };
        let opt_ts = |col: &str, text: Option<String>| text.map(|t| ts(col, t)).transpose();
        let get = |e| StoreError::Query {
            op: "reading task_session_subagents",
            cause: e,
        };
        let source_text: String = row.try_get("source").map_err(get)?;
        SubagentRow {
            id: row.try_get("id").map_err(get)?,
            task_session_id: row.try_get("task_session_id").map_err(get)?,
            task_id: row.try_get("task_id").map_err(get)?,
            turn_id: row.try_get("turn_id").map_err(get)?,
            tool_call_id: row.try_get("tool_call_id").map_err(get)?,
            agent_execution_id: row.try_get("agent_execution_id").map_err(get)?,
            parent_tool_call_id: row.try_get("parent_tool_call_id").map_err(get)?,
            subagent_type: row.try_get("subagent_type").map_err(get)?,
            description: row.try_get("description").map_err(get)?,
            agent_id: row.try_get("agent_id").map_err(get)?,
            child_session_id: row.try_get("child_session_id").map_err(get)?,
            model: row.try_get("model").map_err(get)?,
            agent_status: row.try_get("agent_status").map_err(get)?,
            tool_status: row.try_get("tool_status").map_err(get)?,
            is_async: row.try_get::<i64, _>("is_async").map_err(get)? != 0,
            total_tokens: row.try_get("total_tokens").map_err(get)?,
            tool_use_count: row.try_get("tool_use_count").map_err(get)?,
            duration_ms: row.try_get("duration_ms").map_err(get)?,
            // Unknown provenance text can only come from another writer; call it backfill
            // so it is never counted as live capture.
            source: Source::parse(&source_text).unwrap_or(Source::Backfill),
            observed_at: ts("observed_at", row.try_get("observed_at").map_err(get)?)?,
            settled_at: opt_ts("settled_at", row.try_get("settled_at").map_err(get)?)?,
            updated_at: ts("updated_at", row.try_get("updated_at").map_err(get)?)?,
        }
    }};
}

fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.is_empty())
}

/// A metric as the contract stores it: negative is NULL (AC-9), and 0 is NULL where 0
/// means "not reported" (AC-7a).
fn metric(value: Option<i64>, zero_is_unreported: bool) -> Option<i64> {
    value.filter(|v| *v > 0 || (*v == 0 && !zero_is_unreported))
}

/// The deterministic id of a live subagent row: re-import never duplicates.
pub fn subagent_row_id(
    task_session_id: &str,
    agent_execution_id: &str,
    tool_call_id: &str,
) -> String {
    let name = format!("{task_session_id}\u{1f}{agent_execution_id}\u{1f}{tool_call_id}");
    Uuid::new_v5(&SUBAGENT_ID_NAMESPACE, name.as_bytes()).to_string()
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
        let pools = if let Some(path) = sqlite_path(url) {
            open_sqlite(path, &target, options).await?
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            open_postgres(url, &target, options).await?
        } else {
            return Err(StoreError::InvalidUrl {
                url: target,
                reason: "expected sqlite://PATH or postgres://USER@HOST:PORT/DB".to_owned(),
            });
        };
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
        let found = store.check_schema_version().await?;
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
        store.create_schema().await?;
        store.report.steps = store.run_migrations().await;
        Ok(store)
    }

    /// What [`SqlStore::open`] did.
    pub fn migration_report(&self) -> &MigrationReport {
        &self.report
    }

    /// Closes every connection. A writing SQLite store first folds its WAL into the
    /// database file, so the file alone holds everything written (a copy of it is a
    /// whole database); a read-only one leaves the file alone.
    pub async fn close(&self) {
        match &self.pools {
            Pools::Sqlite { writer, reader } => {
                reader.close().await;
                // Explicitly, because the implicit checkpoint of the last connection to
                // close is skipped when another connection (a reader whose worker thread
                // has not finished closing) still has the file open: seen under load.
                // A checkpoint that fails or is blocked (another process still reading)
                // loses nothing; the WAL stays beside the file.
                if !self.read_only && !writer.is_closed() {
                    let checkpoint: Result<(i64, i64, i64), _> =
                        sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)")
                            .fetch_one(writer)
                            .await;
                    match checkpoint {
                        Ok((0, _, _)) => {}
                        Ok(_) => {
                            tracing::debug!(target = %self.target, "WAL checkpoint at close blocked by a reader")
                        }
                        Err(err) => {
                            tracing::debug!(target = %self.target, error = %err, "WAL checkpoint at close failed")
                        }
                    }
                }
                writer.close().await;
            }
            Pools::Postgres(pool) => pool.close().await,
        }
    }

    /// Runs one SQL statement on the writer (for tests, benches and operators).
    pub async fn execute_raw(&self, statement: &str) -> Result<u64, StoreError> {
        with_writer!(self, pool => sqlx::query(statement)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
            .map_err(StoreError::query("raw statement")))
    }

    /// The subagent merge statement this store runs (for benchmarks and operators).
    pub fn subagent_upsert_statement(&self) -> &str {
        &self.statements.upsert_subagent
    }

    /// The backfill `INSERT … SELECT` this store runs (for benchmarks and operators).
    pub fn backfill_statement(&self) -> String {
        sql::backfill_insert(self.engine())
    }

    /// Runs one scalar integer query on the reader (for tests, benches and operators).
    pub async fn query_i64(&self, statement: &str) -> Result<i64, StoreError> {
        self.count(statement, None).await
    }

    /// Refuses a database written by a newer fanout; returns the schema version the
    /// database records (`None`: no fanout schema yet).
    async fn check_schema_version(&self) -> Result<Option<i64>, StoreError> {
        let exists_sql = match self.engine() {
            Engine::Sqlite => {
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'fanout_meta'"
            }
            Engine::Postgres => {
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'fanout_meta'"
            }
        };
        let schema_err = |cause| StoreError::Schema {
            target: self.target.clone(),
            cause,
        };
        let exists: i64 = with_writer!(self, pool => sqlx::query_scalar(exists_sql).fetch_one(pool).await.map_err(schema_err))?;
        if exists == 0 {
            return Ok(None);
        }
        let found: Option<String> = with_writer!(self, pool => sqlx::query_scalar("SELECT value FROM fanout_meta WHERE key = $1")
            .bind(sql::KEY_SCHEMA_VERSION)
            .fetch_optional(pool)
            .await
            .map_err(schema_err))?;
        let found = found.and_then(|v| v.trim().parse::<i64>().ok());
        if let Some(found) = found
            && found > sql::SCHEMA_VERSION
        {
            return Err(StoreError::NewerSchema {
                target: self.target.clone(),
                found,
                supported: sql::SCHEMA_VERSION,
            });
        }
        Ok(found)
    }

    async fn create_schema(&self) -> Result<(), StoreError> {
        let schema_err = |cause| StoreError::Schema {
            target: self.target.clone(),
            cause,
        };
        for statement in sql::schema(self.engine()) {
            with_writer!(self, pool => sqlx::query(&statement).execute(pool).await.map(|_| ()).map_err(schema_err))?;
        }
        let version = sql::SCHEMA_VERSION.to_string();
        with_writer!(self, pool => sqlx::query(
            "INSERT INTO fanout_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )
        .bind(sql::KEY_SCHEMA_VERSION)
        .bind(&version)
        .execute(pool)
        .await
        .map(|_| ())
        .map_err(schema_err))?;
        Ok(())
    }

    /// AC-21…AC-24: the backfill and both activation keys in one transaction.
    async fn backfill(&self) -> Result<StepStatus, sqlx::Error> {
        let activation = self.read_activation().await?;
        if activation.is_active() {
            return Ok(StepStatus::AlreadyApplied);
        }
        let e = self.engine();
        let high_water_sql = sql::backfill_high_water(e);
        let insert_sql = sql::backfill_insert(e);
        with_writer!(self, pool => {
            let mut tx = pool.begin().await?;
            // Before the INSERT, so it can only under-claim.
            let high_water: Option<String> = sqlx::query_scalar(&high_water_sql).fetch_optional(&mut *tx).await?;
            let rows = sqlx::query(&insert_sql).execute(&mut *tx).await?.rows_affected();
            // Sampled after the insert, inside the transaction (AC-24).
            let capture_since = Timestamp::now().canonical();
            let backfill_through = high_water.unwrap_or_default();
            for (key, value) in [
                (sql::KEY_CAPTURE_SINCE, capture_since.as_str()),
                (sql::KEY_BACKFILL_THROUGH, backfill_through.as_str()),
            ] {
                sqlx::query(sql::insert_meta_once()).bind(key).bind(value).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok(StepStatus::Applied { rows })
        })
    }

    async fn read_activation(&self) -> Result<Activation, sqlx::Error> {
        let rows: Vec<(String, String)> = with_reader!(self, pool => sqlx::query_as(
            "SELECT key, value FROM fanout_meta WHERE key IN ($1, $2)",
        )
        .bind(sql::KEY_CAPTURE_SINCE)
        .bind(sql::KEY_BACKFILL_THROUGH)
        .fetch_all(pool)
        .await)?;
        let mut activation = Activation::default();
        for (key, value) in rows {
            if key == sql::KEY_CAPTURE_SINCE {
                activation.capture_since = Some(value);
            } else {
                activation.backfill_through = Some(value);
            }
        }
        Ok(activation)
    }

    /// Runs one read with text binds (`$1`… in order) and decodes every row as `T`, a
    /// tuple, on either engine: the report's statements go through here.
    pub(crate) async fn fetch_all_as<T>(
        &self,
        op: &'static str,
        statement: &str,
        binds: &[Option<String>],
    ) -> Result<Vec<T>, StoreError>
    where
        T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
            + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
            + Send
            + Unpin,
    {
        with_reader!(self, pool => {
            let mut query = sqlx::query_as::<_, T>(statement);
            for value in binds {
                query = query.bind(value.as_deref());
            }
            query.fetch_all(pool).await.map_err(StoreError::query(op))
        })
    }

    async fn count(&self, sql_text: &str, bind: Option<&str>) -> Result<i64, StoreError> {
        with_reader!(self, pool => {
            let mut q = sqlx::query_scalar::<_, i64>(sql_text);
            if let Some(value) = bind {
                q = q.bind(value);
            }
            q.fetch_one(pool).await.map_err(StoreError::query("health query"))
        })
    }
}

/// The migration steps, by name. A failed step logs WARN with its name and start-up
/// goes on (AC-20); the step retries at the next open because it wrote nothing.
const BACKFILL_STEP: &str = "task_session_subagents.backfill";

#[async_trait]
impl Store for SqlStore {
    fn engine(&self) -> Engine {
        self.pools.engine()
    }

    fn target(&self) -> &str {
        &self.target
    }

    async fn upsert_session(&self, s: &SessionRecord) -> Result<(), StoreError> {
        let statement = &self.statements.upsert_session;
        with_writer!(self, pool => bind_session!(sqlx::query(statement), s)
            .execute(pool)
            .await
            .map(|_| ())
            .map_err(StoreError::query("session upsert")))
    }

    async fn upsert_turn(&self, t: &TurnRecord) -> Result<(), StoreError> {
        let statement = &self.statements.upsert_turn;
        with_writer!(self, pool => bind_turn!(sqlx::query(statement), t)
            .execute(pool)
            .await
            .map(|_| ())
            .map_err(StoreError::query("turn upsert")))
    }

    async fn upsert_message(&self, m: &MessageRecord) -> Result<(), StoreError> {
        let statement = &self.statements.upsert_message;
        with_writer!(self, pool => bind_message!(sqlx::query(statement), m)
            .execute(pool)
            .await
            .map(|_| ())
            .map_err(StoreError::query("message upsert")))
    }

    async fn upsert_subagent(&self, r: &SubagentRecord) -> Result<(), StoreError> {
        let statement = &self.statements.upsert_subagent;
        let binds = SubagentBinds::new(r);
        with_writer!(self, pool => bind_subagent!(sqlx::query(statement), &binds)
            .execute(pool)
            .await
            .map(|_| ())
            .map_err(StoreError::query("subagent upsert")))
    }

    /// One acquire of the writer connection, `BEGIN`, the statements, `COMMIT`. What a
    /// statement costs through sqlx is mostly its round trip to the connection's
    /// worker thread (SQLite) or the server (PostgreSQL), and outside a transaction
    /// each statement is also its own commit; a batch pays the acquire and the commit
    /// once. On SQLite a message upsert directly followed by a subagent upsert (one
    /// tool frame) goes as one two-statement query, so a frame costs one round trip.
    /// Any error drops the transaction, which rolls it back: all or nothing.
    async fn write_batch(&self, ops: &[WriteOp<'_>]) -> Result<(), StoreError> {
        if ops.is_empty() {
            return Ok(());
        }
        let st = &self.statements;
        with_writer!(self, pool => {
            let mut tx = pool.begin().await.map_err(StoreError::query("batch begin"))?;
            let mut i = 0;
            while i < ops.len() {
                let pair = match (ops[i], ops.get(i + 1), &st.message_then_subagent) {
                    (WriteOp::Message(m), Some(WriteOp::Subagent(r)), Some(both)) => {
                        Some((m, *r, both))
                    }
                    _ => None,
                };
                if let Some((m, r, both)) = pair {
                    let binds = SubagentBinds::new(r);
                    bind_subagent!(bind_message!(sqlx::query(both), m), &binds)
                        .execute(&mut *tx)
                        .await
                        .map_err(StoreError::query("message and subagent upsert"))?;
                    i += 2;
                    continue;
                }
                match ops[i] {
                    WriteOp::Session(s) => bind_session!(sqlx::query(&st.upsert_session), s)
                        .execute(&mut *tx)
                        .await
                        .map_err(StoreError::query("session upsert"))?,
                    WriteOp::Turn(t) => bind_turn!(sqlx::query(&st.upsert_turn), t)
                        .execute(&mut *tx)
                        .await
                        .map_err(StoreError::query("turn upsert"))?,
                    WriteOp::Message(m) => bind_message!(sqlx::query(&st.upsert_message), m)
                        .execute(&mut *tx)
                        .await
                        .map_err(StoreError::query("message upsert"))?,
                    WriteOp::Subagent(r) => {
                        let binds = SubagentBinds::new(r);
                        bind_subagent!(sqlx::query(&st.upsert_subagent), &binds)
                            .execute(&mut *tx)
                            .await
                            .map_err(StoreError::query("subagent upsert"))?
                    }
                };
                i += 1;
            }
            tx.commit().await.map_err(StoreError::query("batch commit"))
        })
    }

    async fn delete_session(&self, session_id: &str) -> Result<u64, StoreError> {
        with_writer!(self, pool => sqlx::query("DELETE FROM task_sessions WHERE id = $1")
            .bind(session_id)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
            .map_err(StoreError::query("session delete")))
    }

    async fn delete_turn(&self, turn_id: &str) -> Result<u64, StoreError> {
        with_writer!(self, pool => sqlx::query("DELETE FROM task_session_turns WHERE id = $1")
            .bind(turn_id)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
            .map_err(StoreError::query("turn delete")))
    }

    async fn subagents_by_session(&self, session_id: &str) -> Result<Vec<SubagentRow>, StoreError> {
        let statement = sql::select_subagents(self.engine(), "task_session_id");
        with_reader!(self, pool => {
            let rows = sqlx::query(&statement).bind(session_id).fetch_all(pool).await
                .map_err(StoreError::query("subagent read by session"))?;
            rows.iter().map(|row| Ok(decode_subagent!(row))).collect()
        })
    }

    async fn subagents_by_turn(&self, turn_id: &str) -> Result<Vec<SubagentRow>, StoreError> {
        let statement = sql::select_subagents(self.engine(), "turn_id");
        with_reader!(self, pool => {
            let rows = sqlx::query(&statement).bind(turn_id).fetch_all(pool).await
                .map_err(StoreError::query("subagent read by turn"))?;
            rows.iter().map(|row| Ok(decode_subagent!(row))).collect()
        })
    }

    async fn run_migrations(&self) -> Vec<StepOutcome> {
        let status = match self.backfill().await {
            Ok(status) => status,
            Err(err) => {
                tracing::warn!(migration = BACKFILL_STEP, error = %err, "migration failed");
                StepStatus::Failed {
                    error: err.to_string(),
                }
            }
        };
        vec![StepOutcome {
            name: BACKFILL_STEP,
            status,
        }]
    }

    async fn activation(&self) -> Result<Activation, StoreError> {
        self.read_activation()
            .await
            .map_err(StoreError::query("reading the activation keys"))
    }

    async fn health(&self) -> Result<Health, StoreError> {
        let activation = self.activation().await?;
        let Some(since_text) = activation.capture_since.clone() else {
            return Ok(Health {
                activation,
                figures: None,
            });
        };
        let since = Timestamp::parse(&since_text).map_err(|cause| StoreError::BadTimestamp {
            what: format!("fanout_meta.{}", sql::KEY_CAPTURE_SINCE),
            cause,
        })?;
        let e = self.engine();
        let since_bind = since.canonical();
        let shortfall = self
            .count(&sql::health_shortfall(e), Some(&since_bind))
            .await?;
        let excess = self
            .count(&sql::health_excess(e), Some(&since_bind))
            .await?;
        let last_sql = sql::health_last_observed(e);
        let last: Option<String> = with_reader!(self, pool => sqlx::query_scalar(&last_sql)
            .bind(&since_bind)
            .fetch_one(pool)
            .await
            .map_err(StoreError::query("health query")))?;
        let last_observed_at = last
            .map(|t| Timestamp::parse(&t))
            .transpose()
            .map_err(|cause| StoreError::BadTimestamp {
                what: "task_session_subagents.observed_at".to_owned(),
                cause,
            })?;
        Ok(Health {
            activation,
            figures: Some(HealthFigures {
                since,
                shortfall,
                excess,
                last_observed_at,
            }),
        })
    }

    async fn fanout_report(&self, scope: &ReportScope) -> Result<FanoutReport, StoreError> {
        let activation = self.activation().await?;
        report::fanout_report(self, scope, activation).await
    }

    async fn counts(&self) -> Result<TableCounts, StoreError> {
        let one = |table: &'static str| format!("SELECT COUNT(*) FROM {table}");
        Ok(TableCounts {
            sessions: self.count(&one("task_sessions"), None).await?,
            turns: self.count(&one("task_session_turns"), None).await?,
            messages: self.count(&one("task_session_messages"), None).await?,
            subagents: self.count(&one("task_session_subagents"), None).await?,
            subagents_live: self
                .count(
                    "SELECT COUNT(*) FROM task_session_subagents WHERE source = $1",
                    Some("live"),
                )
                .await?,
            subagents_backfill: self
                .count(
                    "SELECT COUNT(*) FROM task_session_subagents WHERE source = $1",
                    Some("backfill"),
                )
                .await?,
        })
    }
}

/// `sqlite://PATH` or `sqlite:PATH` -> PATH.
fn sqlite_path(url: &str) -> Option<&str> {
    url.strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
}

async fn open_sqlite(path: &str, target: &str, open: &OpenOptions) -> Result<Pools, StoreError> {
    if path.is_empty() {
        return Err(StoreError::InvalidUrl {
            url: target.to_owned(),
            reason: "the SQLite URL names no file (expected sqlite://PATH)".to_owned(),
        });
    }
    let open_err = |cause| StoreError::OpenSqlite {
        path: path.to_owned(),
        cause,
    };
    let base = SqliteConnectOptions::new()
        .filename(path)
        .foreign_keys(true)
        .busy_timeout(Duration::from_secs(5));
    let writer_opts = if open.read_only {
        // Creating it would turn a typo in --db into an empty database that reads as
        // "nothing written"; and a reader sets no journal mode (that is a write).
        if !std::path::Path::new(path).exists() {
            return Err(StoreError::NoDatabase {
                target: target.to_owned(),
                path: path.to_owned(),
            });
        }
        base.clone()
    } else {
        create_private_file(path).map_err(|err| open_err(sqlx::Error::Io(err)))?;
        base.clone()
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
    };
    // One writer connection: SQLite serialises writers anyway, and one connection
    // turns contention into queueing instead of SQLITE_BUSY.
    let writer = SqlitePoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(writer_opts)
        .await
        .map_err(open_err)?;
    // Touch the file for real: opening is lazy about permissions.
    sqlx::query("PRAGMA user_version")
        .execute(&writer)
        .await
        .map_err(open_err)?;
    let reader = SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(base.read_only(true))
        .await
        .map_err(open_err)?;
    Ok(Pools::Sqlite { writer, reader })
}

/// Creates a missing database file as 0600 (DESIGN 7: files fanout writes are private);
/// SQLite gives its `-wal` and `-shm` files the same mode. An existing file is left as is.
fn create_private_file(path: &str) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(err),
    }
}

async fn open_postgres(url: &str, target: &str, open: &OpenOptions) -> Result<Pools, StoreError> {
    let options = PgConnectOptions::from_str(url).map_err(|cause| StoreError::InvalidUrl {
        url: target.to_owned(),
        reason: cause.to_string(),
    })?;
    let connect_err = |cause| StoreError::ConnectPostgres {
        target: target.to_owned(),
        cause,
    };
    // One direct connection first: it fails fast with the real reason (refused, auth,
    // unknown database), where a pool would only report a timeout.
    PgConnection::connect_with(&options)
        .await
        .map_err(connect_err)?
        .close()
        .await
        .map_err(connect_err)?;
    // A reader's sessions refuse writes, so "read-only" is the server's promise too.
    let options = if open.read_only {
        options.options([("default_transaction_read_only", "on")])
    } else {
        options
    };
    let zone = open.postgres_session_time_zone.clone();
    let pool = PgPoolOptions::new()
        .after_connect(move |conn, _meta| {
            let zone = zone.clone();
            Box::pin(async move {
                if let Some(zone) = zone {
                    sqlx::query("SELECT set_config('TimeZone', $1, false)")
                        .bind(zone)
                        .execute(conn)
                        .await?;
                }
                Ok(())
            })
        })
        .max_connections(10)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await
        .map_err(connect_err)?;
    Ok(Pools::Postgres(pool))
}
