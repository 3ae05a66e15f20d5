//! The agent's top-level error.

use crate::model::ProviderConfigError;

/// `fanout agent` could not start or its ACP channel failed.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// `--provider` names no registered provider.
    #[error("unknown provider {name:?} (known: {known})")]
    UnknownProvider {
        /// The requested name.
        name: String,
        /// Registered names, comma-separated.
        known: String,
    },
    /// The provider could not be configured.
    #[error("provider {provider}: {source}")]
    Provider {
        /// Provider name.
        provider: String,
        /// Why.
        source: ProviderConfigError,
    },
    /// Another configuration problem (e.g. no sessions root).
    #[error("{0}")]
    Config(String),
    /// Reading or writing the ACP channel failed.
    #[error("ACP channel I/O failed: {0}")]
    Io(#[from] std::io::Error),
}
