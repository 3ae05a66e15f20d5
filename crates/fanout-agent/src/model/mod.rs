//! The model layer: a provider-neutral request, the [`LanguageModel`] trait that
//! streams a response as [`Chunk`]s, and the built-in providers.
//!
//! A response stream yields `Ok(chunk)`s and ends after a [`Chunk::Stop`]. A
//! stream that yields `Err` is broken: the caller stops reading it. A stream that
//! ends without a `Stop` is also broken (the response is incomplete).

pub mod anthropic;
mod http;
pub mod openai;
pub mod replay;
pub mod scripted;
pub mod sse;

use std::pin::Pin;

use futures::Stream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use fanout_sessionlog::{Chunk, ModelStopReason, Usage};

/// A response as a stream of chunks.
pub type ChunkStream = Pin<Box<dyn Stream<Item = Result<Chunk, ModelError>> + Send>>;

/// Streams model responses. Implementations must be cheap to share across
/// sessions (`Arc<dyn LanguageModel>`), must never log credentials, and may use
/// or ignore [`GenerateOptions`].
#[async_trait::async_trait]
pub trait LanguageModel: Send + Sync + std::fmt::Debug {
    /// A short provider name for messages, e.g. `anthropic`.
    fn provider_name(&self) -> &str;

    /// Starts one model call. An `Err` here means the call failed before any
    /// chunk (e.g. an HTTP error status).
    async fn stream(
        &self,
        request: ModelRequest,
        options: GenerateOptions,
    ) -> Result<ChunkStream, ModelError>;
}

/// Per-call options that are not part of the model input.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GenerateOptions {
    /// The calling session's id, stamped by the agent when it assembles the
    /// request. HTTP providers send it as the `x-fanout-session-id` header;
    /// scripted and replay providers bind sessions to scripts with it. `None`
    /// for calls made outside any session (direct unit-test calls).
    pub session_id: Option<String>,
}

impl GenerateOptions {
    /// Options for a call made by `session_id`.
    pub fn for_session(session_id: impl Into<String>) -> Self {
        Self {
            session_id: Some(session_id.into()),
        }
    }
}

/// The HTTP header carrying [`GenerateOptions::session_id`]: `fanout-replay`'s,
/// which the replay server binds by, so the two cannot drift apart.
pub use fanout_replay::SESSION_ID_HEADER;

/// One model call's input, provider-neutral.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// Model name.
    pub model: String,
    /// System prompt.
    pub system: Option<String>,
    /// Conversation so far (alternating user / assistant).
    pub messages: Vec<Message>,
    /// Tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Output token limit.
    pub max_tokens: u32,
}

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The user, including tool results.
    User,
    /// The model.
    Assistant,
}

/// One conversation message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Speaker.
    pub role: Role,
    /// Content parts in order.
    pub content: Vec<ContentPart>,
}

impl Message {
    /// A user message with one text part.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: vec![ContentPart::Text { text: text.into() }],
        }
    }

    /// The message's text parts, concatenated.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|p| match p {
                ContentPart::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// A part of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// A tool call made by the assistant.
    ToolUse {
        /// Provider tool-use id.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments (an object; `{}` when the model's JSON was invalid).
        input: Value,
    },
    /// A tool's answer, sent back as part of a user message.
    ToolResult {
        /// The tool use it answers.
        tool_use_id: String,
        /// Result text.
        content: String,
        /// Whether the tool failed.
        is_error: bool,
    },
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Tool name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments.
    pub input_schema: Value,
}

/// A model call failed. Messages never contain credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// The provider answered with an HTTP error status.
    #[error("{provider} API returned HTTP {status}: {message}{}", http_hint(*status, hint_env))]
    Http {
        /// Provider name.
        provider: String,
        /// HTTP status code.
        status: u16,
        /// The provider's error message (or the start of the body).
        message: String,
        /// The environment variable holding the key, for the 401/403 hint.
        hint_env: Option<&'static str>,
    },
    /// The request could not be sent or the response not received.
    #[error("{provider} request failed: {message}")]
    Transport {
        /// Provider name.
        provider: String,
        /// What went wrong.
        message: String,
    },
    /// The response stream broke or was malformed mid-response.
    #[error("{provider} response stream broke: {message}")]
    Stream {
        /// Provider name.
        provider: String,
        /// What went wrong.
        message: String,
    },
    /// A scripted or replayed call had no matching recorded response.
    #[error("{provider}: {message}")]
    Script {
        /// Provider name.
        provider: String,
        /// What went wrong.
        message: String,
    },
    /// A replayed call fails as the recorded one did, with its recorded message.
    #[error("{message}")]
    Recorded {
        /// The recorded `model/error` message.
        message: String,
    },
}

fn http_hint(status: u16, env: &Option<&'static str>) -> String {
    match status {
        401 | 403 => match env {
            Some(var) => format!(" (authentication failed: check {var})"),
            None => " (authentication failed)".to_string(),
        },
        429 => " (rate limited: retry later)".to_string(),
        500..=599 => " (server error)".to_string(),
        _ => String::new(),
    }
}

/// A provider could not be configured (bad base URL, missing key…).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ProviderConfigError(pub String);
