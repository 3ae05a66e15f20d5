//! Opening a database: the URL, the connections (SQLite pragmas and the private file,
//! PostgreSQL sessions), the schema version guard and the idempotent DDL (AC-17).

use std::future::Future;
use std::str::FromStr;
use std::time::{Duration, Instant};

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::error::{StoreError, is_sqlite_busy};
use crate::exec::{Pools, with_writer};
use crate::sql;

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
    /// SQLite: run group commits ([`crate::Store::write_batch`]) on a connection of
    /// their own, statement by statement on the calling thread, instead of through the
    /// driver's worker thread: about twice as fast for a writer that waits on each
    /// commit anyway (an import), but the calling thread blocks for the commit, so
    /// not for a writer that must stay responsive (the proxy). PostgreSQL ignores it.
    pub bulk_writes: bool,
}

/// Connects to `sqlite://PATH` or `postgres://…`; `target` is the redacted URL, for
/// messages.
pub(crate) async fn connect(
    url: &str,
    target: &str,
    options: &OpenOptions,
) -> Result<Pools, StoreError> {
    if let Some(path) = sqlite_path(url) {
        open_sqlite(path, target, options).await
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        open_postgres(url, target, options).await
    } else {
        Err(StoreError::InvalidUrl {
            url: target.to_owned(),
            reason: "expected sqlite://PATH or postgres://USER@HOST:PORT/DB".to_owned(),
        })
    }
}

/// The store a URL names, spelled one way, so two runs can tell whether they write the
/// same store without opening it (a transcript left to catch up names the store it
/// belongs to). SQLite: `sqlite://` and the file's absolute path, symlinks resolved as
/// far as the path exists (`fanout.db` in two directories are two stores, and
/// `./fanout.db` and its absolute path are one). Any other URL: as given, with its
/// password redacted (it is written to disk).
pub fn store_identity(url: &str) -> String {
    let Some(path) = sqlite_path(url).filter(|p| !p.is_empty()) else {
        return crate::error::redact_url(url);
    };
    let path = std::path::Path::new(path);
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let resolved = std::fs::canonicalize(&absolute).ok().or_else(|| {
        // Not created yet: resolve the directory and keep the name.
        let name = absolute.file_name()?;
        let dir = std::fs::canonicalize(absolute.parent()?).ok()?;
        Some(dir.join(name))
    });
    format!("sqlite://{}", resolved.unwrap_or(absolute).display())
}

/// `sqlite://PATH` or `sqlite:PATH` -> PATH.
pub(crate) fn sqlite_path(url: &str) -> Option<&str> {
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
        .busy_timeout(SQLITE_BUSY_TIMEOUT);
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
    let writer = retry_while_busy(|| async {
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(writer_opts.clone())
            .await?;
        // Touch the file for real: opening is lazy about permissions.
        sqlx::query("PRAGMA user_version").execute(&writer).await?;
        Ok(writer)
    })
    .await
    .map_err(open_err)?;
    let reader = SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(base.read_only(true))
        .await
        .map_err(open_err)?;
    Ok(Pools::Sqlite { writer, reader })
}

/// How long a SQLite connection waits for another's lock before it says "locked".
pub(crate) const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs `attempt` again while SQLite says BUSY, for up to the busy timeout. The busy
/// timeout alone does not cover opening: switching a new file to WAL needs it to
/// itself, and when two connections both want that, SQLite answers one of them BUSY
/// at once rather than wait (it sees a deadlock), so two proxies and an import
/// started together on a new file would fail to open.
async fn retry_while_busy<T, F, Fut>(mut attempt: F) -> Result<T, sqlx::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, sqlx::Error>>,
{
    let deadline = Instant::now() + SQLITE_BUSY_TIMEOUT;
    let mut pause = Duration::from_millis(2);
    loop {
        match attempt().await {
            Err(err) if is_sqlite_busy(&err) && Instant::now() < deadline => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            done => return done,
        }
    }
}

/// Creates a missing database file as 0600 (DESIGN 7: files fanout writes are private);
/// SQLite gives its `-wal` and `-shm` files the same mode. An existing file is left as is.
fn create_private_file(path: &str) -> std::io::Result<()> {
    match fanout_types::private_open_options()
        .write(true)
        .create_new(true)
        .open(path)
    {
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

/// Refuses a database written by a newer fanout; returns the schema version the
/// database records (`None`: no fanout schema yet).
pub(crate) async fn check_schema_version(
    pools: &Pools,
    target: &str,
) -> Result<Option<i64>, StoreError> {
    let schema_err = |cause| StoreError::Schema {
        target: target.to_owned(),
        cause,
    };
    let exists_sql = sql::table_exists(pools.engine());
    let exists: i64 = with_writer!(pools, pool => sqlx::query_scalar(exists_sql).bind("fanout_meta").fetch_one(pool).await.map_err(schema_err))?;
    if exists == 0 {
        return Ok(None);
    }
    let found: Option<String> = with_writer!(pools, pool => sqlx::query_scalar("SELECT value FROM fanout_meta WHERE key = $1")
        .bind(sql::KEY_SCHEMA_VERSION)
        .fetch_optional(pool)
        .await
        .map_err(schema_err))?;
    let found = found.and_then(|v| v.trim().parse::<i64>().ok());
    if let Some(found) = found
        && found > sql::SCHEMA_VERSION
    {
        return Err(StoreError::NewerSchema {
            target: target.to_owned(),
            found,
            supported: sql::SCHEMA_VERSION,
        });
    }
    Ok(found)
}

/// The idempotent DDL of AC-17, then the schema version this build writes.
pub(crate) async fn create_schema(pools: &Pools, target: &str) -> Result<(), StoreError> {
    let schema_err = |cause| StoreError::Schema {
        target: target.to_owned(),
        cause,
    };
    for statement in sql::schema(pools.engine()) {
        pools.execute(&statement, &[]).await.map_err(schema_err)?;
    }
    let version = sql::SCHEMA_VERSION.to_string();
    pools
        .execute(
            "INSERT INTO fanout_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            &[sql::KEY_SCHEMA_VERSION, &version],
        )
        .await
        .map_err(schema_err)?;
    Ok(())
}
