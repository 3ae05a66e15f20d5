//! The attributes of a span (DESIGN 12): the GenAI semantic conventions' `invoke_agent`
//! attributes (v1.42.0, status development), OpenInference's span kind and token counts
//! (so LLM backends such as Phoenix show tokens), and fanout's own (`fanout.*`).
//!
//! Tokens are each span's own responses (the ledger's cells attributed to it), so every
//! response is counted once across a trace and a backend that adds a subtree's spans
//! up gets the subtree's total. The ledger's fields are disjoint; the conventions'
//! are not: `gen_ai.usage.input_tokens` SHOULD include the cached input (written and
//! read), and `gen_ai.usage.output_tokens` the reasoning. A figure no response
//! reported is left out, never sent as 0.

use fanout_store::{SubagentRow, Usage};
use opentelemetry::KeyValue;

/// `gen_ai.operation.name`.
pub const OPERATION_NAME: &str = "gen_ai.operation.name";
/// `gen_ai.agent.name`.
pub const AGENT_NAME: &str = "gen_ai.agent.name";
/// `gen_ai.agent.id`.
pub const AGENT_ID: &str = "gen_ai.agent.id";
/// `gen_ai.agent.description`.
pub const AGENT_DESCRIPTION: &str = "gen_ai.agent.description";
/// `gen_ai.conversation.id`.
pub const CONVERSATION_ID: &str = "gen_ai.conversation.id";
/// `gen_ai.request.model`.
pub const REQUEST_MODEL: &str = "gen_ai.request.model";
/// `gen_ai.usage.input_tokens`: all input, cached included.
pub const INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// `gen_ai.usage.output_tokens`: all output, reasoning included.
pub const OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// `gen_ai.usage.cache_read.input_tokens`.
pub const CACHE_READ_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
/// `gen_ai.usage.cache_creation.input_tokens`.
pub const CACHE_CREATION_TOKENS: &str = "gen_ai.usage.cache_creation.input_tokens";
/// `gen_ai.usage.reasoning.output_tokens`.
pub const REASONING_TOKENS: &str = "gen_ai.usage.reasoning.output_tokens";
/// The operation of every span fanout sends.
pub const INVOKE_AGENT: &str = "invoke_agent";

/// OpenInference's span kind.
pub const OPENINFERENCE_SPAN_KIND: &str = "openinference.span.kind";
/// OpenInference's session (Phoenix groups a session's traces by it).
pub const OPENINFERENCE_SESSION_ID: &str = "session.id";
/// OpenInference's prompt tokens (cached included, as the conventions count them).
pub const LLM_PROMPT_TOKENS: &str = "llm.token_count.prompt";
/// OpenInference's completion tokens (reasoning included).
pub const LLM_COMPLETION_TOKENS: &str = "llm.token_count.completion";
/// OpenInference's total.
pub const LLM_TOTAL_TOKENS: &str = "llm.token_count.total";

/// A span's own usage as attributes: the conventions' token counts, OpenInference's,
/// `fanout.responses` and, where any response is priced, `fanout.cost_usd`.
pub fn usage(usage: &Usage) -> Vec<KeyValue> {
    let mut out = Vec::new();
    if usage.tokens.responses == 0 {
        return out;
    }
    let t = &usage.tokens.tokens;
    let sum = |parts: &[Option<i64>]| parts.iter().flatten().copied().reduce(|a, b| a + b);
    let input = sum(&[t.input_tokens, t.cache_read_tokens, t.cache_creation_tokens]);
    let output = sum(&[t.output_tokens, t.reasoning_tokens]);
    let figures = [
        (INPUT_TOKENS, input),
        (OUTPUT_TOKENS, output),
        (CACHE_READ_TOKENS, t.cache_read_tokens),
        (CACHE_CREATION_TOKENS, t.cache_creation_tokens),
        (REASONING_TOKENS, t.reasoning_tokens),
        (LLM_PROMPT_TOKENS, input),
        (LLM_COMPLETION_TOKENS, output),
        (LLM_TOTAL_TOKENS, sum(&[input, output])),
        (
            "llm.token_count.prompt_details.cache_read",
            t.cache_read_tokens,
        ),
        (
            "llm.token_count.prompt_details.cache_write",
            t.cache_creation_tokens,
        ),
        (
            "llm.token_count.completion_details.reasoning",
            t.reasoning_tokens,
        ),
    ];
    for (key, value) in figures {
        if let Some(value) = value {
            out.push(KeyValue::new(key, value));
        }
    }
    out.push(KeyValue::new("fanout.responses", usage.tokens.responses));
    // Priced only: an unpriced span has no cost, never a cost of 0; beside unpriced
    // responses the figure is a lower bound, and the count says so.
    if let Some(usd) = usage.cost.usd {
        out.push(KeyValue::new("fanout.cost_usd", usd));
    }
    if usage.cost.unpriced_responses > 0 {
        out.push(KeyValue::new(
            "fanout.unpriced_responses",
            usage.cost.unpriced_responses,
        ));
    }
    out
}

/// What every span carries: the operation, the kind, the session.
pub fn common(agent_name: Option<&str>, session: &str) -> Vec<KeyValue> {
    let mut out = vec![
        KeyValue::new(OPERATION_NAME, INVOKE_AGENT),
        KeyValue::new(OPENINFERENCE_SPAN_KIND, "AGENT"),
        KeyValue::new(OPENINFERENCE_SESSION_ID, session.to_owned()),
    ];
    if let Some(name) = agent_name {
        out.push(KeyValue::new(AGENT_NAME, name.to_owned()));
    }
    out
}

/// An invocation's own row: its identity, texts, statuses and what the agent reported.
pub fn invocation(row: &SubagentRow, model: Option<&str>) -> Vec<KeyValue> {
    let mut out = vec![
        KeyValue::new("fanout.tool_call_id", row.tool_call_id.clone()),
        KeyValue::new("fanout.is_async", row.is_async),
        KeyValue::new("fanout.source", row.source.as_str()),
    ];
    let texts = [
        (AGENT_ID, row.agent_id.as_deref()),
        (AGENT_DESCRIPTION, row.description.as_deref()),
        // The child's own conversation, where the harness names it.
        (CONVERSATION_ID, row.child_session_id.as_deref()),
        (REQUEST_MODEL, model),
        ("fanout.tool_status", row.tool_status.as_deref()),
        ("fanout.agent_status", row.agent_status.as_deref()),
        (
            "fanout.parent_tool_call_id",
            row.parent_tool_call_id.as_deref(),
        ),
    ];
    for (key, value) in texts {
        if let Some(value) = value {
            out.push(KeyValue::new(key, value.to_owned()));
        }
    }
    let reported = [
        ("fanout.reported.total_tokens", row.total_tokens),
        ("fanout.reported.tool_use_count", row.tool_use_count),
        ("fanout.reported.duration_ms", row.duration_ms),
    ];
    for (key, value) in reported {
        if let Some(value) = value {
            out.push(KeyValue::new(key, value));
        }
    }
    out
}
