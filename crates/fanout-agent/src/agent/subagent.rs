//! The `subagent` tool: a child session (spawn: fresh; fork: seeded with the
//! parent's conversation) run to completion inside the parent's tool call,
//! announced on ACP with `_meta.fanout.subagent` and, when the client asked for
//! it, ACP's own `subagent_update`.

use std::time::Instant;

use fanout_sessionlog::{Event, Header, SessionLogWriter, SubagentMode, Timestamp};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    Session, StopReason, ToolOutcome, TurnEnv, TurnError, TurnSummary, run_turn, tool_title,
};
use crate::model::Message;
use crate::tools::SUBAGENT;
use crate::wire::{session_link, text_content, tool_call_update};

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

pub(super) async fn run_subagent(
    session: &mut Session,
    env: &TurnEnv,
    call_id: &str,
    input: Value,
) -> Result<ToolOutcome, TurnError> {
    let cfg = env.cfg.clone();
    let refuse = |meta: Value, message: String| {
        (
            json!({
                "sessionUpdate": "tool_call",
                "toolCallId": call_id,
                "title": tool_title(SUBAGENT, Some(&input)),
                "kind": "other",
                "status": "pending",
                "rawInput": input,
                "_meta": {"fanout": {"subagent": meta}},
            }),
            message,
        )
    };
    let args = match SubagentArgs::deserialize(&input) {
        Ok(args) => args,
        Err(err) => {
            let (call, message) = refuse(
                json!({"status": "failed"}),
                format!("invalid arguments for subagent: {err}"),
            );
            return Ok(fail_tool(session, env, call_id, call, message).await);
        }
    };
    let child_depth = session.depth + 1;
    if child_depth > cfg.max_depth {
        let (call, message) = refuse(
            json!({"mode": args.mode.as_str(), "subagentType": args.subagent_type, "status": "failed"}),
            format!(
                "subagent nesting depth limit reached: this session is at depth {} and --max-depth is {}; \
                 do the task directly instead",
                session.depth, cfg.max_depth
            ),
        );
        return Ok(fail_tool(session, env, call_id, call, message).await);
    }

    let child_id = uuid::Uuid::now_v7().to_string();
    let mut meta = json!({
        "childSessionId": child_id,
        "mode": args.mode.as_str(),
        "subagentType": args.subagent_type,
        "status": "running",
        "model": cfg.model_name,
    });
    session
        .update(
            env,
            json!({
                "sessionUpdate": "tool_call",
                "toolCallId": call_id,
                "title": format!("Subagent: {}", args.description),
                "kind": "other",
                "status": "pending",
                "rawInput": input,
                "_meta": {"fanout": {"subagent": meta}},
            }),
        )
        .await;
    session.record(Event::SubagentStart {
        ts: Timestamp::now(),
        tool_call_id: call_id.to_string(),
        child_session_id: child_id.clone(),
        mode: args.mode,
        subagent_type: args.subagent_type.clone(),
        description: args.description.clone(),
    })?;
    let child_visible = env.subagents && session.visible;
    if child_visible {
        let mut announce = json!({
            "sessionUpdate": "subagent_update",
            "sessionId": child_id,
            "description": args.description,
            "state": {"state": "running"},
        });
        if let Some(kind) = &args.subagent_type {
            announce["title"] = json!(kind);
        }
        session.update(env, announce).await;
    }
    let linked = tool_call_update(call_id, "in_progress", &[session_link(&child_id)]);
    session.update(env, linked).await;

    let started = Instant::now();
    let outcome = run_child(session, env, &args, call_id, &child_id, child_visible).await;
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);

    session.record(Event::SubagentEnd {
        ts: Timestamp::now(),
        tool_call_id: call_id.to_string(),
        child_session_id: child_id.clone(),
        status: outcome.status.to_string(),
        stop_reason: outcome.stop_reason.map(|s| s.as_str().to_string()),
        total_tokens: outcome.total_tokens,
        duration_ms,
        tool_use_count: outcome.tool_use_count,
    })?;
    if child_visible {
        let state = match outcome.stop_reason {
            Some(reason) => json!({"state": "idle", "stopReason": reason.as_str()}),
            None => json!({"state": "idle", "stopReason": "error",
                "error": {"code": crate::wire::code::INTERNAL_ERROR, "message": outcome.text}}),
        };
        session
            .update(
                env,
                json!({"sessionUpdate": "subagent_update", "sessionId": child_id, "state": state}),
            )
            .await;
    }
    meta["status"] = json!(outcome.status);
    meta["totalTokens"] = json!(outcome.total_tokens);
    meta["durationMs"] = json!(duration_ms);
    meta["toolUseCount"] = json!(outcome.tool_use_count);
    let mut settled = tool_call_update(
        call_id,
        if outcome.is_error {
            "failed"
        } else {
            "completed"
        },
        &[session_link(&child_id), text_content(&outcome.text)],
    );
    settled["rawOutput"] = json!({
        "childSessionId": child_id,
        "status": outcome.status,
        "stopReason": outcome.stop_reason.map(|s| s.as_str()),
    });
    settled["_meta"] = json!({"fanout": {"subagent": meta}});
    session.update(env, settled).await;
    Ok(ToolOutcome {
        content: outcome.text,
        is_error: outcome.is_error,
    })
}

/// Creates the child session `child_id` of `session` (its log included) and
/// runs its one turn on the subagent's prompt.
async fn run_child(
    session: &Session,
    env: &TurnEnv,
    args: &SubagentArgs,
    call_id: &str,
    child_id: &str,
    visible: bool,
) -> SubagentOutcome {
    let (history, prefix) = fork_seed(session, args.mode);
    let header = Header::child(
        child_id,
        &session.cwd_text,
        &session.id,
        call_id,
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
    let mut child = Session {
        id: child_id.to_string(),
        cwd: session.cwd.clone(),
        cwd_text: session.cwd_text.clone(),
        depth: session.depth + 1,
        history,
        log,
        events: prefix,
        model_calls: 0,
        checkpoint: (0, 0),
        visible,
        usage_total: 0,
        tool_use_count: 0,
    };
    let result = run_turn(&mut child, env, args.prompt.clone()).await;
    SubagentOutcome::of_turn(result, child.usage_total, child.tool_use_count)
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

/// Announces a tool call and immediately fails it with `message`.
async fn fail_tool(
    session: &Session,
    env: &TurnEnv,
    call_id: &str,
    call: Value,
    message: String,
) -> ToolOutcome {
    session.update(env, call).await;
    let failed = tool_call_update(call_id, "failed", &[text_content(&message)]);
    session.update(env, failed).await;
    ToolOutcome {
        content: message,
        is_error: true,
    }
}
