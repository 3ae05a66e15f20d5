//! The `subagent` tool: a child session (spawn: fresh; fork: seeded with the
//! parent's conversation) run to completion inside the parent's tool call,
//! announced on ACP with `_meta.fanout.subagent` and, when the client asked for
//! it, ACP's own `subagent_update`.

use std::time::Instant;

use fanout_acp::FanoutSubagentMeta;
use fanout_sessionlog::{Event, Header, SessionLogWriter, SubagentMode, Timestamp};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    Session, StopReason, ToolOutcome, TurnEnv, TurnError, TurnSummary, run_turn, tool_title,
};
use crate::model::Message;
use crate::tools::SUBAGENT;
use crate::wire::{session_link, text_content, tool_call_update};

/// The `subagent` tool's arguments (DESIGN 5.2).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SubagentArgs {
    description: String,
    prompt: String,
    #[serde(default)]
    subagent_type: Option<String>,
    mode: SubagentMode,
}

/// How a child session ended, as its parent reports it.
#[derive(Debug)]
struct SubagentOutcome {
    /// `completed`, `cancelled` or `failed`: the `subagent/end` and `_meta` status.
    status: &'static str,
    /// The child turn's stop reason; `None` when it failed.
    stop_reason: Option<StopReason>,
    /// The tool result: the child's final text, or why there is none.
    text: String,
    /// Whether the tool call failed (a cancelled child is a failed call).
    is_error: bool,
    /// Tokens the child's model calls used.
    total_tokens: u64,
    /// Tool calls the child made.
    tool_use_count: u64,
}

impl SubagentOutcome {
    /// The child could not run at all.
    fn not_started(text: String) -> Self {
        Self {
            status: "failed",
            stop_reason: None,
            text,
            is_error: true,
            total_tokens: 0,
            tool_use_count: 0,
        }
    }

    /// The child ran its turn, with `result`, after using `total_tokens` and
    /// making `tool_use_count` tool calls.
    fn of_turn(
        result: Result<TurnSummary, TurnError>,
        total_tokens: u64,
        tool_use_count: u64,
    ) -> Self {
        let (status, stop_reason, text, is_error) = match result {
            Ok(done) if done.stop_reason == StopReason::Cancelled => (
                "cancelled",
                Some(done.stop_reason),
                "the subagent was cancelled".to_string(),
                true,
            ),
            Ok(done) => {
                let text = if done.final_text.is_empty() {
                    "(the subagent returned no text)".to_string()
                } else {
                    done.final_text
                };
                ("completed", Some(done.stop_reason), text, false)
            }
            Err(err) => ("failed", None, format!("subagent failed: {err}"), true),
        };
        Self {
            status,
            stop_reason,
            text,
            is_error,
            total_tokens,
            tool_use_count,
        }
    }
}

/// Runs the `subagent` tool call `call_id` of `session` with `input`: refuses
/// it (bad arguments, too deep), or announces the child, runs it to the end
/// of its turn and reports how it went.
pub(super) async fn run_subagent(
    session: &mut Session,
    env: &TurnEnv,
    call_id: &str,
    input: Value,
) -> Result<ToolOutcome, TurnError> {
    let args = match accept(session, env.cfg.max_depth, &input) {
        Ok(args) => args,
        Err(refusal) => return Ok(refuse(session, env, call_id, &input, refusal).await),
    };
    let child = Child {
        call_id,
        id: uuid::Uuid::now_v7().to_string(),
        visible: env.subagents && session.visible,
    };
    let mut meta = FanoutSubagentMeta {
        child_session_id: Some(child.id.clone()),
        mode: Some(args.mode.as_str().to_string()),
        subagent_type: Some(args.subagent_type.clone()),
        status: Some("running".to_string()),
        model: Some(env.cfg.model_name.clone()),
        ..FanoutSubagentMeta::default()
    };
    announce(session, env, &child, &args, &input, &meta).await?;
    let started = Instant::now();
    let outcome = run_child(session, env, &args, &child).await;
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    meta.status = Some(outcome.status.to_string());
    meta.total_tokens = Some(wire_count(outcome.total_tokens));
    meta.duration_ms = Some(wire_count(duration_ms));
    meta.tool_use_count = Some(wire_count(outcome.tool_use_count));
    settle(session, env, &child, &outcome, duration_ms, &meta).await?;
    Ok(ToolOutcome {
        content: outcome.text,
        is_error: outcome.is_error,
    })
}

/// The child session a subagent call starts.
struct Child<'a> {
    /// The parent's tool call.
    call_id: &'a str,
    /// The child's session id.
    id: String,
    /// Whether the child's updates reach the client (it advertised
    /// `clientCapabilities.subagents` and the parent's do).
    visible: bool,
}

/// A subagent call refused before its child exists.
struct Refusal {
    /// The requested mode and subagent type, when the arguments could be read.
    requested: Option<(SubagentMode, Option<String>)>,
    /// The tool error.
    message: String,
}

impl Refusal {
    /// The `_meta` block the refused call is announced with.
    fn meta(&self) -> FanoutSubagentMeta {
        match &self.requested {
            None => failed_meta(),
            Some((mode, subagent_type)) => FanoutSubagentMeta {
                mode: Some(mode.as_str().to_string()),
                subagent_type: Some(subagent_type.clone()),
                ..failed_meta()
            },
        }
    }
}

/// The call's arguments, or why it is refused.
fn accept(session: &Session, max_depth: u32, input: &Value) -> Result<SubagentArgs, Refusal> {
    let args = SubagentArgs::deserialize(input).map_err(|err| Refusal {
        requested: None,
        message: format!("invalid arguments for subagent: {err}"),
    })?;
    if session.depth + 1 > max_depth {
        return Err(Refusal {
            requested: Some((args.mode, args.subagent_type)),
            message: format!(
                "subagent nesting depth limit reached: this session is at depth {} and --max-depth is {}; \
                 do the task directly instead",
                session.depth, max_depth
            ),
        });
    }
    Ok(args)
}

/// Announces a refused subagent call and immediately fails it.
async fn refuse(
    session: &Session,
    env: &TurnEnv,
    call_id: &str,
    input: &Value,
    refusal: Refusal,
) -> ToolOutcome {
    let call = json!({
        "sessionUpdate": "tool_call",
        "toolCallId": call_id,
        "title": tool_title(SUBAGENT, Some(input)),
        "kind": "other",
        "status": "pending",
        "rawInput": input,
        "_meta": refusal.meta().to_meta(),
    });
    session.update(env, call).await;
    let failed = tool_call_update(call_id, "failed", &[text_content(&refusal.message)]);
    session.update(env, failed).await;
    ToolOutcome {
        content: refusal.message,
        is_error: true,
    }
}

/// The child is starting: the tool call with its `_meta` block, `subagent/start`
/// in the parent's log, ACP's own `subagent_update` when the client takes it,
/// and the tool call's link to the child session.
async fn announce(
    session: &mut Session,
    env: &TurnEnv,
    child: &Child<'_>,
    args: &SubagentArgs,
    input: &Value,
    meta: &FanoutSubagentMeta,
) -> Result<(), TurnError> {
    session
        .update(
            env,
            json!({
                "sessionUpdate": "tool_call",
                "toolCallId": child.call_id,
                "title": format!("Subagent: {}", args.description),
                "kind": "other",
                "status": "pending",
                "rawInput": input,
                "_meta": meta.to_meta(),
            }),
        )
        .await;
    session.record(Event::SubagentStart {
        ts: Timestamp::now(),
        tool_call_id: child.call_id.to_string(),
        child_session_id: child.id.clone(),
        mode: args.mode,
        subagent_type: args.subagent_type.clone(),
        description: args.description.clone(),
    })?;
    if child.visible {
        let mut announce = json!({
            "sessionUpdate": "subagent_update",
            "sessionId": child.id,
            "description": args.description,
            "state": {"state": "running"},
        });
        if let Some(kind) = &args.subagent_type {
            announce["title"] = json!(kind);
        }
        session.update(env, announce).await;
    }
    // ACP lets an agent send session content only to a client that advertised
    // `clientCapabilities.subagents`; the child id is in `_meta.fanout.subagent` anyway.
    let links = session_links(env, child);
    let started = tool_call_update(child.call_id, "in_progress", &links);
    session.update(env, started).await;
    Ok(())
}

/// The child has ended: `subagent/end` in the parent's log, the child going idle
/// when the client sees it, and the settled tool call with the final `_meta` block.
async fn settle(
    session: &mut Session,
    env: &TurnEnv,
    child: &Child<'_>,
    outcome: &SubagentOutcome,
    duration_ms: u64,
    meta: &FanoutSubagentMeta,
) -> Result<(), TurnError> {
    session.record(Event::SubagentEnd {
        ts: Timestamp::now(),
        tool_call_id: child.call_id.to_string(),
        child_session_id: child.id.clone(),
        status: outcome.status.to_string(),
        stop_reason: outcome.stop_reason.map(|s| s.as_str().to_string()),
        total_tokens: outcome.total_tokens,
        duration_ms,
        tool_use_count: outcome.tool_use_count,
    })?;
    if child.visible {
        let state = match outcome.stop_reason {
            Some(reason) => json!({"state": "idle", "stopReason": reason.as_str()}),
            None => json!({"state": "idle", "stopReason": "error",
                "error": {"code": crate::wire::code::INTERNAL_ERROR, "message": outcome.text}}),
        };
        session
            .update(
                env,
                json!({"sessionUpdate": "subagent_update", "sessionId": child.id, "state": state}),
            )
            .await;
    }
    let mut settled = tool_call_update(
        child.call_id,
        if outcome.is_error {
            "failed"
        } else {
            "completed"
        },
        &[session_links(env, child), vec![text_content(&outcome.text)]].concat(),
    );
    settled["rawOutput"] = json!({
        "childSessionId": child.id,
        "status": outcome.status,
        "stopReason": outcome.stop_reason.map(|s| s.as_str()),
    });
    settled["_meta"] = meta.to_meta();
    session.update(env, settled).await;
    Ok(())
}

/// The `{"type":"session"}` content linking the child, for a client that advertised
/// `clientCapabilities.subagents` (the only clients ACP lets an agent send it to).
fn session_links(env: &TurnEnv, child: &Child<'_>) -> Vec<Value> {
    if env.subagents {
        vec![session_link(&child.id)]
    } else {
        Vec::new()
    }
}

/// Creates the child session of `session` (its log included) and
/// runs its one turn on the subagent's prompt.
async fn run_child(
    session: &Session,
    env: &TurnEnv,
    args: &SubagentArgs,
    child: &Child<'_>,
) -> SubagentOutcome {
    let (history, prefix) = fork_seed(session, args.mode);
    let header = Header::child(
        &child.id,
        &session.cwd_text,
        &session.id,
        child.call_id,
        args.mode.backend(),
        (args.mode == SubagentMode::Fork).then_some(prefix.len()),
    );
    let sessions_root = &env.cfg.sessions_root;
    let writer = match args.mode {
        SubagentMode::Spawn => SessionLogWriter::create(sessions_root, &header),
        SubagentMode::Fork => SessionLogWriter::create_fork(sessions_root, &header, &prefix),
    };
    let log = match writer {
        Ok(log) => log,
        Err(err) => {
            return SubagentOutcome::not_started(format!(
                "cannot create the subagent's session log: {err}"
            ));
        }
    };
    let mut child_session = Session {
        id: child.id.clone(),
        cwd: session.cwd.clone(),
        cwd_text: session.cwd_text.clone(),
        depth: session.depth + 1,
        history,
        log,
        events: prefix,
        model_calls: 0,
        checkpoint: (0, 0),
        visible: child.visible,
        usage_total: 0,
        tool_use_count: 0,
    };
    let result = run_turn(&mut child_session, env, args.prompt.clone()).await;
    SubagentOutcome::of_turn(
        result,
        child_session.usage_total,
        child_session.tool_use_count,
    )
}

/// What a child starts from: nothing for a spawn; for a fork, the parent's
/// conversation and log events as they stood just before the model call that
/// asked for it (its checkpoint), so no tool use is left unanswered.
fn fork_seed(session: &Session, mode: SubagentMode) -> (Vec<Message>, Vec<Event>) {
    match mode {
        SubagentMode::Spawn => (Vec::new(), Vec::new()),
        SubagentMode::Fork => {
            let (messages, events) = session.checkpoint;
            (
                session.history[..messages.min(session.history.len())].to_vec(),
                session.events[..events.min(session.events.len())].to_vec(),
            )
        }
    }
}

/// The `_meta` block of a subagent call refused before its child existed.
pub(super) fn failed_meta() -> FanoutSubagentMeta {
    FanoutSubagentMeta {
        status: Some("failed".to_string()),
        ..FanoutSubagentMeta::default()
    }
}

/// A count as the `_meta` block carries it (readers take metrics as `i64`).
fn wire_count(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}
