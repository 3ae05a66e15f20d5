//! The agent loop: one prompt turn of one session (model stream -> tool calls ->
//! results -> ... until the model ends its turn), including subagent children,
//! which are sessions of their own run to completion inside the parent's tool
//! call.

mod subagent;

use std::path::PathBuf;
use std::sync::Arc;

use fanout_sessionlog::{
    Chunk, Event, Header, ModelStopReason, SessionLogWriter, Timestamp, WriteError,
};
use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::model::{
    ChunkStream, ContentPart, GenerateOptions, LanguageModel, Message, ModelError, ModelRequest,
    Role,
};
use crate::tools::{self, LIST_DIR, READ_FILE, SUBAGENT};
use crate::wire::{Outbox, message_chunk, text_content, tool_call_update};

use subagent::run_subagent;

/// Everything a running agent needs besides its sessions.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The model provider.
    pub model: Arc<dyn LanguageModel>,
    /// The model name sent with each request.
    pub model_name: String,
    /// Where session logs go.
    pub sessions_root: PathBuf,
    /// Deepest allowed subagent nesting (a root session is depth 0).
    pub max_depth: u32,
    /// Output token limit per model call.
    pub max_tokens: u32,
    /// Model calls allowed in one prompt turn of one session.
    pub max_steps: u32,
    /// The system prompt.
    pub system_prompt: String,
}

/// The default system prompt.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are fanout's reference coding agent. You can read files in the \
working directory with read_file and list_dir, and delegate self-contained subtasks with the subagent tool \
(mode spawn for a fresh helper, fork for a helper that sees this conversation). Be concise.";

/// Why a prompt turn ended (the ACP `stopReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopReason {
    EndTurn,
    MaxTokens,
    MaxTurnRequests,
    Refusal,
    Cancelled,
}

impl StopReason {
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::MaxTokens => "max_tokens",
            StopReason::MaxTurnRequests => "max_turn_requests",
            StopReason::Refusal => "refusal",
            StopReason::Cancelled => "cancelled",
        }
    }

    fn from_model(reason: ModelStopReason) -> Self {
        match reason {
            ModelStopReason::MaxTokens => StopReason::MaxTokens,
            ModelStopReason::Refusal => StopReason::Refusal,
            ModelStopReason::EndTurn | ModelStopReason::ToolUse | ModelStopReason::StopSequence => {
                StopReason::EndTurn
            }
        }
    }
}

/// How a turn ended normally.
#[derive(Debug, Clone)]
pub(crate) struct TurnSummary {
    pub(crate) stop_reason: StopReason,
    /// The text of the last model response.
    pub(crate) final_text: String,
}

/// A turn that could not finish.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TurnError {
    #[error("model call failed: {0}")]
    Model(#[from] ModelError),
    #[error("cannot write the session log: {0}")]
    Log(#[from] WriteError),
}

/// What a turn runs with: shared config, the client channel, and the
/// cancellation flag of the root session's current prompt.
#[derive(Debug, Clone)]
pub(crate) struct TurnEnv {
    pub(crate) cfg: Arc<AgentConfig>,
    pub(crate) out: Outbox,
    /// The client advertised `clientCapabilities.subagents`.
    pub(crate) subagents: bool,
    pub(crate) cancel: watch::Receiver<bool>,
}

impl TurnEnv {
    fn is_cancelled(&self) -> bool {
        *self.cancel.borrow()
    }
}

/// Resolves when the flag becomes true (never, if its sender is gone).
async fn cancelled(mut rx: watch::Receiver<bool>) {
    if rx.wait_for(|c| *c).await.is_err() {
        futures::future::pending::<()>().await;
    }
}

/// One session: its conversation, its log, its counters.
#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) id: String,
    /// Canonical cwd, for tool confinement.
    cwd: PathBuf,
    /// The cwd as the client gave it (header and bucket).
    cwd_text: String,
    depth: u32,
    history: Vec<Message>,
    log: SessionLogWriter,
    /// Every event in the log, for fork prefixes.
    events: Vec<Event>,
    model_calls: u64,
    /// History length and event count just before the current model call:
    /// what a fork child started from this call's tool uses inherits.
    checkpoint: (usize, usize),
    /// Whether this session's updates are sent to the client.
    visible: bool,
    usage_total: u64,
    tool_use_count: u64,
}

impl Session {
    /// A new root session (ACP `session/new`) with its log.
    pub(crate) fn new_root(
        cfg: &AgentConfig,
        cwd: PathBuf,
        cwd_text: String,
    ) -> Result<Self, WriteError> {
        let id = uuid::Uuid::now_v7().to_string();
        let header = Header::root(&id, &cwd_text);
        let log = SessionLogWriter::create(&cfg.sessions_root, &header)?;
        Ok(Self {
            id,
            cwd,
            cwd_text,
            depth: 0,
            history: Vec::new(),
            log,
            events: Vec::new(),
            model_calls: 0,
            checkpoint: (0, 0),
            visible: true,
            usage_total: 0,
            tool_use_count: 0,
        })
    }

    fn record(&mut self, event: Event) -> Result<(), WriteError> {
        self.log.append(&event)?;
        self.events.push(event);
        Ok(())
    }

    fn push_user(&mut self, part: ContentPart) {
        match self.history.last_mut() {
            Some(last) if last.role == Role::User => last.content.push(part),
            _ => self.history.push(Message {
                role: Role::User,
                content: vec![part],
            }),
        }
    }

    async fn update(&self, env: &TurnEnv, update: Value) {
        if self.visible {
            env.out.update(&self.id, update).await;
        }
    }
}

/// Runs one prompt turn and records its `turn/end`.
pub(crate) fn run_turn<'a>(
    session: &'a mut Session,
    env: &'a TurnEnv,
    prompt: String,
) -> BoxFuture<'a, Result<TurnSummary, TurnError>> {
    Box::pin(async move {
        let result = turn(session, env, prompt).await;
        let stop_reason = match &result {
            Ok(summary) => summary.stop_reason.as_str(),
            Err(_) => "error",
        };
        let end = session.record(Event::TurnEnd {
            ts: Timestamp::now(),
            stop_reason: stop_reason.into(),
        });
        match (result, end) {
            (Ok(summary), Ok(())) => Ok(summary),
            (Ok(_), Err(err)) => Err(err.into()),
            (Err(err), _) => Err(err),
        }
    })
}

#[derive(Debug)]
struct PendingTool {
    id: String,
    name: String,
    json: String,
}

struct ToolOutcome {
    content: String,
    is_error: bool,
}

async fn turn(
    session: &mut Session,
    env: &TurnEnv,
    prompt: String,
) -> Result<TurnSummary, TurnError> {
    let cfg = env.cfg.clone();
    session.record(Event::UserMessage {
        ts: Timestamp::now(),
        text: prompt.clone(),
    })?;
    session.push_user(ContentPart::Text { text: prompt });
    let mut last_text = String::new();
    let summary = |stop_reason, final_text: &str| TurnSummary {
        stop_reason,
        final_text: final_text.to_string(),
    };
    for _step in 0..cfg.max_steps {
        if env.is_cancelled() {
            return Ok(summary(StopReason::Cancelled, &last_text));
        }
        session.checkpoint = (session.history.len(), session.events.len());
        let ordinal = session.model_calls;
        session.model_calls += 1;
        session.record(Event::ModelRequest {
            ts: Timestamp::now(),
            ordinal,
            model: cfg.model_name.clone(),
        })?;
        let request = ModelRequest {
            model: cfg.model_name.clone(),
            system: Some(cfg.system_prompt.clone()).filter(|s| !s.is_empty()),
            messages: session.history.clone(),
            tools: tools::tool_specs(),
            max_tokens: cfg.max_tokens,
        };
        let options = GenerateOptions::for_session(session.id.clone());
        let started = tokio::select! {
            biased;
            () = cancelled(env.cancel.clone()) => None,
            result = cfg.model.stream(request, options) => Some(result),
        };
        let stream = match started {
            None => return Ok(summary(StopReason::Cancelled, &last_text)),
            Some(Ok(stream)) => stream,
            Some(Err(err)) => return Err(model_failed(session, ordinal, err)),
        };
        let ModelStep {
            text,
            tools: pending,
            end,
        } = collect_response(session, env, stream, ordinal).await?;
        let stop = match end {
            StepEnd::Stopped(reason) => reason,
            StepEnd::Cancelled => {
                if !text.is_empty() {
                    session.history.push(Message {
                        role: Role::Assistant,
                        content: vec![ContentPart::Text { text: text.clone() }],
                    });
                }
                return Ok(summary(StopReason::Cancelled, &text));
            }
        };

        let parsed: Vec<Result<Value, String>> = pending.iter().map(parse_arguments).collect();
        let mut content = Vec::new();
        if !text.is_empty() {
            content.push(ContentPart::Text { text: text.clone() });
        }
        for (tool, args) in pending.iter().zip(&parsed) {
            content.push(ContentPart::ToolUse {
                id: tool.id.clone(),
                name: tool.name.clone(),
                input: args.clone().unwrap_or_else(|_| json!({})),
            });
        }
        if !content.is_empty() {
            session.history.push(Message {
                role: Role::Assistant,
                content,
            });
        }
        last_text = text;

        if pending.is_empty() {
            return Ok(summary(StopReason::from_model(stop), &last_text));
        }
        for (tool, args) in pending.iter().zip(parsed) {
            let outcome = execute_tool(session, env, tool, args).await?;
            session.tool_use_count += 1;
            session.push_user(ContentPart::ToolResult {
                tool_use_id: tool.id.clone(),
                content: outcome.content,
                is_error: outcome.is_error,
            });
        }
    }
    Ok(summary(StopReason::MaxTurnRequests, &last_text))
}

/// One model response as the turn read it.
struct ModelStep {
    /// Its text deltas, concatenated.
    text: String,
    /// The tool uses it asked for, in order, with their argument JSON.
    tools: Vec<PendingTool>,
    /// How it ended.
    end: StepEnd,
}

enum StepEnd {
    /// The model ended the response.
    Stopped(ModelStopReason),
    /// The prompt was cancelled mid-response.
    Cancelled,
}

/// Reads one model response (call `ordinal`) to its stop event or a
/// cancellation, logging every chunk and streaming its text to the client. A
/// stream that breaks or ends without a stop event is a failed call.
async fn collect_response(
    session: &mut Session,
    env: &TurnEnv,
    mut stream: ChunkStream,
    ordinal: u64,
) -> Result<ModelStep, TurnError> {
    let provider = || env.cfg.model.provider_name().to_string();
    let mut text = String::new();
    let mut tools: Vec<PendingTool> = Vec::new();
    loop {
        let next = tokio::select! {
            biased;
            () = cancelled(env.cancel.clone()) => {
                return Ok(ModelStep { text, tools, end: StepEnd::Cancelled });
            }
            next = stream.next() => next,
        };
        let chunk = match next {
            Some(Ok(chunk)) => chunk,
            Some(Err(err)) => return Err(model_failed(session, ordinal, err)),
            None => {
                let err = ModelError::Stream {
                    provider: provider(),
                    message: "the response ended without a stop event".into(),
                };
                return Err(model_failed(session, ordinal, err));
            }
        };
        session.record(Event::AssistantChunk {
            ts: Timestamp::now(),
            chunk: chunk.clone(),
        })?;
        match chunk {
            Chunk::TextDelta { text: delta } => {
                session.update(env, message_chunk(&delta)).await;
                text.push_str(&delta);
            }
            Chunk::ToolUseStart { id, name } => tools.push(PendingTool {
                id,
                name,
                json: String::new(),
            }),
            Chunk::ToolUseDelta { id, partial_json } => {
                match tools.iter_mut().rev().find(|t| t.id == id) {
                    Some(tool) => tool.json.push_str(&partial_json),
                    None => {
                        let err = ModelError::Stream {
                            provider: provider(),
                            message: format!("tool-use delta for unknown tool use {id:?}"),
                        };
                        return Err(model_failed(session, ordinal, err));
                    }
                }
            }
            Chunk::Stop { stop_reason, usage } => {
                session.usage_total = session.usage_total.saturating_add(usage.total());
                return Ok(ModelStep {
                    text,
                    tools,
                    end: StepEnd::Stopped(stop_reason),
                });
            }
        }
    }
}

/// Records a failed model call and turns it into the turn's error.
fn model_failed(session: &mut Session, ordinal: u64, err: ModelError) -> TurnError {
    let logged = session.record(Event::ModelError {
        ts: Timestamp::now(),
        ordinal,
        message: err.to_string(),
    });
    match logged {
        Ok(()) => TurnError::Model(err),
        Err(log) => TurnError::Log(log),
    }
}

fn parse_arguments(tool: &PendingTool) -> Result<Value, String> {
    if tool.json.trim().is_empty() {
        return Ok(json!({}));
    }
    match serde_json::from_str::<Value>(&tool.json) {
        Ok(value) if value.is_object() => Ok(value),
        Ok(_) => Err(format!(
            "invalid arguments for {}: expected a JSON object",
            tool.name
        )),
        Err(err) => Err(format!("invalid JSON arguments for {}: {err}", tool.name)),
    }
}

fn tool_kind(name: &str) -> &'static str {
    match name {
        READ_FILE => "read",
        LIST_DIR => "search",
        _ => "other",
    }
}

fn tool_title(name: &str, input: Option<&Value>) -> String {
    let arg = |k: &str| input.and_then(|i| i.get(k)).and_then(Value::as_str);
    match name {
        READ_FILE => format!("Read {}", arg("path").unwrap_or("?")),
        LIST_DIR => format!("List {}", arg("path").unwrap_or(".")),
        SUBAGENT => format!("Subagent: {}", arg("description").unwrap_or("?")),
        other => other.to_string(),
    }
}

async fn execute_tool(
    session: &mut Session,
    env: &TurnEnv,
    tool: &PendingTool,
    args: Result<Value, String>,
) -> Result<ToolOutcome, TurnError> {
    session.record(Event::ToolCall {
        ts: Timestamp::now(),
        tool_call_id: tool.id.clone(),
        name: tool.name.clone(),
        input: args
            .clone()
            .unwrap_or_else(|_| Value::String(tool.json.clone())),
    })?;
    let outcome = match (tool.name.as_str(), args) {
        (SUBAGENT, Ok(input)) => run_subagent(session, env, &tool.id, input).await?,
        (name, args) => {
            let raw_input = match &args {
                Ok(input) => input.clone(),
                Err(_) => Value::String(tool.json.clone()),
            };
            let mut call = json!({
                "sessionUpdate": "tool_call",
                "toolCallId": tool.id,
                "title": tool_title(name, args.as_ref().ok()),
                "kind": tool_kind(name),
                "status": "pending",
                "rawInput": raw_input,
            });
            if name == SUBAGENT {
                call["_meta"] = subagent::failed_meta().to_meta();
            }
            session.update(env, call).await;
            let result = match args {
                Err(message) => Err(message),
                Ok(input) if name == READ_FILE || name == LIST_DIR => {
                    session
                        .update(env, tool_call_update(&tool.id, "in_progress", &[]))
                        .await;
                    let cwd = session.cwd.clone();
                    let name = name.to_string();
                    tokio::task::spawn_blocking(move || {
                        tools::run_workspace_tool(&cwd, &name, &input)
                    })
                    .await
                    .unwrap_or_else(|e| Err(format!("the tool crashed: {e}")))
                }
                Ok(_) => Err(format!(
                    "unknown tool {name:?}; available: {SUBAGENT}, {READ_FILE}, {LIST_DIR}"
                )),
            };
            let (status, content, is_error) = match result {
                Ok(text) => ("completed", text, false),
                Err(message) => ("failed", message, true),
            };
            let update = tool_call_update(&tool.id, status, &[text_content(&content)]);
            session.update(env, update).await;
            ToolOutcome { content, is_error }
        }
    };
    session.record(Event::ToolResult {
        ts: Timestamp::now(),
        tool_call_id: tool.id.clone(),
        is_error: outcome.is_error,
        content: outcome.content.clone(),
    })?;
    Ok(outcome)
}
