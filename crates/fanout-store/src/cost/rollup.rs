//! Usage with its cost: ledger sums per (session, turn, attribution, model) cell,
//! priced per cell (a cell has one model, so its cost is exact) and added up, so every
//! roll-up counts each response once.

use serde::Serialize;

use super::{Cost, PriceTable};
use crate::usage::TokenTotals;

/// The ledger sums of one (session, turn, attribution, model) group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UsageCell {
    /// `task_session_usage.task_session_id`.
    pub task_session_id: String,
    /// `task_session_usage.task_id`.
    pub task_id: String,
    /// `task_session_usage.turn_id`.
    pub turn_id: Option<String>,
    /// The invocation whose context made the responses; `None`: the session's own agent.
    pub subagent_tool_call_id: Option<String>,
    /// The model the responses named.
    pub model: Option<String>,
    /// Responses and token sums.
    pub totals: TokenTotals,
}

/// Tokens by kind and their cost, over a group of responses.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Usage {
    /// Responses and token sums by kind (`None`: no response reported the kind).
    #[serde(flatten)]
    pub tokens: TokenTotals,
    /// Their cost.
    pub cost: Cost,
}

impl Usage {
    /// The usage of one cell under `prices`.
    pub fn of_cell(cell: &UsageCell, prices: &PriceTable) -> Usage {
        Usage {
            tokens: cell.totals,
            cost: prices.cost(
                cell.model.as_deref(),
                cell.totals.responses,
                &cell.totals.tokens,
            ),
        }
    }

    /// The usage of `cells` together.
    pub fn of_cells<'a>(
        cells: impl IntoIterator<Item = &'a UsageCell>,
        prices: &PriceTable,
    ) -> Usage {
        cells.into_iter().fold(Usage::default(), |sum, cell| {
            sum.plus(&Usage::of_cell(cell, prices))
        })
    }

    /// Both groups together (disjoint groups: each response counted once).
    pub fn plus(&self, other: &Usage) -> Usage {
        Usage {
            tokens: self.tokens.plus(&other.tokens),
            cost: self.cost.plus(&other.cost),
        }
    }

    /// All tokens of every kind (`None` when no kind was reported).
    pub fn total_tokens(&self) -> Option<i64> {
        let t = &self.tokens.tokens;
        let kinds = [
            t.input_tokens,
            t.output_tokens,
            t.cache_creation_tokens,
            t.cache_read_tokens,
            t.reasoning_tokens,
        ];
        kinds.iter().flatten().copied().reduce(i64::saturating_add)
    }
}
