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
    #[error("provider {provider}: {error}")]
    Provider {
        /// Provider name.
        provider: String,
        /// Why.
        error: ProviderConfigError,
    },
    /// Reading or writing the ACP channel failed.
    #[error("ACP channel I/O failed: {0}")]
    Io(std::io::Error),
}

impl From<std::io::Error> for AgentError {
    fn from(error: std::io::Error) -> Self {
        AgentError::Io(error)
    }
}
