//! `fanout report --format json`: the store's report as it serializes, with the unknown
//! fan-out rule at `turns.unknown.rule` (the CLI owns the words; the figures are the
//! store's). Every other field is the store's own serialization, in its order.

use fanout_store::{FanoutReport, TurnFanout, UnknownFanout};
use serde::Serialize;

use crate::output::UNKNOWN_FANOUT_RULE;

pub(super) fn render(
    report: &FanoutReport,
    usage: &fanout_store::UsageReport,
) -> serde_json::Result<String> {
    let mut json = JsonReport::new(report);
    json.usage = Some(usage);
    Ok(serde_json::to_string_pretty(&json)? + "\n")
}

/// [`FanoutReport`] field by field, `turns` replaced by its view with the rule.
#[derive(Serialize)]
struct JsonReport<'a> {
    scope: &'a fanout_store::ReportScope,
    activation: &'a fanout_store::Activation,
    turns: JsonTurns<'a>,
    subagents: &'a fanout_store::SubagentSummary,
    provenance: &'a fanout_store::Provenance,
    by_type: &'a [fanout_store::CountBy],
    by_model: &'a [fanout_store::CountBy],
    total_tokens: &'a fanout_store::MetricStats,
    duration_ms: &'a fanout_store::MetricStats,
    tool_use_count: &'a fanout_store::MetricStats,
    nesting: &'a fanout_store::Nesting,
    /// Measured usage and cost (DESIGN 4.1a), documented in docs/data-contract.md.
    usage: Option<&'a fanout_store::UsageReport>,
}

/// [`TurnFanout`] field by field, `unknown` with the rule.
#[derive(Serialize)]
struct JsonTurns<'a> {
    turns: i64,
    known_turns: i64,
    subagents_in_known_turns: i64,
    mean_per_known_turn: Option<f64>,
    distribution: &'a [fanout_store::FanoutBucket],
    unknown: JsonUnknown<'a>,
}

#[derive(Serialize)]
struct JsonUnknown<'a> {
    #[serde(flatten)]
    figures: &'a UnknownFanout,
    rule: &'static str,
}

impl<'a> JsonReport<'a> {
    fn new(report: &'a FanoutReport) -> Self {
        // Exhaustive destructuring: a field added to the report fails to compile here
        // until the JSON carries it too.
        let FanoutReport {
            scope,
            activation,
            turns,
            subagents,
            provenance,
            by_type,
            by_model,
            total_tokens,
            duration_ms,
            tool_use_count,
            nesting,
        } = report;
        let TurnFanout {
            turns: turn_count,
            known_turns,
            subagents_in_known_turns,
            mean_per_known_turn,
            distribution,
            unknown,
        } = turns;
        JsonReport {
            scope,
            activation,
            turns: JsonTurns {
                turns: *turn_count,
                known_turns: *known_turns,
                subagents_in_known_turns: *subagents_in_known_turns,
                mean_per_known_turn: *mean_per_known_turn,
                distribution,
                unknown: JsonUnknown {
                    figures: unknown,
                    rule: UNKNOWN_FANOUT_RULE,
                },
            },
            subagents,
            provenance,
            by_type,
            by_model,
            total_tokens,
            duration_ms,
            tool_use_count,
            nesting,
            usage: None,
        }
    }
}
