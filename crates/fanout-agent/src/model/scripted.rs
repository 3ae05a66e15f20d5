//! An in-process provider that plays back a script: deterministic model
//! responses for tests and demos, with no network.
//!
//! # Script format (`--script FILE`)
//!
//! One JSON document:
//!
//! ```json
//! {
//!   "version": 1,
//!   "sessions": [
//!     { "label": "parent",
//!       "responses": [
//!         [ {"kind": "text_delta", "text": "Hello"},
//!           {"kind": "stop", "stopReason": "end_turn", "usage": {"inputTokens": 3, "outputTokens": 1}} ]
//!       ] }
//!   ]
//! }
//! ```
//!
//! `sessions` are listed in **first-call order**: the first distinct session
//! that calls the model is bound to `sessions[0]`, the next new one to
//! `sessions[1]`, and so on (a call without a session id counts as one
//! anonymous session). Each bound session then takes its own `responses` in
//! order, one per model call. A response is a list of steps; a step is a
//! [`Chunk`] in the session-log JSON (`text_delta`, `tool_use_start`,
//! `tool_use_delta`, `stop`), or `{"kind":"error","message":…}`, which breaks
//! the stream at that point with that message. A response without a `stop`
//! is an incomplete stream. More distinct sessions than scripted ones, or a
//! session asking past its last response, is an error naming both.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::{
    Chunk, ChunkStream, GenerateOptions, LanguageModel, ModelError, ModelRequest,
    ProviderConfigError,
};

const PROVIDER: &str = "scripted";

/// A whole script.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Format version, 1.
    #[serde(default = "one")]
    pub version: u32,
    /// Per-session scripts in first-call order.
    pub sessions: Vec<ScriptedSession>,
}

fn one() -> u32 {
    1
}

/// The responses of one session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedSession {
    /// A name for error messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// One entry per model call, in order.
    pub responses: Vec<Vec<ScriptStep>>,
}

/// One step of a scripted response.
#[derive(Debug, Clone, PartialEq)]
pub enum ScriptStep {
    /// Yield this chunk.
    Chunk(Chunk),
    /// Break the stream with this message.
    Error {
        /// The error message.
        message: String,
    },
}

impl Serialize for ScriptStep {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ScriptStep::Chunk(chunk) => chunk.serialize(serializer),
            ScriptStep::Error { message } => {
                serde_json::json!({"kind": "error", "message": message}).serialize(serializer)
            }
        }
    }
}

impl<'de> Deserialize<'de> for ScriptStep {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        if value.get("kind").and_then(Value::as_str) == Some("error") {
            let message = value
                .get("message")
                .and_then(Value::as_str)
                .ok_or_else(|| serde::de::Error::custom("an error step needs a string message"))?;
            return Ok(ScriptStep::Error {
                message: message.to_string(),
            });
        }
        Chunk::deserialize(value)
            .map(ScriptStep::Chunk)
            .map_err(serde::de::Error::custom)
    }
}

impl Script {
    /// Reads a script file.
    pub fn load(path: &Path) -> Result<Self, ProviderConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ProviderConfigError(format!("cannot read script {}: {e}", path.display()))
        })?;
        Self::parse(&text).map_err(|e| ProviderConfigError(format!("{}: {}", path.display(), e.0)))
    }

    /// Parses script text.
    pub fn parse(text: &str) -> Result<Self, ProviderConfigError> {
        let script: Script = serde_json::from_str(text)
            .map_err(|e| ProviderConfigError(format!("invalid script: {e}")))?;
        if script.version != 1 {
            return Err(ProviderConfigError(format!(
                "unsupported script version {}",
                script.version
            )));
        }
        Ok(script)
    }
}

/// One call the scripted provider served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScriptCall {
    /// The caller's [`GenerateOptions::session_id`].
    pub session_id: Option<String>,
    /// Index of the script session it is bound to.
    pub script: usize,
    /// Index of the response served.
    pub response: usize,
}

#[derive(Debug, Default)]
struct State {
    /// Session id -> (script index, next response).
    bound: HashMap<Option<String>, (usize, usize)>,
    calls: Vec<ScriptCall>,
}

/// Plays back a [`Script`].
#[derive(Debug)]
pub struct ScriptedProvider {
    script: Script,
    state: Mutex<State>,
    trace: Option<PathBuf>,
}

impl ScriptedProvider {
    /// A provider for `script`.
    pub fn new(script: Script) -> Self {
        Self {
            script,
            state: Mutex::new(State::default()),
            trace: None,
        }
    }

    /// Also appends each served call as a JSON line ([`ScriptCall`]) to `path`
    /// (created 0600), so an out-of-process test can check who called.
    pub fn with_trace(mut self, path: PathBuf) -> Self {
        self.trace = Some(path);
        self
    }

    /// Every call served so far, in order.
    pub fn calls(&self) -> Vec<ScriptCall> {
        self.state
            .lock()
            .map(|s| s.calls.clone())
            .unwrap_or_default()
    }

    fn label(&self, index: usize) -> String {
        match self
            .script
            .sessions
            .get(index)
            .and_then(|s| s.label.as_deref())
        {
            Some(label) => format!("script session {index} ({label})"),
            None => format!("script session {index}"),
        }
    }

    fn next_response(
        &self,
        session: &Option<String>,
    ) -> Result<(ScriptCall, Vec<ScriptStep>), ModelError> {
        let fail = |message: String| ModelError::Script {
            provider: PROVIDER.into(),
            message,
        };
        let who = session.as_deref().unwrap_or("<no session id>");
        let mut state = self
            .state
            .lock()
            .map_err(|_| fail("internal state poisoned".into()))?;
        let next_script = state.bound.len();
        let (script, cursor) = *state
            .bound
            .entry(session.clone())
            .or_insert((next_script, 0));
        let Some(scripted) = self.script.sessions.get(script) else {
            state.bound.remove(session);
            return Err(fail(format!(
                "session {who} is distinct caller number {} but the script has only {} session(s)",
                script + 1,
                self.script.sessions.len()
            )));
        };
        let Some(steps) = scripted.responses.get(cursor) else {
            return Err(fail(format!(
                "session {who} asked for response {} but {} has only {}",
                cursor + 1,
                self.label(script),
                scripted.responses.len()
            )));
        };
        let steps = steps.clone();
        state.bound.insert(session.clone(), (script, cursor + 1));
        let call = ScriptCall {
            session_id: session.clone(),
            script,
            response: cursor,
        };
        state.calls.push(call.clone());
        Ok((call, steps))
    }

    fn write_trace(&self, call: &ScriptCall) {
        let Some(path) = &self.trace else { return };
        let result = (|| -> std::io::Result<()> {
            let mut file = fanout_types::private_open_options()
                .create(true)
                .append(true)
                .open(path)?;
            let mut line = serde_json::to_vec(call).map_err(std::io::Error::other)?;
            line.push(b'\n');
            file.write_all(&line)
        })();
        if let Err(err) = result {
            tracing::warn!(path = %path.display(), %err, "cannot write the script trace");
        }
    }
}

#[async_trait::async_trait]
impl LanguageModel for ScriptedProvider {
    fn provider_name(&self) -> &str {
        PROVIDER
    }

    async fn stream(
        &self,
        _request: ModelRequest,
        options: GenerateOptions,
    ) -> Result<ChunkStream, ModelError> {
        let (call, steps) = self.next_response(&options.session_id)?;
        self.write_trace(&call);
        let mut items = Vec::with_capacity(steps.len());
        for step in steps {
            match step {
                ScriptStep::Chunk(chunk) => items.push(Ok(chunk)),
                ScriptStep::Error { message } => {
                    items.push(Err(ModelError::Stream {
                        provider: PROVIDER.into(),
                        message,
                    }));
                    break;
                }
            }
        }
        Ok(Box::pin(futures::stream::iter(items)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    const SCRIPT: &str = r#"{"sessions":[
        {"label":"parent","responses":[[{"kind":"text_delta","text":"p0"}],[{"kind":"text_delta","text":"p1"}]]},
        {"responses":[[{"kind":"text_delta","text":"c0"},{"kind":"error","message":"boom"},{"kind":"text_delta","text":"never"}]]}
    ]}"#;

    fn req() -> ModelRequest {
        ModelRequest {
            model: "m".into(),
            system: None,
            messages: vec![],
            tools: vec![],
            max_tokens: 1,
        }
    }

    async fn texts(
        p: &ScriptedProvider,
        session: &str,
    ) -> Result<Vec<Result<Chunk, ModelError>>, ModelError> {
        let stream = p
            .stream(req(), GenerateOptions::for_session(session))
            .await?;
        Ok(stream.collect().await)
    }

    #[tokio::test]
    async fn binds_by_first_call_order_with_own_cursors() {
        let p = ScriptedProvider::new(Script::parse(SCRIPT).unwrap());
        let a0 = texts(&p, "A").await.unwrap();
        assert_eq!(a0, vec![Ok(Chunk::TextDelta { text: "p0".into() })]);
        let b0 = texts(&p, "B").await.unwrap();
        assert_eq!(b0.len(), 2);
        assert!(matches!(&b0[1], Err(ModelError::Stream { message, .. }) if message == "boom"));
        let a1 = texts(&p, "A").await.unwrap();
        assert_eq!(a1, vec![Ok(Chunk::TextDelta { text: "p1".into() })]);

        let err = texts(&p, "A").await.unwrap_err().to_string();
        assert!(
            err.contains("session A asked for response 3 but script session 0 (parent) has only 2"),
            "{err}"
        );
        let err = texts(&p, "C").await.unwrap_err().to_string();
        assert!(
            err.contains("session C is distinct caller number 3 but the script has only 2"),
            "{err}"
        );

        let calls = p.calls();
        assert_eq!(calls.len(), 3);
        assert_eq!(
            calls[1],
            ScriptCall {
                session_id: Some("B".into()),
                script: 1,
                response: 0
            }
        );
    }

    #[test]
    fn bad_scripts_are_reported() {
        let err = Script::parse(r#"{"sessions":[{"responses":[[{"kind":"nope"}]]}]}"#).unwrap_err();
        assert!(err.0.contains("invalid script"), "{}", err.0);
        assert!(Script::parse(r#"{"version":2,"sessions":[]}"#).is_err());
        let script = Script::parse(SCRIPT).unwrap();
        let again: Script = serde_json::from_str(&serde_json::to_string(&script).unwrap()).unwrap();
        assert_eq!(again, script);
    }
}
