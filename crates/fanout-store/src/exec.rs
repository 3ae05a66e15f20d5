//! The execution layer: the connection pools of either engine and the few ways the rest
//! of the crate runs SQL on them. Everything above it (writes, migrations, health, row
//! reads, the report) is engine-neutral code that gets its SQL from [`crate::sql`] and
//! runs it here; only this module matches on the pools.

use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{FromRow, PgPool, SqlitePool};

use crate::error::StoreError;
use crate::model::Engine;
use crate::sql::NON_ARBITER_UNIQUE_INDEXES;

/// The pools of an open store. SQLite: one writer connection (SQLite serialises writers
/// anyway, and one connection turns contention into queueing instead of SQLITE_BUSY)
/// and a read-only reader pool. PostgreSQL: one pool for both.
pub(crate) enum Pools {
    Sqlite {
        writer: SqlitePool,
        reader: SqlitePool,
    },
    Postgres(PgPool),
}

/// Runs `$body` with `$pool` bound to the writer pool of whichever engine `$pools` is.
macro_rules! with_writer {
    ($pools:expr, $pool:ident => $body:expr) => {
        match $pools {
            $crate::exec::Pools::Sqlite { writer: $pool, .. } => $body,
            $crate::exec::Pools::Postgres($pool) => $body,
        }
    };
}
pub(crate) use with_writer;

/// Runs `$body` with `$pool` bound to the pool reads should use.
macro_rules! with_reader {
    ($pools:expr, $pool:ident => $body:expr) => {
        match $pools {
            Pools::Sqlite { reader: $pool, .. } => $body,
            Pools::Postgres($pool) => $body,
        }
    };
}

/// A row type every engine can decode: what [`Reader::fetch_all`] returns.
pub(crate) trait FromEngineRow:
    for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin
{
}

impl<T> FromEngineRow for T where
    T: for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin
{
}

impl Pools {
    pub(crate) fn engine(&self) -> Engine {
        match self {
            Pools::Sqlite { .. } => Engine::Sqlite,
            Pools::Postgres(_) => Engine::Postgres,
        }
    }

    /// The read side of these pools.
    pub(crate) fn reader(&self) -> Reader<'_> {
        Reader { pools: self }
    }

    /// The options SQLite's readers connect with (`None` on PostgreSQL).
    pub(crate) fn sqlite_reader_options(
        &self,
    ) -> Option<std::sync::Arc<sqlx::sqlite::SqliteConnectOptions>> {
        match self {
            Pools::Sqlite { reader, .. } => Some(reader.connect_options()),
            Pools::Postgres(_) => None,
        }
    }

    /// Runs one statement with text binds (`$1`… in order) on the writer; returns the
    /// rows it affected.
    pub(crate) async fn execute(
        &self,
        statement: &str,
        binds: &[&str],
    ) -> Result<u64, sqlx::Error> {
        with_writer!(self, pool => {
            let mut query = sqlx::query(statement);
            for value in binds {
                query = query.bind(*value);
            }
            query.execute(pool).await.map(|r| r.rows_affected())
        })
    }

    /// Closes every connection. `checkpoint`: a writing SQLite store first folds its WAL
    /// into the database file, so the file alone holds everything written (a copy of it
    /// is a whole database); a read-only one leaves the file alone.
    pub(crate) async fn close(&self, checkpoint: bool, target: &str) {
        match self {
            Pools::Sqlite { writer, reader } => {
                reader.close().await;
                // Explicitly, because the implicit checkpoint of the last connection to
                // close is skipped when another connection (a reader whose worker thread
                // has not finished closing) still has the file open: seen under load.
                // A checkpoint that fails or is blocked (another process still reading)
                // loses nothing; the WAL stays beside the file.
                if checkpoint && !writer.is_closed() {
                    let checkpoint: Result<(i64, i64, i64), _> =
                        sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)")
                            .fetch_one(writer)
                            .await;
                    match checkpoint {
                        Ok((0, _, _)) => {}
                        Ok(_) => {
                            tracing::debug!(%target, "WAL checkpoint at close blocked by a reader");
                        }
                        Err(err) => {
                            tracing::debug!(%target, error = %err, "WAL checkpoint at close failed");
                        }
                    }
                }
                writer.close().await;
            }
            Pools::Postgres(pool) => pool.close().await,
        }
    }
}

/// The read side of an open store: every read (row reads, activation, health, counts,
/// the report) goes through it, on the SQLite reader pool or the PostgreSQL pool.
#[derive(Clone, Copy)]
pub(crate) struct Reader<'a> {
    pools: &'a Pools,
}

impl Reader<'_> {
    /// The engine, for the SQL generator.
    pub(crate) fn engine(self) -> Engine {
        self.pools.engine()
    }

    /// Runs one read with text binds (`$1`… in order; `None` binds NULL) and decodes
    /// every row as `T`; a failure is the `op` that failed.
    pub(crate) async fn fetch_all<T: FromEngineRow>(
        self,
        op: &'static str,
        statement: &str,
        binds: &[Option<&str>],
    ) -> Result<Vec<T>, StoreError> {
        self.fetch_all_raw(statement, binds)
            .await
            .map_err(StoreError::query(op))
    }

    /// [`Reader::fetch_all`] with the driver's error as it is.
    pub(crate) async fn fetch_all_raw<T: FromEngineRow>(
        self,
        statement: &str,
        binds: &[Option<&str>],
    ) -> Result<Vec<T>, sqlx::Error> {
        with_reader!(self.pools, pool => {
            let mut query = sqlx::query_as::<_, T>(statement);
            for value in binds {
                query = query.bind(*value);
            }
            query.fetch_all(pool).await
        })
    }

    /// [`Reader::fetch_all`] of a statement that returns exactly one row.
    pub(crate) async fn fetch_one<T: FromEngineRow>(
        self,
        op: &'static str,
        statement: &str,
        binds: &[Option<&str>],
    ) -> Result<T, StoreError> {
        self.fetch_all::<T>(op, statement, binds)
            .await?
            .into_iter()
            .next()
            .ok_or(StoreError::Query {
                op,
                cause: sqlx::Error::RowNotFound,
            })
    }

    /// One integer of a one-row, one-column statement (a `COUNT(*)`).
    pub(crate) async fn count(
        self,
        op: &'static str,
        statement: &str,
        binds: &[Option<&str>],
    ) -> Result<i64, StoreError> {
        let (n,): (i64,) = self.fetch_one(op, statement, binds).await?;
        Ok(n)
    }
}

/// How many times in all a statement that lost an insert race runs. The second run sees
/// the winner's committed row; a third covers that row being deleted and raced for again.
const INSERT_RACE_ATTEMPTS: usize = 3;

/// Runs `attempt` again when it lost an insert race: a unique violation of one of
/// [`NON_ARBITER_UNIQUE_INDEXES`]. PostgreSQL raises it only once the racing insert has
/// committed, so the same statement, run again, finds that row through its conflict
/// target and takes the `DO UPDATE` (or `DO NOTHING`) path: still one statement per
/// merge, the merge rules unchanged, nothing read first. An attempt that is a
/// transaction is retried whole; the failed one rolled back. SQLite has one writer, so
/// it never loses this race (and names no constraint), and never retries.
pub(crate) async fn retry_lost_insert_race<T, E, F, Fut>(mut attempt: F) -> Result<T, E>
where
    E: DriverError,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut attempts = 1;
    loop {
        match attempt().await {
            Err(err) if attempts < INSERT_RACE_ATTEMPTS && lost_insert_race(&err) => {
                attempts += 1;
                tracing::debug!(
                    attempts,
                    "lost an insert race: running the same statement again"
                );
            }
            outcome => return outcome,
        }
    }
}

fn lost_insert_race(err: &impl DriverError) -> bool {
    match err.driver_error() {
        Some(sqlx::Error::Database(db)) => {
            db.is_unique_violation()
                && db
                    .constraint()
                    .is_some_and(|index| NON_ARBITER_UNIQUE_INDEXES.contains(&index))
        }
        _ => false,
    }
}

/// An error that may carry the driver's error.
pub(crate) trait DriverError {
    fn driver_error(&self) -> Option<&sqlx::Error>;
}

impl DriverError for sqlx::Error {
    fn driver_error(&self) -> Option<&sqlx::Error> {
        Some(self)
    }
}

impl DriverError for StoreError {
    fn driver_error(&self) -> Option<&sqlx::Error> {
        match self {
            StoreError::Query { cause, .. } => Some(cause),
            _ => None,
        }
    }
}
