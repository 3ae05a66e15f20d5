//! The bulk writer: group commits ([`crate::Store::write_batch`]) for a writer that
//! waits on each of them anyway (an import), on a SQLite connection of its own,
//! statement by statement through prepared statements, on the calling thread.
//!
//! Why: through sqlx each statement's result is handed from its connection's worker
//! thread to the awaiting task, one context switch per statement. On the 256 MiB
//! bench history (37,500 upserts) that hand-off was most of the write time: the
//! upserts took 0.50 s through sqlx where the same statements, prepared once, take
//! about 0.2 s, and the context switches matched the statements one for one.
//!
//! Same statements ([`crate::sql`], the single-row upserts), same binds (the write
//! path's macros), same order (table by table, parents first), same transaction
//! (`BEGIN IMMEDIATE`, all or nothing, busy timeout): only the driver differs.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, ToSql, TransactionBehavior, params_from_iter};

use crate::api::WriteOp;
use crate::error::StoreError;
use crate::model::Engine;
use crate::model::ImportFileRecord;
use crate::read::RawImportFile;
use crate::sql;
use crate::write::{
    Statements, SubagentBinds, Table, bind_import_file, bind_message, bind_session, bind_subagent,
    bind_turn, bind_usage, in_table_order, offset_param,
};
use fanout_types::Timestamp;

/// The bind values of one upsert, in placeholder order; built by the same macros that
/// bind a sqlx query.
#[derive(Default)]
struct Binds<'a>(Vec<Box<dyn ToSql + 'a>>);

impl<'a> Binds<'a> {
    fn bind<T: ToSql + 'a>(mut self, value: T) -> Self {
        self.0.push(Box::new(value));
        self
    }
}

/// The bulk writer's connection.
pub(crate) struct BulkWriter {
    /// `None` once closed.
    connection: Mutex<Option<Connection>>,
    path: String,
}

impl BulkWriter {
    /// Opens `path`, which the store has already created and migrated.
    pub(crate) fn open(path: &str, busy_timeout: Duration) -> Result<Self, StoreError> {
        let err = |cause| StoreError::Bulk {
            op: "bulk open",
            path: path.to_owned(),
            cause,
        };
        let connection = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(err)?;
        connection.busy_timeout(busy_timeout).map_err(err)?;
        connection
            .pragma_update(None, "foreign_keys", true)
            .map_err(err)?;
        connection
            .pragma_update(None, "synchronous", "NORMAL")
            .map_err(err)?;
        Ok(BulkWriter {
            connection: Mutex::new(Some(connection)),
            path: path.to_owned(),
        })
    }

    /// One group commit: `BEGIN IMMEDIATE`, every upsert in table order, `COMMIT`. Any
    /// error rolls the transaction back (the `Transaction` is dropped uncommitted).
    pub(crate) fn write_batch(
        &self,
        st: &Statements,
        ops: &[WriteOp<'_>],
    ) -> Result<(), StoreError> {
        let err = |op| self.error(op);
        self.with_connection(|connection| {
            let tx = connection
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(err("batch begin"))?;
            for op in in_table_order(ops) {
                let table = Table::of(&op);
                let (_, statement) = st.chunk(table, 1);
                let mut statement = tx.prepare_cached(statement).map_err(err(table.op_name()))?;
                let subagent;
                let binds = match op {
                    WriteOp::Session(s) => bind_session!(Binds::default(), s),
                    WriteOp::Turn(t) => bind_turn!(Binds::default(), t),
                    WriteOp::Message(m) => bind_message!(Binds::default(), m),
                    WriteOp::Subagent(r) => {
                        subagent = SubagentBinds::new(r);
                        bind_subagent!(Binds::default(), &subagent)
                    }
                    WriteOp::Usage(u) => bind_usage!(Binds::default(), u),
                    WriteOp::ImportFile(f) => bind_import_file!(Binds::default(), f),
                    WriteOp::TranscriptMark(mark) => Binds::default()
                        .bind(&mark.execution_id)
                        .bind(offset_param(mark.applied_through))
                        .bind(Timestamp::now().canonical()),
                };
                statement
                    .execute(params_from_iter(binds.0))
                    .map_err(err(table.op_name()))?;
            }
            tx.commit().map_err(err("batch commit"))
        })
    }

    /// Runs `work` on the connection (an error once closed).
    fn with_connection<T>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut guard = self
            .connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match guard.as_mut() {
            Some(connection) => work(connection),
            None => Err(StoreError::Unavailable {
                target: format!("sqlite://{}", self.path),
                reason: "the bulk writer is closed".to_owned(),
            }),
        }
    }

    /// SQLite's error at step `op`.
    fn error(&self, op: &'static str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |cause| StoreError::Bulk {
            op,
            path: self.path.clone(),
            cause,
        }
    }

    /// Every `import_files` row ([`sql::select_import_files`]), read on this connection:
    /// an import reads them all before it starts, and through the driver's worker
    /// thread each row is a hand-off (8.6 ms for the bench history's 2,066 rows, a
    /// quarter of an unchanged re-import).
    pub(crate) fn import_files(&self) -> Result<Vec<ImportFileRecord>, StoreError> {
        let err = self.error("import files read");
        self.with_connection(|connection| {
            let mut statement = connection
                .prepare(&sql::select_import_files(Engine::Sqlite))
                .map_err(&err)?;
            let rows = statement
                .query_map([], |row| {
                    Ok(RawImportFile {
                        path: row.get("path")?,
                        size: row.get("size")?,
                        mtime: row.get("mtime")?,
                        head_sha256: row.get("head_sha256")?,
                        byte_offset: row.get("byte_offset")?,
                        imported_at: row.get("imported_at")?,
                    })
                })
                .map_err(&err)?;
            rows.map(|row| row.map_err(&err)?.into_record()).collect()
        })
    }

    /// Closes the connection (the store folds the WAL into the file after this).
    pub(crate) fn close(&self) {
        let connection = self
            .connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(connection) = connection
            && let Err((_, error)) = connection.close()
        {
            tracing::warn!(path = %self.path, %error, "cannot close the bulk writer's connection");
        }
    }
}

/// Runs blocking store work from async code: on a multi-threaded runtime the worker
/// hands its other tasks on first; elsewhere (a current-thread runtime) it just runs.
pub(crate) fn run_blocking<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) if runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}
