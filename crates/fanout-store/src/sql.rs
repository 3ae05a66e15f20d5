//! SQL text for both engines. One generator per statement, parameterised by [`Engine`],
//! so the merge rules are written once and the engines cannot drift apart.
//!
//! Placeholders are `$n` on both engines (SQLite accepts them too). Timestamps travel
//! as canonical text; PostgreSQL casts them to `timestamptz` (the text carries `Z`, so
//! the cast is independent of the session time zone, AC-24e) and renders them back
//! through `AT TIME ZONE 'UTC'`.

use crate::model::{Engine, TERMINAL_TOOL_STATUSES};

/// The schema version this build writes; a database with a higher one is refused.
/// 2: the usage ledger `task_session_usage`, `import_files` and `transcript_applied` (created by the same
/// idempotent DDL on a version-1 database at its next writing open).
pub(crate) const SCHEMA_VERSION: i64 = 2;

pub(crate) const KEY_SCHEMA_VERSION: &str = "schema_version";
pub(crate) const KEY_CAPTURE_SINCE: &str = "subagent_context_capture_since";
pub(crate) const KEY_BACKFILL_THROUGH: &str = "subagent_context_backfill_through";

/// The columns of `task_session_subagents`, in insert order.
pub(crate) const SUBAGENT_COLUMNS: [&str; 22] = [
    "id",
    "task_session_id",
    "task_id",
    "turn_id",
    "tool_call_id",
    "agent_execution_id",
    "parent_tool_call_id",
    "subagent_type",
    "description",
    "agent_id",
    "child_session_id",
    "model",
    "agent_status",
    "tool_status",
    "is_async",
    "total_tokens",
    "tool_use_count",
    "duration_ms",
    "source",
    "observed_at",
    "settled_at",
    "updated_at",
];

/// Text columns that replace on a non-NULL value and never blank (AC-4, AC-5).
const FILL_FORWARD_COLUMNS: [&str; 10] = [
    "parent_tool_call_id",
    "subagent_type",
    "description",
    "agent_id",
    "child_session_id",
    "model",
    "agent_status",
    "total_tokens",
    "tool_use_count",
    "duration_ms",
];

/// The columns of `task_session_usage`, in insert order.
pub(crate) const USAGE_COLUMNS: [&str; 16] = [
    "id",
    "task_session_id",
    "task_id",
    "turn_id",
    "subagent_tool_call_id",
    "agent_execution_id",
    "response_id",
    "model",
    "input_tokens",
    "output_tokens",
    "cache_creation_tokens",
    "cache_read_tokens",
    "reasoning_tokens",
    "source",
    "observed_at",
    "updated_at",
];

/// The token columns of `task_session_usage`: each merges as the larger of stored and new.
pub(crate) const USAGE_TOKEN_COLUMNS: [&str; 5] = [
    "input_tokens",
    "output_tokens",
    "cache_creation_tokens",
    "cache_read_tokens",
    "reasoning_tokens",
];

/// The columns of `import_files`, in insert order.
pub(crate) const IMPORT_FILE_COLUMNS: [&str; 6] = [
    "path",
    "size",
    "mtime",
    "head_sha256",
    "offset",
    "imported_at",
];

/// The SQL differences between the engines, in one place.
impl Engine {
    /// The larger of two nullable values, a NULL never winning over a value (SQLite's
    /// two-argument `MAX` is NULL when either is; PostgreSQL's `GREATEST` skips NULLs).
    fn greatest_non_null(self, a: &str, b: &str) -> String {
        match self {
            Engine::Sqlite => format!("MAX(COALESCE({a}, {b}), COALESCE({b}, {a}))"),
            Engine::Postgres => format!("GREATEST({a}, {b})"),
        }
    }

    fn ts_type(self) -> &'static str {
        match self {
            Engine::Sqlite => "TEXT",
            Engine::Postgres => "TIMESTAMPTZ",
        }
    }

    fn int_type(self) -> &'static str {
        match self {
            Engine::Sqlite => "INTEGER",
            Engine::Postgres => "BIGINT",
        }
    }

    /// A bound timestamp parameter.
    pub(crate) fn ts_param(self, n: usize) -> String {
        match self {
            Engine::Sqlite => format!("${n}"),
            Engine::Postgres => format!("${n}::timestamptz"),
        }
    }

    /// A timestamp column rendered as canonical text.
    pub(crate) fn ts_out(self, col: &str) -> String {
        match self {
            Engine::Sqlite => col.to_owned(),
            Engine::Postgres => {
                format!("to_char(({col}) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')")
            }
        }
    }

    /// A metadata text column as a JSON document that never aborts a scan on NULL, ''
    /// or 'null' (AC-23b). SQLite additionally shields every invalid document.
    fn json_doc(self, col: &str) -> String {
        match self {
            Engine::Sqlite => format!("CASE WHEN json_valid({col}) THEN {col} ELSE '{{}}' END"),
            Engine::Postgres => format!(
                "CASE WHEN {col} IS NULL OR btrim({col}) IN ('', 'null') THEN '{{}}'::jsonb ELSE {col}::jsonb END"
            ),
        }
    }

    /// A JSON value at `path` as text (NULL when absent).
    fn json_text(self, doc: &str, path: &[&str]) -> String {
        match self {
            Engine::Sqlite => format!("json_extract({doc}, '$.{}')", path.join(".")),
            Engine::Postgres => format!("({doc} #>> '{{{}}}')", path.join(",")),
        }
    }

    /// A JSON text value with '' folded to NULL.
    fn json_text_or_null(self, doc: &str, path: &[&str]) -> String {
        format!("NULLIF({}, '')", self.json_text(doc, path))
    }

    /// A JSON number truncated to an integer; non-numbers and negatives are NULL, and so
    /// is 0 when `zero_is_unreported` (AC-7a, AC-9, AC-23).
    fn json_metric(self, doc: &str, path: &[&str], zero_is_unreported: bool) -> String {
        let value = match self {
            Engine::Sqlite => format!(
                "CASE WHEN json_type({doc}, '$.{p}') IN ('integer', 'real') THEN CAST(json_extract({doc}, '$.{p}') AS INTEGER) END",
                p = path.join(".")
            ),
            Engine::Postgres => format!(
                "CASE WHEN jsonb_typeof({doc} #> '{{{p}}}') = 'number' THEN trunc(({doc} #>> '{{{p}}}')::numeric)::bigint END",
                p = path.join(",")
            ),
        };
        let floor = if zero_is_unreported { "<= 0" } else { "< 0" };
        format!("(CASE WHEN ({value}) {floor} THEN NULL ELSE ({value}) END)")
    }

    /// `true`, 1, "true" and "1" are 1; anything else is 0.
    fn json_bool(self, doc: &str, path: &[&str]) -> String {
        format!(
            "CASE WHEN CAST({} AS TEXT) IN ('1', 'true') THEN 1 ELSE 0 END",
            self.json_text(doc, path)
        )
    }
}

pub(crate) fn terminal_status_list() -> String {
    TERMINAL_TOOL_STATUSES
        .iter()
        .map(|s| format!("'{s}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `COUNT(*)` of tables named `$1` in the current schema: 1 once it exists, else 0
/// (`fanout_meta`: once fanout has created its schema here).
pub(crate) fn table_exists(e: Engine) -> &'static str {
    match e {
        Engine::Sqlite => "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = $1",
        Engine::Postgres => {
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1"
        }
    }
}

/// The table of the migration step `otlp_exports.create` (DESIGN 12): one row per span
/// a receiver took, written once. `span_key` is [`crate::ExportKey`]'s text.
pub(crate) fn otlp_exports_schema(e: Engine) -> Vec<String> {
    let ts = e.ts_type();
    let int = e.int_type();
    vec![format!(
        "CREATE TABLE IF NOT EXISTS otlp_exports (
            receiver TEXT NOT NULL,
            task_session_id TEXT NOT NULL,
            span_key TEXT NOT NULL,
            trace_id TEXT NOT NULL,
            span_id TEXT NOT NULL,
            unsettled {int} NOT NULL DEFAULT 0,
            exported_at {ts} NOT NULL,
            PRIMARY KEY (receiver, task_session_id, span_key)
        )"
    )]
}

/// Idempotent DDL (AC-17): every statement can run on every open.
pub(crate) fn schema(e: Engine) -> Vec<String> {
    let ts = e.ts_type();
    let int = e.int_type();
    vec![
        "CREATE TABLE IF NOT EXISTS fanout_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL DEFAULT '')".to_owned(),
        format!(
            "CREATE TABLE IF NOT EXISTS task_sessions (
                id TEXT PRIMARY KEY,
                task_id TEXT NOT NULL,
                acp_session_id TEXT,
                agent_execution_id TEXT,
                agent_command TEXT,
                cwd TEXT,
                started_at {ts} NOT NULL,
                completed_at {ts},
                updated_at {ts} NOT NULL
            )"
        ),
        "CREATE INDEX IF NOT EXISTS idx_task_sessions_task_id ON task_sessions(task_id)".to_owned(),
        format!(
            "CREATE TABLE IF NOT EXISTS task_session_turns (
                id TEXT PRIMARY KEY,
                task_session_id TEXT NOT NULL REFERENCES task_sessions(id) ON DELETE CASCADE,
                task_id TEXT NOT NULL,
                started_at {ts} NOT NULL,
                completed_at {ts},
                stop_reason TEXT,
                updated_at {ts} NOT NULL
            )"
        ),
        "CREATE INDEX IF NOT EXISTS idx_turns_session_id ON task_session_turns(task_session_id)".to_owned(),
        "CREATE INDEX IF NOT EXISTS idx_turns_task_id ON task_session_turns(task_id)".to_owned(),
        format!(
            "CREATE TABLE IF NOT EXISTS task_session_messages (
                id TEXT PRIMARY KEY,
                task_session_id TEXT NOT NULL REFERENCES task_sessions(id) ON DELETE CASCADE,
                task_id TEXT,
                turn_id TEXT REFERENCES task_session_turns(id) ON DELETE CASCADE,
                author_type TEXT,
                type TEXT,
                content TEXT,
                metadata TEXT NOT NULL DEFAULT '{{}}',
                created_at {ts} NOT NULL,
                updated_at {ts} NOT NULL
            )"
        ),
        "CREATE INDEX IF NOT EXISTS idx_messages_session_id ON task_session_messages(task_session_id)".to_owned(),
        "CREATE INDEX IF NOT EXISTS idx_messages_turn_id ON task_session_messages(turn_id)".to_owned(),
        "CREATE INDEX IF NOT EXISTS idx_messages_created_at ON task_session_messages(created_at)".to_owned(),
        format!(
            "CREATE TABLE IF NOT EXISTS task_session_subagents (
                id TEXT PRIMARY KEY,
                task_session_id TEXT NOT NULL REFERENCES task_sessions(id) ON DELETE CASCADE,
                task_id TEXT NOT NULL,
                turn_id TEXT,
                tool_call_id TEXT NOT NULL,
                agent_execution_id TEXT NOT NULL DEFAULT 'unknown',
                parent_tool_call_id TEXT,
                subagent_type TEXT,
                description TEXT,
                agent_id TEXT,
                child_session_id TEXT,
                model TEXT,
                agent_status TEXT,
                tool_status TEXT,
                is_async {int} NOT NULL DEFAULT 0,
                total_tokens {int},
                tool_use_count {int},
                duration_ms {int},
                source TEXT NOT NULL DEFAULT 'live',
                observed_at {ts} NOT NULL,
                settled_at {ts},
                updated_at {ts} NOT NULL,
                UNIQUE (task_session_id, agent_execution_id, tool_call_id)
            )"
        ),
        "CREATE INDEX IF NOT EXISTS idx_subagents_session_id ON task_session_subagents(task_session_id)".to_owned(),
        "CREATE INDEX IF NOT EXISTS idx_subagents_task_id ON task_session_subagents(task_id)".to_owned(),
        "CREATE INDEX IF NOT EXISTS idx_subagents_turn_id ON task_session_subagents(turn_id)".to_owned(),
        format!(
            "CREATE TABLE IF NOT EXISTS transcript_applied (
                execution_id TEXT PRIMARY KEY,
                applied_through {int} NOT NULL,
                updated_at {ts} NOT NULL
            )"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS task_session_usage (
                id TEXT PRIMARY KEY,
                task_session_id TEXT NOT NULL REFERENCES task_sessions(id) ON DELETE CASCADE,
                task_id TEXT NOT NULL,
                turn_id TEXT,
                subagent_tool_call_id TEXT,
                agent_execution_id TEXT NOT NULL DEFAULT 'unknown',
                response_id TEXT NOT NULL,
                model TEXT,
                input_tokens {int},
                output_tokens {int},
                cache_creation_tokens {int},
                cache_read_tokens {int},
                reasoning_tokens {int},
                source TEXT NOT NULL,
                observed_at {ts} NOT NULL,
                updated_at {ts} NOT NULL,
                UNIQUE (task_session_id, response_id)
            )"
        ),
        "CREATE INDEX IF NOT EXISTS idx_usage_session_id ON task_session_usage(task_session_id)".to_owned(),
        "CREATE INDEX IF NOT EXISTS idx_usage_subagent_tool_call_id ON task_session_usage(subagent_tool_call_id)".to_owned(),
        // `offset` is quoted: it is a reserved word in PostgreSQL.
        format!(
            "CREATE TABLE IF NOT EXISTS import_files (
                path TEXT PRIMARY KEY,
                size {int} NOT NULL,
                mtime {int} NOT NULL,
                head_sha256 TEXT NOT NULL,
                \"offset\" {int} NOT NULL,
                imported_at {ts} NOT NULL
            )"
        ),
    ]
}

/// Unique indexes that an upsert checks besides its conflict target, by the names
/// PostgreSQL gives them: `task_session_subagents` merges on its UNIQUE key while its
/// `id` primary key is a second unique index (DESIGN 4.1). PostgreSQL arbitrates
/// `ON CONFLICT` on the conflict target only, so two statements inserting the same new
/// key at once can both find no conflict there, and the later one then fails on the
/// primary key. See [`crate::exec::retry_lost_insert_race`].
pub(crate) const NON_ARBITER_UNIQUE_INDEXES: [&str; 2] =
    ["task_session_subagents_pkey", "task_session_usage_pkey"];

/// The one subagent merge statement (AC-14): every rule lives in the conflict clause,
/// and every SET expression reads the pre-update row, so a first terminal frame sets
/// tool_status and settled_at together.
pub(crate) fn upsert_subagent(e: Engine) -> String {
    let columns = SUBAGENT_COLUMNS.join(", ");
    let values = placeholders(e, &SUBAGENT_COLUMNS, 1);
    let t = "task_session_subagents";
    let mut sets = vec![
        // AC-2a: the first non-NULL turn wins; a NULL is filled later.
        format!("turn_id = COALESCE({t}.turn_id, excluded.turn_id)"),
    ];
    sets.extend(
        FILL_FORWARD_COLUMNS
            .iter()
            .map(|c| format!("{c} = COALESCE(excluded.{c}, {t}.{c})")),
    );
    sets.extend([
        // AC-12: once settled, tool_status is frozen.
        format!(
            "tool_status = CASE WHEN {t}.settled_at IS NOT NULL THEN {t}.tool_status ELSE COALESCE(excluded.tool_status, {t}.tool_status) END"
        ),
        // Sticky: once async, always async.
        format!("is_async = CASE WHEN excluded.is_async = 1 THEN 1 ELSE {t}.is_async END"),
        // AC-11: written once, by the first terminal frame.
        format!("settled_at = COALESCE({t}.settled_at, excluded.settled_at)"),
        "updated_at = excluded.updated_at".to_owned(),
        // id, task_id, source, observed_at and agent_execution_id are write-once: not listed.
    ]);
    format!(
        "INSERT INTO {t} ({columns}) VALUES ({values}) \
         ON CONFLICT (task_session_id, agent_execution_id, tool_call_id) DO UPDATE SET {}",
        sets.join(", ")
    )
}

/// The one usage-ledger merge statement (DESIGN 4.1): every rule lives in the conflict
/// clause. Per token field the larger of stored and new, a NULL never replacing; `model`
/// and `turn_id` the first non-NULL; `updated_at` the latest observation. Not listed,
/// so written once by the row's first writer: `id`, `task_id`, `agent_execution_id`,
/// `source`, `observed_at` and the attribution `subagent_tool_call_id`, NULL included
/// (a replay of a parent response in a side-question log can neither count it twice
/// nor move it).
pub(crate) fn upsert_usage(e: Engine) -> String {
    let t = "task_session_usage";
    let mut sets = vec![
        format!("turn_id = COALESCE({t}.turn_id, excluded.turn_id)"),
        format!("model = COALESCE({t}.model, excluded.model)"),
    ];
    sets.extend(USAGE_TOKEN_COLUMNS.iter().map(|c| {
        format!(
            "{c} = {}",
            e.greatest_non_null(&format!("{t}.{c}"), &format!("excluded.{c}"))
        )
    }));
    sets.push(format!(
        "updated_at = CASE WHEN excluded.updated_at > {t}.updated_at THEN excluded.updated_at ELSE {t}.updated_at END"
    ));
    format!(
        "INSERT INTO {t} ({}) VALUES ({}) \
         ON CONFLICT (task_session_id, response_id) DO UPDATE SET {}",
        USAGE_COLUMNS.join(", "),
        placeholders(e, &USAGE_COLUMNS, 1),
        sets.join(", ")
    )
}

/// What `fanout import` knows of one file: the latest state replaces the stored one.
pub(crate) fn upsert_import_file(e: Engine) -> String {
    let quoted: Vec<String> = IMPORT_FILE_COLUMNS.iter().map(|c| quote(c)).collect();
    let sets: Vec<String> = quoted[1..]
        .iter()
        .map(|c| format!("{c} = excluded.{c}"))
        .collect();
    format!(
        "INSERT INTO import_files ({}) VALUES ({}) ON CONFLICT (path) DO UPDATE SET {}",
        quoted.join(", "),
        placeholders(e, &IMPORT_FILE_COLUMNS, 1),
        sets.join(", ")
    )
}

/// Every `import_files` row, by path.
pub(crate) fn select_import_files(e: Engine) -> String {
    format!(
        "SELECT path, size, mtime, head_sha256, \"offset\" AS byte_offset, {} AS imported_at FROM import_files ORDER BY path",
        e.ts_out("imported_at")
    )
}

/// A column name, double-quoted (both engines accept it; `offset` needs it).
fn quote(column: &str) -> String {
    format!("\"{column}\"")
}

pub(crate) fn upsert_session(e: Engine) -> String {
    format!(
        "INSERT INTO task_sessions (id, task_id, acp_session_id, agent_execution_id, agent_command, cwd, started_at, completed_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, {}, {}, {})
         ON CONFLICT (id) DO UPDATE SET
           acp_session_id = COALESCE(excluded.acp_session_id, task_sessions.acp_session_id),
           agent_execution_id = COALESCE(task_sessions.agent_execution_id, excluded.agent_execution_id),
           agent_command = COALESCE(excluded.agent_command, task_sessions.agent_command),
           cwd = COALESCE(excluded.cwd, task_sessions.cwd),
           completed_at = COALESCE(excluded.completed_at, task_sessions.completed_at),
           updated_at = CASE WHEN excluded.updated_at > task_sessions.updated_at THEN excluded.updated_at ELSE task_sessions.updated_at END",
        e.ts_param(7),
        e.ts_param(8),
        e.ts_param(9)
    )
}

pub(crate) fn upsert_turn(e: Engine) -> String {
    format!(
        "INSERT INTO task_session_turns (id, task_session_id, task_id, started_at, completed_at, stop_reason, updated_at)
         VALUES ($1, $2, $3, {}, {}, $6, {})
         ON CONFLICT (id) DO UPDATE SET
           completed_at = COALESCE(task_session_turns.completed_at, excluded.completed_at),
           stop_reason = COALESCE(task_session_turns.stop_reason, excluded.stop_reason),
           updated_at = CASE WHEN excluded.updated_at > task_session_turns.updated_at THEN excluded.updated_at ELSE task_session_turns.updated_at END",
        e.ts_param(4),
        e.ts_param(5),
        e.ts_param(7)
    )
}

/// The columns of [`upsert_message`], in bind order.
const MESSAGE_COLUMNS: [&str; 10] = [
    "id",
    "task_session_id",
    "task_id",
    "turn_id",
    "author_type",
    "type",
    "content",
    "metadata",
    "created_at",
    "updated_at",
];

/// `$first, $first+1, …` for `columns`, timestamps through the engine's cast.
fn placeholders(e: Engine, columns: &[&str], first: usize) -> String {
    columns
        .iter()
        .enumerate()
        .map(|(i, col)| {
            if col.ends_with("_at") {
                e.ts_param(i + first)
            } else {
                format!("${}", i + first)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) fn upsert_message(e: Engine) -> String {
    format!(
        "INSERT INTO task_session_messages ({})
         VALUES ({})
         ON CONFLICT (id) DO UPDATE SET
           turn_id = COALESCE(task_session_messages.turn_id, excluded.turn_id),
           type = COALESCE(excluded.type, task_session_messages.type),
           content = COALESCE(excluded.content, task_session_messages.content),
           metadata = excluded.metadata,
           updated_at = excluded.updated_at",
        MESSAGE_COLUMNS.join(", "),
        placeholders(e, &MESSAGE_COLUMNS, 1)
    )
}

/// `statement` `count` times as one multi-statement query, copy `k` with every `$n`
/// renumbered to `$(k * params + n)` (SQLite binds `$N` by its number across the
/// statements of one query), `params` being the statement's highest `$n`. Each copy is
/// the unchanged statement, so the merge rules are the same; one query is one round trip
/// through the driver's worker thread instead of `count`. SQLite only: PostgreSQL's
/// extended protocol takes one statement per query.
pub(crate) fn repeated(statement: &str, count: usize) -> String {
    let params = highest_param(statement);
    (0..count)
        .map(|k| renumber_params(statement, k * params))
        .collect::<Vec<_>>()
        .join(";\n")
}

/// The highest `$n` placeholder of `statement` (0 when it has none).
pub(crate) fn highest_param(statement: &str) -> usize {
    let mut highest = 0;
    scan_params(statement, |n| {
        highest = highest.max(n);
        n
    });
    highest
}

/// `statement` with every `$n` placeholder moved up by `by`.
fn renumber_params(statement: &str, by: usize) -> String {
    scan_params(statement, |n| n + by)
}

/// Rewrites every `$n` (a `$` followed by digits) of `statement` through `f`; the
/// statements this is used on have no `$` inside a literal.
fn scan_params(statement: &str, mut f: impl FnMut(usize) -> usize) -> String {
    let mut out = String::with_capacity(statement.len() + 16);
    let mut rest = statement;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        match rest[..digits].parse::<usize>() {
            Ok(n) if digits > 0 => out.push_str(&f(n).to_string()),
            _ => out.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    out.push_str(rest);
    out
}

/// `columns` as a select list, timestamps rendered canonically under their own names.
pub(crate) fn select_list(e: Engine, columns: &[&str]) -> String {
    columns
        .iter()
        .map(|c| {
            if c.ends_with("_at") {
                format!("{} AS {c}", e.ts_out(c))
            } else {
                (*c).to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) fn select_subagents(e: Engine, filter_column: &str) -> String {
    let cols = select_list(e, &SUBAGENT_COLUMNS);
    format!(
        "SELECT {cols} FROM task_session_subagents WHERE {filter_column} = $1 \
         ORDER BY observed_at, tool_call_id, agent_execution_id"
    )
}

/// The source predicate of the backfill and of the health shortfall (AC-21, AC-28):
/// subagent tool-call messages with session, task and tool_call_id all non-empty.
fn subagent_messages(e: Engine, since_param: Option<usize>, require_identity: bool) -> String {
    let doc = e.json_doc("m.metadata");
    let mut filters = vec![format!(
        "{} = 'subagent_task'",
        e.json_text("md.doc", &["normalized", "kind"])
    )];
    if require_identity {
        filters.push("md.task_session_id IS NOT NULL AND md.task_session_id <> ''".to_owned());
        filters.push("md.task_id IS NOT NULL AND md.task_id <> ''".to_owned());
        filters.push(format!(
            "{tc} IS NOT NULL AND {tc} <> ''",
            tc = e.json_text("md.doc", &["tool_call_id"])
        ));
    }
    if let Some(n) = since_param {
        filters.push(format!("md.created_at >= {}", e.ts_param(n)));
    }
    format!(
        "SELECT md.*, {tc} AS derived_tool_call_id FROM (SELECT m.*, {doc} AS doc FROM task_session_messages m) AS md WHERE {}",
        filters.join(" AND "),
        tc = e.json_text("md.doc", &["tool_call_id"]),
    )
}

/// MAX(created_at) of the backfill source, as canonical text (NULL when none). Written
/// as "newest first, one row" so both engines walk the created_at index backwards
/// and stop at the first qualifying message instead of scanning every row.
pub(crate) fn backfill_high_water(e: Engine) -> String {
    format!(
        "SELECT {} AS high_water FROM ({}) AS src ORDER BY src.created_at DESC LIMIT 1",
        e.ts_out("src.created_at"),
        subagent_messages(e, None, true)
    )
}

/// AC-21…AC-23a: one unbounded `INSERT … SELECT`, newest message per (session,
/// tool_call_id) wins, live rows win (`DO NOTHING`). It inserts nothing once both
/// activation keys exist: a store that found the database unactivated may run it after
/// another store activated it and began capturing live, and must not backfill that
/// store's live messages as rows of an unknown execution (seen when two proxies and an
/// import opened one new file together).
pub(crate) fn backfill_insert(e: Engine) -> String {
    let doc = "r.doc";
    let st = |field: &str| e.json_text_or_null(doc, &["normalized", "subagent_task", field]);
    let metric = |field: &str, zero_is_unreported: bool| {
        e.json_metric(
            doc,
            &["normalized", "subagent_task", field],
            zero_is_unreported,
        )
    };
    let tool_status = e.json_text_or_null(doc, &["status"]);
    let terminal = terminal_status_list();
    let select = [
        "r.id".to_owned(),
        "r.task_session_id".to_owned(),
        "r.task_id".to_owned(),
        "NULLIF(r.turn_id, '')".to_owned(),
        "r.derived_tool_call_id".to_owned(),
        "'unknown'".to_owned(),
        e.json_text_or_null(doc, &["parent_tool_call_id"]),
        st("subagent_type"),
        st("description"),
        st("agent_id"),
        st("child_session_id"),
        st("model"),
        st("status"),
        tool_status.clone(),
        e.json_bool(doc, &["normalized", "subagent_task", "is_async"]),
        metric("total_tokens", true),
        metric("tool_use_count", false),
        metric("duration_ms", true),
        "'backfill'".to_owned(),
        "r.created_at".to_owned(),
        format!("CASE WHEN {tool_status} IN ({terminal}) THEN r.updated_at END"),
        "r.updated_at".to_owned(),
    ];
    format!(
        "WITH ranked AS (
           SELECT src.*, ROW_NUMBER() OVER (PARTITION BY src.task_session_id, src.derived_tool_call_id ORDER BY src.created_at DESC, src.id DESC) AS rn
           FROM ({}) AS src
         )
         INSERT INTO task_session_subagents ({})
         SELECT {} FROM ranked r WHERE r.rn = 1
           AND NOT (EXISTS (SELECT 1 FROM fanout_meta WHERE key = '{KEY_CAPTURE_SINCE}')
                AND EXISTS (SELECT 1 FROM fanout_meta WHERE key = '{KEY_BACKFILL_THROUGH}'))
         ON CONFLICT (task_session_id, agent_execution_id, tool_call_id) DO NOTHING",
        subagent_messages(e, None, true),
        SUBAGENT_COLUMNS.join(", "),
        select.join(", ")
    )
}

/// AC-28 shortfall: subagent message keys since `$1` with no row since `$1` (alarms).
pub(crate) fn health_shortfall(e: Engine) -> String {
    format!(
        "SELECT COUNT(*) AS n FROM (
           SELECT src.task_session_id, src.derived_tool_call_id FROM ({}) AS src
           EXCEPT
           SELECT s.task_session_id, s.tool_call_id FROM task_session_subagents s WHERE s.observed_at >= {}
         ) AS shortfall",
        subagent_messages(e, Some(1), true),
        e.ts_param(1)
    )
}

/// AC-28 excess: row keys since `$1` with no subagent message since `$1` (never alarms).
pub(crate) fn health_excess(e: Engine) -> String {
    format!(
        "SELECT COUNT(*) AS n FROM (
           SELECT s.task_session_id, s.tool_call_id FROM task_session_subagents s WHERE s.observed_at >= {}
           EXCEPT
           SELECT src.task_session_id, src.derived_tool_call_id FROM ({}) AS src
         ) AS excess",
        e.ts_param(1),
        subagent_messages(e, Some(1), false),
    )
}

/// AC-29: the last write since activation.
pub(crate) fn health_last_observed(e: Engine) -> String {
    format!(
        "SELECT {} AS last_observed FROM task_session_subagents WHERE observed_at >= {}",
        e.ts_out("MAX(observed_at)"),
        e.ts_param(1)
    )
}

/// The merge of a [`crate::TranscriptMark`]: the offset only grows, so a batch that
/// commits late (or a second applier) can never move it back.
pub(crate) fn upsert_transcript_mark(e: Engine) -> String {
    format!(
        "INSERT INTO transcript_applied (execution_id, applied_through, updated_at) VALUES ($1, $2, {})
         ON CONFLICT (execution_id) DO UPDATE SET
           applied_through = CASE WHEN excluded.applied_through > transcript_applied.applied_through
                                  THEN excluded.applied_through ELSE transcript_applied.applied_through END,
           updated_at = excluded.updated_at",
        e.ts_param(3)
    )
}

/// The applied offset of one transcript (no row: nothing of it was applied).
pub(crate) fn select_transcript_mark() -> &'static str {
    "SELECT applied_through FROM transcript_applied WHERE execution_id = $1"
}

/// The statement that opens a write transaction. SQLite: `BEGIN IMMEDIATE`, which takes
/// the write lock at once and so waits for it through the busy timeout; a deferred
/// `BEGIN` that reads first and writes later cannot wait when another connection holds
/// the lock (SQLite refuses the upgrade at once, "database is locked", to avoid a
/// deadlock) and fails instead. PostgreSQL: a plain `BEGIN` (row locks wait anyway).
pub(crate) fn begin_write(e: Engine) -> &'static str {
    match e {
        Engine::Sqlite => "BEGIN IMMEDIATE",
        Engine::Postgres => "BEGIN",
    }
}

pub(crate) fn insert_meta_once() -> &'static str {
    "INSERT INTO fanout_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING"
}
