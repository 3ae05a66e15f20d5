//! The write path: the hot-path statements, their binds (where the value rules the
//! store enforces on its own are applied again), the single-record upserts and the
//! group commit.

use std::sync::OnceLock;

use uuid::Uuid;

use crate::api::WriteOp;
use crate::error::StoreError;
use crate::exec::{Pools, retry_lost_insert_race, with_writer};
use crate::model::*;
use crate::sql;
use fanout_types::Timestamp;

/// Namespace for deterministic subagent row ids (UUID v5).
const SUBAGENT_ID_NAMESPACE: Uuid = Uuid::from_u128(0x6f1d_2c3b_8a4e_4f5a_9b0c_7d6e_5f4a_3b21);

/// The deterministic id of a live subagent row: re-import never duplicates.
pub fn subagent_row_id(
    task_session_id: &str,
    agent_execution_id: &str,
    tool_call_id: &str,
) -> String {
    let name = format!("{task_session_id}\u{1f}{agent_execution_id}\u{1f}{tool_call_id}");
    Uuid::new_v5(&SUBAGENT_ID_NAMESPACE, name.as_bytes()).to_string()
}

/// Namespace for deterministic usage-ledger row ids (UUID v5).
const USAGE_ID_NAMESPACE: Uuid = Uuid::from_u128(0x1b7e_94c2_5d3a_4f86_a0e1_c8f2_6d59_0b47);

/// The deterministic id of a usage-ledger row: (session row id, response id), the
/// session length-prefixed so no two pairs collide. Re-import never duplicates.
pub fn usage_row_id(task_session_id: &str, response_id: &str) -> String {
    let name = format!("{}:{task_session_id}{response_id}", task_session_id.len());
    Uuid::new_v5(&USAGE_ID_NAMESPACE, name.as_bytes()).to_string()
}

/// The hot-path statements, generated once per store (they are also sqlx's
/// prepared-statement cache keys).
pub(crate) struct Statements {
    /// Per [`Table`], the single upsert and its group-commit queries: `(n, the upsert n
    /// times)`, largest `n` first, ending with `n = 1`. Each is written out when first
    /// used: all of them take 770 kB, more than a proxy's whole heap otherwise.
    batched: [Batched; TABLES.len()],
    begin_write: &'static str,
}

/// One table's single upsert and its group-commit queries by size.
type Batched = (String, Vec<(usize, OnceLock<String>)>);

/// How many upserts of one table a group commit sends as one query on SQLite (each
/// size a cached prepared statement; a run is cut into the largest that fit).
const SQLITE_CHUNK_SIZES: [usize; 7] = [64, 32, 16, 8, 4, 2, 1];

/// The tables a group commit writes, in the order it writes them: a row's parents
/// (its session, its turn) before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Table {
    Session,
    Turn,
    Message,
    Subagent,
    Usage,
    ImportFile,
    /// How far a transcript is applied: last, so it commits with the writes it covers.
    TranscriptMark,
}

const TABLES: [Table; 7] = [
    Table::Session,
    Table::Turn,
    Table::Message,
    Table::Subagent,
    Table::Usage,
    Table::ImportFile,
    Table::TranscriptMark,
];

impl Table {
    pub(crate) fn of(op: &WriteOp<'_>) -> Self {
        match op {
            WriteOp::Session(_) => Table::Session,
            WriteOp::Turn(_) => Table::Turn,
            WriteOp::Message(_) => Table::Message,
            WriteOp::Subagent(_) => Table::Subagent,
            WriteOp::Usage(_) => Table::Usage,
            WriteOp::ImportFile(_) => Table::ImportFile,
            WriteOp::TranscriptMark(_) => Table::TranscriptMark,
        }
    }

    /// What a failure of its upsert is called.
    pub(crate) fn op_name(self) -> &'static str {
        match self {
            Table::Session => "session upsert",
            Table::Turn => "turn upsert",
            Table::Message => "message upsert",
            Table::Subagent => "subagent upsert",
            Table::Usage => "usage upsert",
            Table::ImportFile => "import file upsert",
            Table::TranscriptMark => "transcript mark upsert",
        }
    }
}

impl Statements {
    pub(crate) fn new(e: Engine) -> Self {
        let sizes: &[usize] = match e {
            Engine::Sqlite => &SQLITE_CHUNK_SIZES,
            Engine::Postgres => &[1],
        };
        let batched = [
            sql::upsert_session(e),
            sql::upsert_turn(e),
            sql::upsert_message(e),
            sql::upsert_subagent(e),
            sql::upsert_usage(e),
            sql::upsert_import_file(e),
            sql::upsert_transcript_mark(e),
        ]
        .map(|single| {
            let queries = sizes.iter().map(|&n| (n, OnceLock::new())).collect();
            (single, queries)
        });
        Statements {
            batched,
            begin_write: sql::begin_write(e),
        }
    }

    /// The single upsert of `table`.
    pub(crate) fn single(&self, table: Table) -> &str {
        &self.batched[table as usize].0
    }

    /// The largest group-commit query of `table` for at most `run` upserts.
    pub(crate) fn chunk(&self, table: Table, run: usize) -> (usize, &str) {
        let (single, queries) = &self.batched[table as usize];
        queries
            .iter()
            .find(|(n, _)| *n <= run)
            .or(queries.last())
            .map_or((1, ""), |(n, query)| {
                (*n, query.get_or_init(|| sql::repeated(single, *n)).as_str())
            })
    }
}

/// The bind values of one subagent upsert that are computed rather than read.
pub(crate) struct SubagentBinds<'a> {
    pub(crate) r: &'a SubagentRecord,
    pub(crate) id: String,
    pub(crate) execution: &'a str,
    pub(crate) observed_at: String,
    pub(crate) settled_at: Option<String>,
    pub(crate) updated_at: String,
}

impl<'a> SubagentBinds<'a> {
    pub(crate) fn new(r: &'a SubagentRecord) -> Self {
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
        let s: &$crate::model::SessionRecord = $s;
        $query
            .bind(&s.id)
            .bind(&s.task_id)
            .bind($crate::write::non_empty(&s.acp_session_id))
            .bind($crate::write::non_empty(&s.agent_execution_id))
            .bind($crate::write::non_empty(&s.agent_command))
            .bind($crate::write::non_empty(&s.cwd))
            .bind(s.started_at.canonical())
            .bind(s.completed_at.map(|t| t.canonical()))
            .bind(s.updated_at.canonical())
    }};
}

/// Appends the binds of [`sql::upsert_turn`] to `$query`.
macro_rules! bind_turn {
    ($query:expr, $t:expr) => {{
        let t: &$crate::model::TurnRecord = $t;
        $query
            .bind(&t.id)
            .bind(&t.task_session_id)
            .bind(&t.task_id)
            .bind(t.started_at.canonical())
            .bind(t.completed_at.map(|x| x.canonical()))
            .bind($crate::write::non_empty(&t.stop_reason))
            .bind(t.updated_at.canonical())
    }};
}

/// Appends the binds of [`sql::upsert_message`] to `$query`.
macro_rules! bind_message {
    ($query:expr, $m:expr) => {{
        let m: &$crate::model::MessageRecord = $m;
        $query
            .bind(&m.id)
            .bind(&m.task_session_id)
            .bind($crate::write::non_empty(&m.task_id))
            .bind($crate::write::non_empty(&m.turn_id))
            .bind($crate::write::non_empty(&m.author_type))
            .bind($crate::write::non_empty(&m.message_type))
            .bind($crate::write::non_empty(&m.content))
            .bind(&m.metadata)
            .bind(m.created_at.canonical())
            .bind(m.updated_at.canonical())
    }};
}

/// Appends the binds of [`sql::upsert_subagent`] to `$query`.
macro_rules! bind_subagent {
    ($query:expr, $b:expr) => {{
        let b: &$crate::write::SubagentBinds<'_> = $b;
        let r = b.r;
        $query
            .bind(&b.id)
            .bind(&r.task_session_id)
            .bind(&r.task_id)
            .bind($crate::write::non_empty(&r.turn_id))
            .bind(&r.tool_call_id)
            .bind(b.execution)
            .bind($crate::write::non_empty(&r.parent_tool_call_id))
            .bind($crate::write::non_empty(&r.subagent_type))
            .bind($crate::write::non_empty(&r.description))
            .bind($crate::write::non_empty(&r.agent_id))
            .bind($crate::write::non_empty(&r.child_session_id))
            .bind($crate::write::non_empty(&r.model))
            .bind($crate::write::non_empty(&r.agent_status))
            .bind($crate::write::non_empty(&r.tool_status))
            .bind(i64::from(r.is_async))
            .bind($crate::write::metric(r.total_tokens, true))
            .bind($crate::write::metric(r.tool_use_count, false))
            .bind($crate::write::metric(r.duration_ms, true))
            .bind(r.source.as_str())
            .bind(&b.observed_at)
            .bind(&b.settled_at)
            .bind(&b.updated_at)
    }};
}

/// Appends the binds of [`sql::upsert_usage`] to `$query`.
macro_rules! bind_usage {
    ($query:expr, $u:expr) => {{
        let u: &$crate::model::UsageRecord = $u;
        let observed_at = u.observed_at.canonical();
        $query
            .bind($crate::write::usage_row_id(
                &u.task_session_id,
                &u.response_id,
            ))
            .bind(&u.task_session_id)
            .bind(&u.task_id)
            .bind($crate::write::non_empty(&u.turn_id))
            .bind($crate::write::non_empty(&u.subagent_tool_call_id))
            .bind(
                $crate::write::non_empty(&u.agent_execution_id)
                    .unwrap_or($crate::model::UNKNOWN_EXECUTION),
            )
            .bind(&u.response_id)
            .bind($crate::write::non_empty(&u.model))
            .bind($crate::write::tokens(u.tokens.input_tokens))
            .bind($crate::write::tokens(u.tokens.output_tokens))
            .bind($crate::write::tokens(u.tokens.cache_creation_tokens))
            .bind($crate::write::tokens(u.tokens.cache_read_tokens))
            .bind($crate::write::tokens(u.tokens.reasoning_tokens))
            .bind(u.source.as_str())
            .bind(observed_at.clone())
            .bind(observed_at)
    }};
}

/// Appends the binds of [`sql::upsert_import_file`] to `$query`.
macro_rules! bind_import_file {
    ($query:expr, $f:expr) => {{
        let f: &$crate::model::ImportFileRecord = $f;
        $query
            .bind(&f.path)
            .bind(f.size)
            .bind(f.mtime)
            .bind(&f.head_sha256)
            .bind(f.offset)
            .bind(f.imported_at.canonical())
    }};
}

// The bulk writer binds the same values in the same order (crate::bulk).
pub(crate) use {
    bind_import_file, bind_message, bind_session, bind_subagent, bind_turn, bind_usage,
};

/// A token figure as the ledger stores it: negative is NULL; 0 is a report.
pub(crate) fn tokens(value: Option<i64>) -> Option<i64> {
    value.filter(|v| *v >= 0)
}

pub(crate) fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.is_empty())
}

/// A metric as the contract stores it: negative is NULL (AC-9), and 0 is NULL where 0
/// means "not reported" (AC-7a).
pub(crate) fn metric(value: Option<i64>, zero_is_unreported: bool) -> Option<i64> {
    value.filter(|v| *v > 0 || (*v == 0 && !zero_is_unreported))
}

pub(crate) async fn upsert_session(
    pools: &Pools,
    st: &Statements,
    s: &SessionRecord,
) -> Result<(), StoreError> {
    with_writer!(pools, pool => bind_session!(sqlx::query(st.single(Table::Session)), s)
        .execute(pool)
        .await
        .map(|_| ())
        .map_err(StoreError::query("session upsert")))
}

pub(crate) async fn upsert_turn(
    pools: &Pools,
    st: &Statements,
    t: &TurnRecord,
) -> Result<(), StoreError> {
    with_writer!(pools, pool => bind_turn!(sqlx::query(st.single(Table::Turn)), t)
        .execute(pool)
        .await
        .map(|_| ())
        .map_err(StoreError::query("turn upsert")))
}

pub(crate) async fn upsert_message(
    pools: &Pools,
    st: &Statements,
    m: &MessageRecord,
) -> Result<(), StoreError> {
    with_writer!(pools, pool => bind_message!(sqlx::query(st.single(Table::Message)), m)
        .execute(pool)
        .await
        .map(|_| ())
        .map_err(StoreError::query("message upsert")))
}

pub(crate) async fn upsert_subagent(
    pools: &Pools,
    st: &Statements,
    r: &SubagentRecord,
) -> Result<(), StoreError> {
    let binds = SubagentBinds::new(r);
    retry_lost_insert_race(|| async {
        with_writer!(pools, pool => bind_subagent!(sqlx::query(st.single(Table::Subagent)), &binds)
            .execute(pool)
            .await
            .map(|_| ())
            .map_err(StoreError::query("subagent upsert")))
    })
    .await
}

pub(crate) async fn upsert_usage(
    pools: &Pools,
    st: &Statements,
    u: &UsageRecord,
) -> Result<(), StoreError> {
    retry_lost_insert_race(|| async {
        with_writer!(pools, pool => bind_usage!(sqlx::query(st.single(Table::Usage)), u)
            .execute(pool)
            .await
            .map(|_| ())
            .map_err(StoreError::query("usage upsert")))
    })
    .await
}

pub(crate) async fn upsert_import_file(
    pools: &Pools,
    st: &Statements,
    f: &ImportFileRecord,
) -> Result<(), StoreError> {
    with_writer!(pools, pool => bind_import_file!(sqlx::query(st.single(Table::ImportFile)), f)
        .execute(pool)
        .await
        .map(|_| ())
        .map_err(StoreError::query("import file upsert")))
}

/// One acquire of the writer connection, `BEGIN` ([`sql::begin_write`]: on SQLite
/// `BEGIN IMMEDIATE`, so a lock held by another process is waited for within the busy
/// timeout), the statements, `COMMIT`. What a
/// statement costs through sqlx is mostly its round trip to the connection's worker
/// thread (SQLite) or the server (PostgreSQL), and outside a transaction each statement
/// is also its own commit; a batch pays the acquire and the commit once. The upserts run
/// table by table (sessions, turns, messages, subagents, usage, import files: parents
/// first), each table's in the order given, so every row meets the same merges in the
/// same order; on SQLite each run of one table's upserts goes as a few multi-statement
/// queries ([`sql::repeated`]), so a batch costs a handful of round trips per table.
/// Any error drops the transaction, which rolls it back: all or nothing. A batch that
/// lost an insert race runs again whole ([`retry_lost_insert_race`]).
pub(crate) async fn write_batch(
    pools: &Pools,
    st: &Statements,
    ops: &[WriteOp<'_>],
) -> Result<(), StoreError> {
    if ops.is_empty() {
        return Ok(());
    }
    let ordered = in_table_order(ops);
    retry_lost_insert_race(|| write_batch_once(pools, st, &ordered)).await
}

/// A batch's upserts table by table, parents first; stable, so each table's upserts
/// keep their order.
pub(crate) fn in_table_order<'a>(ops: &[WriteOp<'a>]) -> Vec<WriteOp<'a>> {
    let mut ordered: Vec<WriteOp<'a>> = ops.to_vec();
    ordered.sort_by_key(Table::of);
    ordered
}

async fn write_batch_once(
    pools: &Pools,
    st: &Statements,
    ops: &[WriteOp<'_>],
) -> Result<(), StoreError> {
    with_writer!(pools, pool => {
        let mut tx = pool
            .begin_with(st.begin_write)
            .await
            .map_err(StoreError::query("batch begin"))?;
        let mut rest = ops;
        while let Some(first) = rest.first() {
            let table = Table::of(first);
            let run = rest.iter().take_while(|op| Table::of(op) == table).count();
            let (n, statement) = st.chunk(table, run);
            let (chunk, after) = rest.split_at(n.min(rest.len()));
            rest = after;
            // Computed binds must outlive the query that borrows them.
            let subagents: Vec<SubagentBinds<'_>> = chunk
                .iter()
                .filter_map(|op| match op {
                    WriteOp::Subagent(r) => Some(SubagentBinds::new(r)),
                    _ => None,
                })
                .collect();
            let mut query = sqlx::query(statement);
            let mut subagent = subagents.iter();
            for op in chunk {
                query = match *op {
                    WriteOp::Session(s) => bind_session!(query, s),
                    WriteOp::Turn(t) => bind_turn!(query, t),
                    WriteOp::Message(m) => bind_message!(query, m),
                    // `subagents` holds one per subagent upsert of the chunk, in order.
                    WriteOp::Subagent(_) => match subagent.next() {
                        Some(b) => bind_subagent!(query, b),
                        None => query,
                    },
                    WriteOp::Usage(u) => bind_usage!(query, u),
                    WriteOp::ImportFile(f) => bind_import_file!(query, f),
                    WriteOp::TranscriptMark(mark) => query
                        .bind(&mark.execution_id)
                        .bind(offset_param(mark.applied_through))
                        .bind(Timestamp::now().canonical()),
                };
            }
            query
                .execute(&mut *tx)
                .await
                .map_err(StoreError::query(table.op_name()))?;
        }
        tx.commit().await.map_err(StoreError::query("batch commit"))
    })
}

/// A byte offset as the signed 64-bit integer both engines store (no file is 2^63 bytes).
pub(crate) fn offset_param(offset: u64) -> i64 {
    i64::try_from(offset).unwrap_or(i64::MAX)
}

/// The applied offset of one transcript ([`sql::select_transcript_mark`]).
pub(crate) async fn transcript_applied(
    pools: &Pools,
    execution_id: &str,
) -> Result<Option<u64>, StoreError> {
    let rows: Vec<(i64,)> = pools
        .reader()
        .fetch_all(
            "transcript mark read",
            sql::select_transcript_mark(),
            &[Some(execution_id)],
        )
        .await?;
    Ok(rows
        .first()
        .map(|(offset,)| u64::try_from(*offset).unwrap_or(0)))
}

/// Deletes a session and (by cascade) its turns, messages and subagent rows.
pub(crate) async fn delete_session(pools: &Pools, session_id: &str) -> Result<u64, StoreError> {
    pools
        .execute("DELETE FROM task_sessions WHERE id = $1", &[session_id])
        .await
        .map_err(StoreError::query("session delete"))
}

/// Deletes a turn and its messages; subagent rows keep their turn_id (AC-16).
pub(crate) async fn delete_turn(pools: &Pools, turn_id: &str) -> Result<u64, StoreError> {
    pools
        .execute("DELETE FROM task_session_turns WHERE id = $1", &[turn_id])
        .await
        .map_err(StoreError::query("turn delete"))
}
