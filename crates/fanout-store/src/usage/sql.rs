//! The usage reads' statements, one generator each, parameterised by [`Engine`] (DESIGN
//! 4.1), with the scope's binds collected as they are generated.

use crate::model::Engine;
use crate::report::ReportScope;
use crate::report::sql::{Binds, Statement};
use crate::sql::{USAGE_COLUMNS, USAGE_TOKEN_COLUMNS, select_list};

use super::{TokenTotals, UsageGrouping};
use crate::model::TokenCounts;

/// A `task_session_usage` row as [`select_rows`] returns it on either engine.
#[derive(sqlx::FromRow)]
pub(super) struct RawUsageRow {
    pub(super) id: String,
    pub(super) task_session_id: String,
    pub(super) task_id: String,
    pub(super) turn_id: Option<String>,
    pub(super) subagent_tool_call_id: Option<String>,
    pub(super) agent_execution_id: String,
    pub(super) response_id: String,
    pub(super) model: Option<String>,
    pub(super) input_tokens: Option<i64>,
    pub(super) output_tokens: Option<i64>,
    pub(super) cache_creation_tokens: Option<i64>,
    pub(super) cache_read_tokens: Option<i64>,
    pub(super) reasoning_tokens: Option<i64>,
    pub(super) source: String,
    pub(super) observed_at: String,
    pub(super) updated_at: String,
}

/// A group's key and up to three sets of totals, by column prefix (`all_`, `own_`,
/// `sub_`); a statement selects only the sets it computes, and an absent set decodes
/// as zero responses with no tokens.
#[derive(sqlx::FromRow)]
pub(super) struct RawGroup {
    pub(super) key: Option<String>,
    #[sqlx(default)]
    all_responses: i64,
    #[sqlx(default)]
    all_input_tokens: Option<i64>,
    #[sqlx(default)]
    all_output_tokens: Option<i64>,
    #[sqlx(default)]
    all_cache_creation_tokens: Option<i64>,
    #[sqlx(default)]
    all_cache_read_tokens: Option<i64>,
    #[sqlx(default)]
    all_reasoning_tokens: Option<i64>,
    #[sqlx(default)]
    own_responses: i64,
    #[sqlx(default)]
    own_input_tokens: Option<i64>,
    #[sqlx(default)]
    own_output_tokens: Option<i64>,
    #[sqlx(default)]
    own_cache_creation_tokens: Option<i64>,
    #[sqlx(default)]
    own_cache_read_tokens: Option<i64>,
    #[sqlx(default)]
    own_reasoning_tokens: Option<i64>,
    #[sqlx(default)]
    sub_responses: i64,
    #[sqlx(default)]
    sub_input_tokens: Option<i64>,
    #[sqlx(default)]
    sub_output_tokens: Option<i64>,
    #[sqlx(default)]
    sub_cache_creation_tokens: Option<i64>,
    #[sqlx(default)]
    sub_cache_read_tokens: Option<i64>,
    #[sqlx(default)]
    sub_reasoning_tokens: Option<i64>,
}

impl RawGroup {
    /// The totals of the set named by `prefix` (`all`, `own` or `sub`).
    pub(super) fn totals(&self, prefix: &str) -> TokenTotals {
        match prefix {
            "own" => totals(
                self.own_responses,
                [
                    self.own_input_tokens,
                    self.own_output_tokens,
                    self.own_cache_creation_tokens,
                    self.own_cache_read_tokens,
                    self.own_reasoning_tokens,
                ],
            ),
            "sub" => totals(
                self.sub_responses,
                [
                    self.sub_input_tokens,
                    self.sub_output_tokens,
                    self.sub_cache_creation_tokens,
                    self.sub_cache_read_tokens,
                    self.sub_reasoning_tokens,
                ],
            ),
            _ => totals(
                self.all_responses,
                [
                    self.all_input_tokens,
                    self.all_output_tokens,
                    self.all_cache_creation_tokens,
                    self.all_cache_read_tokens,
                    self.all_reasoning_tokens,
                ],
            ),
        }
    }
}

fn totals(
    responses: i64,
    [input, output, creation, read, reasoning]: [Option<i64>; 5],
) -> TokenTotals {
    TokenTotals {
        responses,
        tokens: TokenCounts {
            input_tokens: input,
            output_tokens: output,
            cache_creation_tokens: creation,
            cache_read_tokens: read,
            reasoning_tokens: reasoning,
        },
    }
}

/// One invocation's group, with its session.
#[derive(sqlx::FromRow)]
pub(super) struct RawInvocation {
    pub(super) task_session_id: String,
    #[sqlx(flatten)]
    pub(super) group: RawGroup,
}

/// The aggregate columns of one set of totals over the rows aliased `u` that satisfy
/// `condition`, aliased `<prefix>_<field>`. Sums are cast to BIGINT (PostgreSQL sums
/// BIGINT as NUMERIC); a sum over no reported value is NULL.
fn totals_columns(prefix: &str, condition: &str) -> String {
    let mut columns = vec![format!(
        "COUNT(CASE WHEN u.id IS NOT NULL AND ({condition}) THEN 1 END) AS {prefix}_responses"
    )];
    columns.extend(USAGE_TOKEN_COLUMNS.iter().map(|c| {
        format!("CAST(SUM(CASE WHEN {condition} THEN u.{c} END) AS BIGINT) AS {prefix}_{c}")
    }));
    columns.join(", ")
}

/// The rows of one session, in observation order.
pub(super) fn select_rows(e: Engine, session_id: &str) -> Statement {
    let mut binds = Binds::new(e);
    let columns = select_list(e, &USAGE_COLUMNS);
    let sql = format!(
        "SELECT {columns} FROM task_session_usage WHERE task_session_id = {} \
         ORDER BY observed_at, response_id",
        binds.text(session_id)
    );
    binds.finish(sql)
}

/// Totals per value of the grouping column over the rows in scope.
pub(super) fn grouped(e: Engine, scope: &ReportScope, grouping: UsageGrouping) -> Statement {
    let mut binds = Binds::new(e);
    let in_scope = scope.predicate(&mut binds, "u", "observed_at");
    let column = match grouping {
        UsageGrouping::Turn => "u.turn_id",
        UsageGrouping::Model => "u.model",
        UsageGrouping::Task => "u.task_id",
    };
    let sql = format!(
        "SELECT {column} AS key, {} FROM task_session_usage u WHERE {in_scope} \
         GROUP BY {column} ORDER BY CASE WHEN {column} IS NULL THEN 0 ELSE 1 END, {column}",
        totals_columns("all", "1 = 1")
    );
    binds.finish(sql)
}

/// Per session: the own agent's totals (no attribution) and the subagents'.
pub(super) fn by_session(e: Engine, scope: &ReportScope) -> Statement {
    let mut binds = Binds::new(e);
    let in_scope = scope.predicate(&mut binds, "u", "observed_at");
    let sql = format!(
        "SELECT u.task_session_id AS key, {}, {} FROM task_session_usage u WHERE {in_scope} \
         GROUP BY u.task_session_id ORDER BY u.task_session_id",
        totals_columns("own", "u.subagent_tool_call_id IS NULL"),
        totals_columns("sub", "u.subagent_tool_call_id IS NOT NULL"),
    );
    binds.finish(sql)
}

/// Per invocation: every (session, tool_call_id) of a subagent row in scope or of an
/// attribution in scope, with the invocations nested under it found through
/// `parent_tool_call_id` (a recursive walk; `UNION` drops repeats, so a cycle in
/// foreign data ends), and the usage of itself (`own_`) and of its whole subtree
/// (`all_`).
pub(super) fn by_invocation(e: Engine, scope: &ReportScope) -> Statement {
    let mut binds = Binds::new(e);
    let rows_in_scope = scope.predicate(&mut binds, "s", "observed_at");
    let attributions_in_scope = scope.predicate(&mut binds, "a", "observed_at");
    let usage_in_scope = scope.predicate(&mut binds, "u", "observed_at");
    let sql = format!(
        "WITH RECURSIVE invocations (task_session_id, tool_call_id, parent_tool_call_id) AS (
           SELECT s.task_session_id, s.tool_call_id, s.parent_tool_call_id
           FROM task_session_subagents s WHERE {rows_in_scope}
           UNION
           SELECT a.task_session_id, a.subagent_tool_call_id, CAST(NULL AS TEXT)
           FROM task_session_usage a WHERE a.subagent_tool_call_id IS NOT NULL AND {attributions_in_scope}
         ),
         subtree (task_session_id, root, node) AS (
           SELECT task_session_id, tool_call_id, tool_call_id FROM invocations
           UNION
           SELECT t.task_session_id, t.root, i.tool_call_id
           FROM subtree t JOIN invocations i
             ON i.task_session_id = t.task_session_id AND i.parent_tool_call_id = t.node
         )
         SELECT t.task_session_id AS task_session_id, t.root AS key, {}, {}
         FROM subtree t
         LEFT JOIN task_session_usage u
           ON u.task_session_id = t.task_session_id AND u.subagent_tool_call_id = t.node AND {usage_in_scope}
         GROUP BY t.task_session_id, t.root
         ORDER BY t.task_session_id, t.root",
        totals_columns("own", "t.node = t.root"),
        totals_columns("all", "1 = 1"),
    );
    binds.finish(sql)
}
