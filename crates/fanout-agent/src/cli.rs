//! `fanout agent` flags, the provider registry, and the stdio entry points.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::agent::{AgentConfig, DEFAULT_SYSTEM_PROMPT};
use crate::error::AgentError;
use crate::model::anthropic::{self, AnthropicProvider};
use crate::model::openai::{self, OpenAiProvider};
use crate::model::replay::{self, ReplayProvider};
use crate::model::scripted::{Script, ScriptedProvider};
use crate::model::{LanguageModel, ProviderConfigError};
use crate::server::serve;

/// Flags of `fanout agent`. API keys are never flags: they come only from
/// `ANTHROPIC_API_KEY` / `OPENAI_API_KEY`.
#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// Model provider: anthropic, openai, scripted or replay (a binary may register more).
    #[arg(long, default_value = "anthropic")]
    pub provider: String,
    /// Model name sent to the provider (default depends on the provider).
    #[arg(long)]
    pub model: Option<String>,
    /// Provider base URL (default: ANTHROPIC_BASE_URL or OPENAI_BASE_URL, then the public API).
    #[arg(long)]
    pub base_url: Option<String>,
    /// Script file for the scripted provider (recorded responses per session, in first-call order).
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// Append one JSON line per scripted model call (session id, script, response) to this file.
    #[arg(long)]
    pub script_trace: Option<PathBuf>,
    /// Scenario directory (or sessions root) whose session logs the replay provider serves.
    #[arg(long)]
    pub scenario: Option<PathBuf>,
    /// Directory of session logs (default: `sessions` in the fanout data directory:
    /// $FANOUT_DATA_DIR, else $XDG_DATA_HOME/fanout, else ~/.local/share/fanout).
    #[arg(long)]
    pub sessions_root: Option<PathBuf>,
    /// Deepest subagent nesting allowed (a top-level session is depth 0).
    #[arg(long, default_value_t = 3)]
    pub max_depth: u32,
    /// Output token limit of each model call.
    #[arg(long, default_value_t = 8192)]
    pub max_tokens: u32,
    /// Model calls allowed per prompt turn of one session.
    #[arg(long, default_value_t = 50)]
    pub max_steps: u32,
    /// Replace the built-in system prompt.
    #[arg(long)]
    pub system_prompt: Option<String>,
}

impl Default for AgentArgs {
    fn default() -> Self {
        Self {
            provider: "anthropic".into(),
            model: None,
            base_url: None,
            script: None,
            script_trace: None,
            scenario: None,
            sessions_root: None,
            max_depth: 3,
            max_tokens: 8192,
            max_steps: 50,
            system_prompt: None,
        }
    }
}

/// Builds a provider from the flags.
pub type ProviderFactory =
    Arc<dyn Fn(&AgentArgs) -> Result<Arc<dyn LanguageModel>, ProviderConfigError> + Send + Sync>;

struct Entry {
    name: String,
    default_model: String,
    factory: ProviderFactory,
}

/// The providers `--provider` can name. [`ProviderRegistry::builtin`] has
/// `anthropic`, `openai`, `scripted` and `replay`; a crate that depends on this
/// one adds its own with [`ProviderRegistry::register`] and runs
/// [`run_stdio_with`].
pub struct ProviderRegistry {
    entries: Vec<Entry>,
}

impl fmt::Debug for ProviderRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|e| &e.name))
            .finish()
    }
}

impl Default for ProviderRegistry {
    fn default() -> Self {
        Self::builtin()
    }
}

impl ProviderRegistry {
    /// No providers.
    pub fn empty() -> Self {
        Self {
            entries: Vec::new(),
        }
    }

    /// `anthropic`, `openai`, `scripted` and `replay`.
    pub fn builtin() -> Self {
        let mut registry = Self::empty();
        registry.register("anthropic", anthropic::DEFAULT_MODEL, |args: &AgentArgs| {
            Ok(
                Arc::new(AnthropicProvider::from_env(args.base_url.as_deref())?)
                    as Arc<dyn LanguageModel>,
            )
        });
        registry.register("openai", openai::DEFAULT_MODEL, |args: &AgentArgs| {
            Ok(
                Arc::new(OpenAiProvider::from_env(args.base_url.as_deref())?)
                    as Arc<dyn LanguageModel>,
            )
        });
        registry.register("scripted", "scripted", |args: &AgentArgs| {
            let path = args
                .script
                .as_deref()
                .ok_or_else(|| ProviderConfigError("--script FILE is required".into()))?;
            let mut provider = ScriptedProvider::new(Script::load(path)?);
            if let Some(trace) = &args.script_trace {
                provider = provider.with_trace(trace.clone());
            }
            Ok(Arc::new(provider) as Arc<dyn LanguageModel>)
        });
        registry.register("replay", replay::DEFAULT_MODEL, |args: &AgentArgs| {
            let dir = args
                .scenario
                .as_deref()
                .ok_or_else(|| ProviderConfigError("--scenario DIR is required".into()))?;
            Ok(Arc::new(ReplayProvider::load(dir)?) as Arc<dyn LanguageModel>)
        });
        registry
    }

    /// Adds (or replaces) a provider. `default_model` is used when `--model`
    /// is not given.
    pub fn register<F>(
        &mut self,
        name: impl Into<String>,
        default_model: impl Into<String>,
        factory: F,
    ) where
        F: Fn(&AgentArgs) -> Result<Arc<dyn LanguageModel>, ProviderConfigError>
            + Send
            + Sync
            + 'static,
    {
        let name = name.into();
        self.entries.retain(|e| e.name != name);
        self.entries.push(Entry {
            name,
            default_model: default_model.into(),
            factory: Arc::new(factory),
        });
    }

    /// Registered names in registration order.
    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|e| e.name.as_str()).collect()
    }

    /// Builds the provider named by `args.provider` and resolves the model name.
    pub fn build(&self, args: &AgentArgs) -> Result<(Arc<dyn LanguageModel>, String), AgentError> {
        let entry = self
            .entries
            .iter()
            .find(|e| e.name == args.provider)
            .ok_or_else(|| AgentError::UnknownProvider {
                name: args.provider.clone(),
                known: self.names().join(", "),
            })?;
        let model = (entry.factory)(args).map_err(|error| AgentError::Provider {
            provider: entry.name.clone(),
            error,
        })?;
        let model_name = args
            .model
            .clone()
            .unwrap_or_else(|| entry.default_model.clone());
        Ok((model, model_name))
    }
}

/// Resolves the flags into an [`AgentConfig`] using `registry`.
pub fn agent_config(
    args: &AgentArgs,
    registry: &ProviderRegistry,
) -> Result<AgentConfig, AgentError> {
    let (model, model_name) = registry.build(args)?;
    let sessions_root = args
        .sessions_root
        .clone()
        .unwrap_or_else(fanout_sessionlog::default_sessions_root);
    Ok(AgentConfig {
        model,
        model_name,
        sessions_root,
        max_depth: args.max_depth,
        max_tokens: args.max_tokens,
        max_steps: args.max_steps.max(1),
        system_prompt: args
            .system_prompt
            .clone()
            .unwrap_or_else(|| DEFAULT_SYSTEM_PROMPT.to_string()),
    })
}

/// `fanout agent`: serve ACP on stdin/stdout with the built-in providers.
pub async fn run_stdio(args: AgentArgs) -> Result<(), AgentError> {
    run_stdio_with(args, &ProviderRegistry::builtin()).await
}

/// `fanout agent` with a caller-supplied provider registry.
pub async fn run_stdio_with(
    args: AgentArgs,
    registry: &ProviderRegistry,
) -> Result<(), AgentError> {
    let config = agent_config(&args, registry)?;
    tracing::info!(
        provider = %args.provider,
        model = %config.model_name,
        sessions_root = %config.sessions_root.display(),
        max_depth = config.max_depth,
        "fanout agent serving ACP on stdio"
    );
    serve(tokio::io::stdin(), tokio::io::stdout(), config).await
}
