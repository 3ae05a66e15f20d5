//! The `replay` provider: serves a scenario's recorded model responses, each
//! live session from its own recorded session (see `fanout_replay`'s binding:
//! first-call order, one cursor per session). No network, no key.

use std::path::Path;
use std::sync::Arc;

use fanout_replay::{ReplayBinding, ScenarioScripts};

use super::{
    ChunkStream, GenerateOptions, LanguageModel, ModelError, ModelRequest, ProviderConfigError,
};

const PROVIDER: &str = "replay";

/// Model name reported when `--model` is not given.
pub const DEFAULT_MODEL: &str = "replay";

/// Replays recorded responses through a shared [`ReplayBinding`].
#[derive(Debug, Clone)]
pub struct ReplayProvider {
    binding: Arc<ReplayBinding>,
}

impl ReplayProvider {
    /// Loads every session log of `scenario` (a scenario directory or a sessions root).
    pub fn load(scenario: &Path) -> Result<Self, ProviderConfigError> {
        let scripts = ScenarioScripts::load(scenario)
            .map_err(|err| ProviderConfigError(format!("cannot load the scenario: {err}")))?;
        Ok(Self::new(Arc::new(ReplayBinding::new(scripts))))
    }

    /// A provider over an existing binding (shared with other providers or a server).
    pub fn new(binding: Arc<ReplayBinding>) -> Self {
        Self { binding }
    }
}

#[async_trait::async_trait]
impl LanguageModel for ReplayProvider {
    fn provider_name(&self) -> &str {
        PROVIDER
    }

    async fn stream(
        &self,
        _request: ModelRequest,
        options: GenerateOptions,
    ) -> Result<ChunkStream, ModelError> {
        let response = self
            .binding
            .next_response(options.session_id.as_deref())
            .map_err(|err| ModelError::Script {
                provider: PROVIDER.into(),
                message: err.to_string(),
            })?;
        let mut items: Vec<Result<_, ModelError>> = response.chunks.into_iter().map(Ok).collect();
        if let Some(message) = response.error {
            // Fail exactly as the recorded call did, so the replayed log matches.
            items.push(Err(ModelError::Recorded { message }));
        }
        Ok(Box::pin(futures::stream::iter(items)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fanout_sessionlog::{Backend, Chunk, Event, Header, SessionLogWriter, Timestamp};
    use futures::StreamExt;

    fn write_log(root: &Path, id: &str, parent: Option<&str>, responses: &[(&str, Option<&str>)]) {
        let header = match parent {
            Some(parent) => Header::child(id, "/w", parent, "call", Backend::Spawn, None),
            None => Header::root(id, "/w"),
        };
        let mut log = SessionLogWriter::create(root, &header).unwrap();
        for (ordinal, (text, error)) in responses.iter().enumerate() {
            let ts = Timestamp::now();
            log.append(&Event::ModelRequest {
                ts,
                ordinal: ordinal as u64,
                model: "recorded-model".into(),
            })
            .unwrap();
            log.append(&Event::AssistantChunk {
                ts,
                chunk: Chunk::TextDelta {
                    text: (*text).into(),
                },
            })
            .unwrap();
            if let Some(message) = error {
                log.append(&Event::ModelError {
                    ts,
                    ordinal: ordinal as u64,
                    message: (*message).into(),
                })
                .unwrap();
            }
        }
    }

    fn request() -> ModelRequest {
        ModelRequest {
            model: "m".into(),
            system: None,
            messages: vec![],
            tools: vec![],
            max_tokens: 1,
        }
    }

    async fn call(provider: &ReplayProvider, session: &str) -> Vec<Result<Chunk, ModelError>> {
        provider
            .stream(request(), GenerateOptions::for_session(session))
            .await
            .unwrap()
            .collect()
            .await
    }

    #[tokio::test]
    async fn replays_each_live_session_its_own_recorded_session() {
        let dir = tempfile::tempdir().unwrap();
        write_log(
            dir.path(),
            "parent",
            None,
            &[("p0", None), ("p1", Some("upstream hung up"))],
        );
        write_log(dir.path(), "child", Some("parent"), &[("c0", None)]);
        let provider = ReplayProvider::load(dir.path()).unwrap();

        let text = |t: &str| Ok(Chunk::TextDelta { text: t.into() });
        assert_eq!(call(&provider, "live-parent").await, vec![text("p0")]);
        assert_eq!(call(&provider, "live-child").await, vec![text("c0")]);
        let failed = call(&provider, "live-parent").await;
        assert_eq!(failed[0], text("p1"));
        // The recorded failure comes back with exactly its recorded message.
        assert_eq!(
            failed[1].as_ref().unwrap_err().to_string(),
            "upstream hung up"
        );
        let Err(err) = provider
            .stream(request(), GenerateOptions::for_session("live-child"))
            .await
        else {
            panic!("a call past the end of the script must fail");
        };
        let err = err.to_string();
        assert!(
            err.starts_with("replay: live session live-child made model call 2"),
            "{err}"
        );
        let missing = ReplayProvider::load(&dir.path().join("nope")).unwrap_err();
        assert!(missing.0.contains("nope"), "{}", missing.0);
    }
}
