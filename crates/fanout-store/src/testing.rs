//! Test support shared by every crate's test suite (feature `testing`): a fresh store
//! per test on a real SQLite file, or on a fresh database of the PostgreSQL server named
//! by `FANOUT_TEST_POSTGRES_URL`; and [`LogCapture`], the WARN lines a test provokes.
//!
//! PostgreSQL tests are never silently skipped where they are required: when
//! `FANOUT_REQUIRE_POSTGRES=1` or `CI=true` and no server URL is set, they fail.

use std::str::FromStr;
use std::sync::{Arc, Mutex};

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};

use crate::{MessageRecord, SessionRecord, SqlStore, Store, StoreError, Timestamp, TurnRecord};

/// The variable naming the PostgreSQL server tests create their databases on (an
/// admin URL; `scripts/with-postgres.sh` sets it).
pub const POSTGRES_URL_VAR: &str = "FANOUT_TEST_POSTGRES_URL";

/// A fresh, empty database that lives as long as this value.
pub struct TestDb {
    /// The database's URL, for [`SqlStore::open`] or a plain driver connection.
    pub url: String,
    /// [`TestDb::open`] opens it with [`crate::OpenOptions::bulk_writes`].
    pub bulk_writes: bool,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    /// A new SQLite file in a private temporary directory.
    pub fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().expect("temporary directory");
        let url = format!("sqlite://{}", dir.path().join("fanout.db").display());
        TestDb {
            url,
            bulk_writes: false,
            _dir: Some(dir),
        }
    }

    /// A new SQLite file whose writing stores run their group commits on a connection
    /// of their own ([`crate::OpenOptions::bulk_writes`], as `fanout import` does).
    pub fn sqlite_bulk() -> TestDb {
        TestDb {
            bulk_writes: true,
            ..TestDb::sqlite()
        }
    }

    /// A new database on the test PostgreSQL server, or `None` when no server is
    /// configured and none is required (the caller then skips, saying so).
    pub async fn postgres() -> Option<TestDb> {
        let Ok(admin_url) = std::env::var(POSTGRES_URL_VAR) else {
            let required = std::env::var("FANOUT_REQUIRE_POSTGRES").is_ok_and(|v| v == "1")
                || fanout_types::in_ci();
            assert!(
                !required,
                "{POSTGRES_URL_VAR} is not set but PostgreSQL tests are required here (CI=true or FANOUT_REQUIRE_POSTGRES=1); run them through scripts/with-postgres.sh"
            );
            eprintln!("skipping a PostgreSQL test: {POSTGRES_URL_VAR} is not set");
            return None;
        };
        let name = format!("fanout_t_{}", uuid::Uuid::new_v4().simple());
        let options =
            PgConnectOptions::from_str(&admin_url).expect("FANOUT_TEST_POSTGRES_URL parses");
        let mut admin = PgConnection::connect_with(&options)
            .await
            .expect("connect to the test PostgreSQL server");
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await
            .expect("create a test database");
        admin.close().await.ok();
        Some(TestDb {
            url: with_database(&admin_url, &name),
            bulk_writes: false,
            _dir: None,
        })
    }

    /// Another fresh, empty database on the same engine as this one (a test that
    /// imports several fixtures into separate stores on the engine it was given).
    pub async fn fresh_like(&self) -> TestDb {
        if self.url.starts_with("sqlite:") {
            TestDb {
                bulk_writes: self.bulk_writes,
                ..TestDb::sqlite()
            }
        } else {
            TestDb::postgres()
                .await
                .expect("a PostgreSQL test database exists, so the server is configured")
        }
    }

    /// Opens a writing store on it (creating the schema, running the migrations).
    pub async fn open(&self) -> Result<SqlStore, StoreError> {
        let options = crate::OpenOptions {
            bulk_writes: self.bulk_writes,
            ..crate::OpenOptions::default()
        };
        SqlStore::open_with(&self.url, &options).await
    }
}

/// A session started (and last updated) at `started_at`, execution `exec-1`.
pub fn session_record(id: &str, task_id: &str, started_at: Timestamp) -> SessionRecord {
    SessionRecord {
        id: id.into(),
        task_id: task_id.into(),
        acp_session_id: None,
        agent_execution_id: Some("exec-1".into()),
        agent_command: None,
        cwd: None,
        started_at,
        completed_at: None,
        updated_at: started_at,
    }
}

/// Writes session `session` of `task` and its one open turn `{session}-turn`, both
/// started at `at`: the parents most write tests need.
pub async fn add_session_with_turn(store: &SqlStore, session: &str, task: &str, at: Timestamp) {
    store
        .upsert_session(&session_record(session, task, at))
        .await
        .expect("session");
    store
        .upsert_turn(&turn_record(&format!("{session}-turn"), session, task, at))
        .await
        .expect("turn");
}

/// An open turn started (and last updated) at `started_at`.
pub fn turn_record(id: &str, session_id: &str, task_id: &str, started_at: Timestamp) -> TurnRecord {
    TurnRecord {
        id: id.into(),
        task_session_id: session_id.into(),
        task_id: task_id.into(),
        started_at,
        completed_at: None,
        stop_reason: None,
        updated_at: started_at,
    }
}

/// A completed `reviewer` subagent launch as a tool-call message in the DESIGN 4.1
/// metadata shape, with id `m-{tool_call_id}`: what the backfill and the health
/// shortfall read.
pub fn subagent_message_record(
    session_id: &str,
    task_id: &str,
    turn_id: &str,
    tool_call_id: &str,
    created_at: Timestamp,
) -> MessageRecord {
    let metadata = serde_json::json!({
        "tool_call_id": tool_call_id,
        "title": "Task",
        "status": "completed",
        "normalized": {"kind": "subagent_task", "subagent_task": {
            "description": "review", "prompt": "", "subagent_type": "reviewer"
        }}
    });
    MessageRecord {
        id: format!("m-{tool_call_id}"),
        task_session_id: session_id.into(),
        task_id: Some(task_id.into()),
        turn_id: Some(turn_id.into()),
        author_type: Some("agent".into()),
        message_type: Some("tool_call".into()),
        content: Some("Task".into()),
        metadata: metadata.to_string(),
        created_at,
        updated_at: created_at,
    }
}

/// Replaces the database name of a `postgres://…/DB?query` URL.
pub fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let after_scheme = base.find("://").map(|i| i + 3).unwrap_or(0);
    let host_end = base[after_scheme..]
        .find('/')
        .map(|i| after_scheme + i)
        .unwrap_or(base.len());
    let mut out = format!("{}/{database}", &base[..host_end]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// Runs one async test body against SQLite (with and without bulk writes), and against
/// PostgreSQL when available. Expands to a module with a `sqlite`, a `sqlite_bulk` and
/// a `postgres` test.
#[macro_export]
macro_rules! both_engines {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                let db = $crate::testing::TestDb::sqlite();
                super::$name(db).await;
            }
            /// SQLite with the group commits of `fanout import` (bulk writes).
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite_bulk() {
                let db = $crate::testing::TestDb::sqlite_bulk();
                super::$name(db).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                if let Some(db) = $crate::testing::TestDb::postgres().await {
                    super::$name(db).await;
                }
            }
        }
    )*};
}

/// The WARN (and worse) lines logged on this thread while installed, as plain text:
/// what an operator reads, so a test can assert what a WARN names (AC-20, AC-27).
#[derive(Clone, Default)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl LogCapture {
    /// Makes this capture the current thread's subscriber until the guard drops.
    /// A `#[tokio::test]` body runs on the test's thread, so what it awaits directly
    /// logs here (spawned tasks may run elsewhere).
    pub fn install(&self) -> tracing::dispatcher::DefaultGuard {
        let subscriber = tracing_subscriber::fmt()
            .with_writer(self.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::WARN)
            .finish();
        // A test on another thread may meet a callsite first, with no subscriber, and
        // cache "never" for it while this one is being registered (tracing-core
        // computes a new callsite's interest and stores it in two steps): seen as
        // missing WARNs under load, twice. A process-wide subscriber that wants WARN
        // means no WARN callsite is ever "never"; it throws the lines away.
        static GLOBAL: std::sync::Once = std::sync::Once::new();
        GLOBAL.call_once(|| {
            let sink = tracing_subscriber::fmt()
                .with_writer(std::io::sink)
                .with_max_level(tracing::Level::WARN)
                .finish();
            // Someone else's global subscriber does as well.
            let _ = tracing::subscriber::set_global_default(sink);
        });
        let guard = tracing::dispatcher::set_default(&tracing::Dispatch::new(subscriber));
        tracing::callsite::rebuild_interest_cache();
        guard
    }

    /// Everything logged so far.
    pub fn text(&self) -> String {
        let bytes = self.0.lock().expect("log buffer").clone();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl std::io::Write for LogCapture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogCapture {
    type Writer = LogCapture;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Benchmark support shared by the store and capture benches: sizes from the
/// environment, and the bare prepared-statement baseline their ratios are against.
pub mod bench {
    use sqlx::sqlite::{SqlitePool, SqlitePoolOptions};

    use crate::{SubagentRecord, Timestamp};

    pub use fanout_types::bench::{is_quick, size};

    /// A one-connection pool on the SQLite file at `url` with the store's write pragmas,
    /// so a bare loop and the store differ only in the store layer.
    pub async fn bare_sqlite_pool(url: &str) -> Result<SqlitePool, sqlx::Error> {
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect(url)
            .await?;
        for pragma in ["PRAGMA synchronous = NORMAL", "PRAGMA foreign_keys = ON"] {
            sqlx::query(pragma).execute(&pool).await?;
        }
        Ok(pool)
    }

    /// Runs the subagent merge `statement` (see `SqlStore::subagent_upsert_statement`)
    /// once with `record`'s values bound as they are: no value rules, no row-id
    /// derivation, no API; the baseline the store's writer is measured against.
    pub async fn bare_subagent_upsert(
        pool: &SqlitePool,
        statement: &str,
        row_id: String,
        record: &SubagentRecord,
    ) -> Result<(), sqlx::Error> {
        let now = Timestamp::now().canonical();
        sqlx::query(statement)
            .bind(row_id)
            .bind(&record.task_session_id)
            .bind(&record.task_id)
            .bind(&record.turn_id)
            .bind(&record.tool_call_id)
            .bind(&record.agent_execution_id)
            .bind(&record.parent_tool_call_id)
            .bind(&record.subagent_type)
            .bind(&record.description)
            .bind(&record.agent_id)
            .bind(&record.child_session_id)
            .bind(&record.model)
            .bind(&record.agent_status)
            .bind(&record.tool_status)
            .bind(i64::from(record.is_async))
            .bind(record.total_tokens)
            .bind(record.tool_use_count)
            .bind(record.duration_ms)
            .bind("live")
            .bind(&now)
            .bind(record.settled_at.map(|t| t.canonical()))
            .bind(&now)
            .execute(pool)
            .await
            .map(drop)
    }
}

/// Copies a folder tree (a fixture) into `to`, creating it.
pub fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("create the copy's folder");
    for entry in std::fs::read_dir(from).expect("read the fixture folder") {
        let entry = entry.expect("a fixture entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("its type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a fixture file");
        }
    }
}
