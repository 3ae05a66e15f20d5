//! Cost (DESIGN 4.1a): prices per model from a table shipped in the binary
//! (`prices.json` at the crate root, dated, with the vendors' price pages), merged with
//! an override file, and the arithmetic that turns ledger tokens into USD.
//!
//! Cost is computed when read, never stored, so a corrected price applies to the past.
//! A model id matches exactly, else by the longest known prefix that ends at a word
//! boundary (`claude-haiku-4-5-20251001` is `claude-haiku-4-5`; `gpt-5.3` is not
//! `gpt-5`). A response whose model has no price is *unpriced*: it adds nothing to a
//! sum, is counted, and its model is named — never priced as 0.

mod rollup;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::model::TokenCounts;

pub use rollup::{Usage, UsageCell};

/// The table compiled into the binary.
const SHIPPED: &str = include_str!("../../prices.json");

/// The environment variable naming an override file (as `--prices FILE`).
pub const PRICES_ENV: &str = "FANOUT_PRICES";

/// Why a price table could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PriceError {
    /// The file could not be read.
    #[error("cannot read the price table {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a price table.
    #[error("{origin} is not a price table: {source}")]
    Parse {
        /// The file, or `the shipped table`.
        origin: String,
        /// What serde found.
        #[source]
        source: serde_json::Error,
    },
    /// A price is negative or not a number.
    #[error("{origin}: the price of {model} is not a non-negative number ({field})")]
    BadPrice {
        /// The file.
        origin: String,
        /// The model id.
        model: String,
        /// The field.
        field: &'static str,
    },
}

/// USD per million tokens for one model (or model family, by prefix).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelPrice {
    /// Uncached input.
    pub input: f64,
    /// Output.
    pub output: f64,
    /// Input written to the prompt cache.
    pub cache_write: f64,
    /// Input read from the prompt cache.
    pub cache_read: f64,
    /// Reasoning output, where it differs from `output` (absent: priced as output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<f64>,
}

impl ModelPrice {
    /// The USD cost of one response's tokens (an unreported field costs nothing).
    pub fn cost(&self, tokens: &TokenCounts) -> f64 {
        let of = |n: Option<i64>, per_million: f64| n.unwrap_or(0) as f64 * per_million / 1e6;
        of(tokens.input_tokens, self.input)
            + of(tokens.output_tokens, self.output)
            + of(tokens.cache_creation_tokens, self.cache_write)
            + of(tokens.cache_read_tokens, self.cache_read)
            + of(
                tokens.reasoning_tokens,
                self.reasoning.unwrap_or(self.output),
            )
    }

    fn check(&self, origin: &str, model: &str) -> Result<(), PriceError> {
        let fields = [
            ("input", Some(self.input)),
            ("output", Some(self.output)),
            ("cache_write", Some(self.cache_write)),
            ("cache_read", Some(self.cache_read)),
            ("reasoning", self.reasoning),
        ];
        for (field, value) in fields {
            if let Some(v) = value
                && !(v.is_finite() && v >= 0.0)
            {
                return Err(PriceError::BadPrice {
                    origin: origin.to_owned(),
                    model: model.to_owned(),
                    field,
                });
            }
        }
        Ok(())
    }
}

/// The file shape of a price table (the shipped one and overrides alike).
#[derive(Debug, Deserialize)]
struct PriceFile {
    #[serde(default)]
    taken_on: Option<String>,
    #[serde(default)]
    sources: Vec<String>,
    #[serde(default)]
    note: Option<String>,
    models: BTreeMap<String, ModelPrice>,
}

/// The prices in force: the shipped table, with any override merged over it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PriceTable {
    /// When the shipped figures were taken from the vendors' pages (`YYYY-MM-DD`).
    pub taken_on: String,
    /// The vendors' price pages the figures come from, then any override's sources.
    pub sources: Vec<String>,
    /// What the shipped file says about its figures.
    pub note: String,
    /// The override files merged over the shipped table, in order.
    pub overrides: Vec<String>,
    /// USD per million tokens by model id (or id prefix).
    pub models: BTreeMap<String, ModelPrice>,
}

impl PriceTable {
    /// The table compiled into the binary.
    pub fn shipped() -> Result<PriceTable, PriceError> {
        let file = parse(SHIPPED, "the shipped price table")?;
        Ok(PriceTable {
            taken_on: file.taken_on.unwrap_or_default(),
            sources: file.sources,
            note: file.note.unwrap_or_default(),
            overrides: Vec::new(),
            models: file.models,
        })
    }

    /// The shipped table with the file at `path` merged over it (its models replace or
    /// add entries; everything else is kept).
    pub fn with_override(mut self, path: &Path) -> Result<PriceTable, PriceError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| PriceError::Read {
            path: origin.clone(),
            source,
        })?;
        self.merge_text(&text, &origin)?;
        Ok(self)
    }

    /// Merges a price table given as JSON text over this one; `origin` names it.
    pub fn merge_text(&mut self, text: &str, origin: &str) -> Result<(), PriceError> {
        let file = parse(text, origin)?;
        self.models.extend(file.models);
        self.sources.extend(file.sources);
        self.overrides.push(origin.to_owned());
        Ok(())
    }

    /// The shipped table, merged with `path` when given, else with `$FANOUT_PRICES` when
    /// set and non-empty.
    pub fn load(path: Option<&Path>) -> Result<PriceTable, PriceError> {
        let shipped = PriceTable::shipped()?;
        match path {
            Some(path) => shipped.with_override(path),
            None => match std::env::var_os(PRICES_ENV) {
                Some(value) if !value.is_empty() => shipped.with_override(Path::new(&value)),
                _ => Ok(shipped),
            },
        }
    }

    /// The entry that prices `model`: its exact id, else the longest known id that is a
    /// prefix of it ending at a boundary (the next character of `model` is `-`, `@` or
    /// `:`, so a dated suffix matches its family and `gpt-5.3` does not match `gpt-5`).
    pub fn lookup(&self, model: &str) -> Option<(&str, &ModelPrice)> {
        if let Some((key, price)) = self.models.get_key_value(model) {
            return Some((key.as_str(), price));
        }
        self.models
            .iter()
            .filter(|(key, _)| {
                model.strip_prefix(key.as_str()).is_some_and(|rest| {
                    rest.starts_with('-') || rest.starts_with('@') || rest.starts_with(':')
                })
            })
            .max_by_key(|(key, _)| key.len())
            .map(|(key, price)| (key.as_str(), price))
    }

    /// The cost of `responses` responses of `model` whose tokens sum to `tokens`:
    /// priced, or unpriced (and named) when the model has no price or is unknown.
    pub fn cost(&self, model: Option<&str>, responses: i64, tokens: &TokenCounts) -> Cost {
        match model.and_then(|m| self.lookup(m)) {
            Some((_, price)) => Cost {
                usd: Some(price.cost(tokens)),
                priced_responses: responses,
                ..Cost::default()
            },
            None if responses == 0 => Cost::default(),
            None => Cost {
                usd: None,
                priced_responses: 0,
                unpriced_responses: responses,
                unpriced_models: BTreeSet::from([model.map(str::to_owned)]),
            },
        }
    }
}

fn parse(text: &str, origin: &str) -> Result<PriceFile, PriceError> {
    let file: PriceFile = serde_json::from_str(text).map_err(|source| PriceError::Parse {
        origin: origin.to_owned(),
        source,
    })?;
    for (model, price) in &file.models {
        price.check(origin, model)?;
    }
    Ok(file)
}

/// The cost of a group of responses.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Cost {
    /// USD of the priced responses; `None` when none is priced (never a fake 0). With
    /// unpriced responses beside priced ones it is a lower bound.
    pub usd: Option<f64>,
    /// Responses whose model has a price.
    pub priced_responses: i64,
    /// Responses whose model has no price (or that named no model).
    pub unpriced_responses: i64,
    /// The models of the unpriced responses (`null`: the source named no model).
    pub unpriced_models: BTreeSet<Option<String>>,
}

impl Cost {
    /// Both groups together (they must be disjoint: each response counted once).
    pub fn plus(&self, other: &Cost) -> Cost {
        let usd = match (self.usd, other.usd) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
        Cost {
            usd,
            priced_responses: self.priced_responses + other.priced_responses,
            unpriced_responses: self.unpriced_responses + other.unpriced_responses,
            unpriced_models: self
                .unpriced_models
                .union(&other.unpriced_models)
                .cloned()
                .collect(),
        }
    }

    /// Whether some response of the group has no price.
    pub fn has_unpriced(&self) -> bool {
        self.unpriced_responses > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(
        input: i64,
        output: i64,
        write: i64,
        read: i64,
        reasoning: Option<i64>,
    ) -> TokenCounts {
        TokenCounts {
            input_tokens: Some(input),
            output_tokens: Some(output),
            cache_creation_tokens: Some(write),
            cache_read_tokens: Some(read),
            reasoning_tokens: reasoning,
        }
    }

    #[test]
    fn the_shipped_table_is_dated_sourced_and_valid() {
        let table = PriceTable::shipped().unwrap();
        assert_eq!(table.taken_on.len(), 10, "a YYYY-MM-DD date");
        assert!(table.sources.iter().any(|s| s.contains("anthropic.com")));
        assert!(table.sources.iter().any(|s| s.contains("openai.com")));
        assert!(table.models.len() >= 20);
    }

    #[test]
    fn exact_then_longest_prefix_at_a_boundary() {
        let table = PriceTable::shipped().unwrap();
        assert_eq!(table.lookup("gpt-5-mini").unwrap().0, "gpt-5-mini");
        assert_eq!(
            table.lookup("claude-haiku-4-5-20251001").unwrap().0,
            "claude-haiku-4-5"
        );
        assert_eq!(
            table.lookup("claude-sonnet-4-5-20250929").unwrap().0,
            "claude-sonnet-4-5"
        );
        assert_eq!(table.lookup("gpt-5-codex-2025").unwrap().0, "gpt-5-codex");
        // A different version is not its neighbour's family.
        assert!(table.lookup("gpt-5.3-codex").is_none());
        assert!(table.lookup("claude-opus-5-5").is_none());
        assert!(table.lookup("mock-model").is_none());
    }

    #[test]
    fn every_kind_is_priced_and_reasoning_as_output_unless_given() {
        let price = ModelPrice {
            input: 3.0,
            output: 15.0,
            cache_write: 3.75,
            cache_read: 0.3,
            reasoning: None,
        };
        let cost = price.cost(&tokens(
            1_000_000,
            1_000_000,
            1_000_000,
            1_000_000,
            Some(1_000_000),
        ));
        assert!((cost - (3.0 + 15.0 + 3.75 + 0.3 + 15.0)).abs() < 1e-9);
        let priced_reasoning = ModelPrice {
            reasoning: Some(1.0),
            ..price
        };
        let cost = priced_reasoning.cost(&tokens(0, 0, 0, 0, Some(2_000_000)));
        assert!((cost - 2.0).abs() < 1e-9);
    }

    #[test]
    fn unpriced_is_counted_and_named_never_zero() {
        let table = PriceTable::shipped().unwrap();
        let unpriced = table.cost(Some("mock-model"), 3, &tokens(10, 10, 0, 0, None));
        assert_eq!(unpriced.usd, None);
        assert_eq!(unpriced.unpriced_responses, 3);
        assert!(
            unpriced
                .unpriced_models
                .contains(&Some("mock-model".to_owned()))
        );
        let no_model = table.cost(None, 1, &tokens(10, 10, 0, 0, None));
        assert!(no_model.unpriced_models.contains(&None));
        let priced = table.cost(Some("gpt-5"), 1, &tokens(1_000_000, 0, 0, 0, None));
        let both = priced.plus(&unpriced);
        assert_eq!(both.usd, Some(1.25));
        assert_eq!((both.priced_responses, both.unpriced_responses), (1, 3));
        assert_eq!(Cost::default().plus(&unpriced).usd, None);
    }

    #[test]
    fn an_override_replaces_and_adds_models() {
        let mut table = PriceTable::shipped().unwrap();
        table
            .merge_text(
                r#"{"models": {"gpt-5": {"input": 9, "output": 9, "cache_write": 9, "cache_read": 9},
                    "mock-model": {"input": 1, "output": 2, "cache_write": 0, "cache_read": 0}}}"#,
                "test.json",
            )
            .unwrap();
        assert_eq!(table.lookup("gpt-5").unwrap().1.input, 9.0);
        assert_eq!(table.lookup("mock-model").unwrap().1.output, 2.0);
        assert!(
            table.lookup("claude-haiku-4-5").is_some(),
            "shipped entries stay"
        );
        assert_eq!(table.overrides, vec!["test.json".to_owned()]);
        let bad = table.merge_text(
            r#"{"models": {"x": {"input": -1, "output": 0, "cache_write": 0, "cache_read": 0}}}"#,
            "bad.json",
        );
        assert!(matches!(bad, Err(PriceError::BadPrice { .. })));
        assert!(matches!(
            table.merge_text("nope", "n.json"),
            Err(PriceError::Parse { .. })
        ));
    }
}
