//! Reads of the usage ledger (`task_session_usage`, DESIGN 4.1): the rows of a session,
//! and token totals by session, turn, model and subagent invocation, the invocation's
//! own and with its descendants. What the usage report and `fanout show` build on.
//!
//! The decisions a reader of these totals needs:
//!
//! * **One response, one count.** The ledger has one row per model response (its
//!   upsert merges every record of a response), so every sum counts each response once.
//! * **NULL is not 0.** A token field no response in a group reported sums to `None`;
//!   [`TokenTotals::responses`] says how many responses the group has.
//! * **Own and with descendants.** An invocation's own usage is the rows attributed to
//!   its `tool_call_id`; with descendants adds every invocation nested under it
//!   (`parent_tool_call_id`, transitively, in the same session). A session's own agent
//!   is the rows with no attribution; its total is all of its rows.
//! * **Scope** is [`ReportScope`]: a task or session selects by id; a time window
//!   selects usage rows (and invocations) by `observed_at`.

mod sql;

use serde::Serialize;

use crate::error::StoreError;
use crate::exec::Reader;
use crate::model::{TokenCounts, UsageRow, UsageSource};
use crate::report::{ReportScope, fetch_all};
use fanout_types::Timestamp;

/// Token sums over a group of responses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TokenTotals {
    /// Responses in the group.
    pub responses: i64,
    /// Per field, the sum over the responses that reported it; `None` when none did.
    #[serde(flatten)]
    pub tokens: TokenCounts,
}

impl TokenTotals {
    /// The totals of two disjoint groups together (a `None` field adds nothing).
    pub fn plus(&self, other: &TokenTotals) -> TokenTotals {
        let add = |a: Option<i64>, b: Option<i64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        };
        let (a, b) = (&self.tokens, &other.tokens);
        TokenTotals {
            responses: self.responses + other.responses,
            tokens: TokenCounts {
                input_tokens: add(a.input_tokens, b.input_tokens),
                output_tokens: add(a.output_tokens, b.output_tokens),
                cache_creation_tokens: add(a.cache_creation_tokens, b.cache_creation_tokens),
                cache_read_tokens: add(a.cache_read_tokens, b.cache_read_tokens),
                reasoning_tokens: add(a.reasoning_tokens, b.reasoning_tokens),
            },
        }
    }
}

/// What grouped totals are keyed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageGrouping {
    /// `task_session_usage.turn_id` (`None`: responses outside any turn).
    Turn,
    /// `task_session_usage.model` (`None`: the source named no model).
    Model,
    /// `task_session_usage.task_id`.
    Task,
}

/// Token totals of one group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UsageGroup {
    /// The group's value of the grouping column; `None` is the NULL group.
    pub key: Option<String>,
    /// The group's totals.
    #[serde(flatten)]
    pub totals: TokenTotals,
}

/// The usage of one session: its own agent's and its subagents'.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SessionUsage {
    /// The session's row id.
    pub task_session_id: String,
    /// Every response of the session.
    pub total: TokenTotals,
    /// The responses of the session's own agent (no attribution).
    pub own: TokenTotals,
    /// The responses made in a subagent invocation's context.
    pub subagents: TokenTotals,
}

/// The usage of one subagent invocation (one `tool_call_id` of a session).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InvocationUsage {
    /// The session's row id.
    pub task_session_id: String,
    /// The invocation's `tool_call_id` (a subagent row's, or an attribution's).
    pub tool_call_id: String,
    /// The responses attributed to this invocation.
    pub own: TokenTotals,
    /// Its own and those of every invocation nested under it.
    pub with_descendants: TokenTotals,
}

/// The usage rows of one session, by `observed_at` then `response_id`.
pub(crate) async fn usage_rows(
    reader: Reader<'_>,
    session_id: &str,
) -> Result<Vec<UsageRow>, StoreError> {
    let statement = sql::select_rows(reader.engine(), session_id);
    let rows: Vec<sql::RawUsageRow> = fetch_all(reader, "usage rows", &statement).await?;
    rows.into_iter().map(UsageRow::try_from).collect()
}

/// Totals per `grouping` over the rows in `scope`, by key (the NULL group first).
pub(crate) async fn usage_by(
    reader: Reader<'_>,
    scope: &ReportScope,
    grouping: UsageGrouping,
) -> Result<Vec<UsageGroup>, StoreError> {
    let statement = sql::grouped(reader.engine(), scope, grouping);
    let rows: Vec<sql::RawGroup> = fetch_all(reader, "usage by group", &statement).await?;
    Ok(rows
        .into_iter()
        .map(|r| UsageGroup {
            key: r.key.clone(),
            totals: r.totals("all"),
        })
        .collect())
}

/// Per session in `scope`: its own agent's totals, its subagents', and both together.
pub(crate) async fn usage_by_session(
    reader: Reader<'_>,
    scope: &ReportScope,
) -> Result<Vec<SessionUsage>, StoreError> {
    let statement = sql::by_session(reader.engine(), scope);
    let rows: Vec<sql::RawGroup> = fetch_all(reader, "usage by session", &statement).await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let own = r.totals("own");
            let subagents = r.totals("sub");
            SessionUsage {
                task_session_id: r.key.clone().unwrap_or_default(),
                total: own.plus(&subagents),
                own,
                subagents,
            }
        })
        .collect())
}

/// Per invocation in `scope` (every subagent row's `tool_call_id`, and every
/// attribution the ledger names without a row): its own totals and with descendants.
pub(crate) async fn usage_by_invocation(
    reader: Reader<'_>,
    scope: &ReportScope,
) -> Result<Vec<InvocationUsage>, StoreError> {
    let statement = sql::by_invocation(reader.engine(), scope);
    let rows: Vec<sql::RawInvocation> =
        fetch_all(reader, "usage by invocation", &statement).await?;
    Ok(rows
        .into_iter()
        .map(|r| InvocationUsage {
            own: r.group.totals("own"),
            with_descendants: r.group.totals("all"),
            task_session_id: r.task_session_id,
            tool_call_id: r.group.key.unwrap_or_default(),
        })
        .collect())
}

fn timestamp(column: &str, text: &str) -> Result<Timestamp, StoreError> {
    Timestamp::parse(text).map_err(|cause| StoreError::BadTimestamp {
        what: format!("task_session_usage.{column}"),
        cause,
    })
}

impl TryFrom<sql::RawUsageRow> for UsageRow {
    type Error = StoreError;

    fn try_from(raw: sql::RawUsageRow) -> Result<Self, StoreError> {
        Ok(UsageRow {
            observed_at: timestamp("observed_at", &raw.observed_at)?,
            updated_at: timestamp("updated_at", &raw.updated_at)?,
            // Unknown source text can only come from another writer: call it ACP, the
            // one source that is not a file fanout read.
            source: UsageSource::parse(&raw.source).unwrap_or(UsageSource::Acp),
            id: raw.id,
            task_session_id: raw.task_session_id,
            task_id: raw.task_id,
            turn_id: raw.turn_id,
            subagent_tool_call_id: raw.subagent_tool_call_id,
            agent_execution_id: raw.agent_execution_id,
            response_id: raw.response_id,
            model: raw.model,
            tokens: TokenCounts {
                input_tokens: raw.input_tokens,
                output_tokens: raw.output_tokens,
                cache_creation_tokens: raw.cache_creation_tokens,
                cache_read_tokens: raw.cache_read_tokens,
                reasoning_tokens: raw.reasoning_tokens,
            },
        })
    }
}
