//! Replays a Claude session's merged entries into a [`Capture`]: one session row per
//! `sessionId`, a turn per non-sidechain prompt (completed by the next prompt, or at the
//! end of the folder when its last stop reason says the model finished), a tool-call
//! message per tool use, a subagent row per `Agent`/`Task` call, and a usage-ledger row
//! per model response, attributed to the invocation whose log it is in. A child log's
//! tool uses become messages of the same session whose parent is the spawning call.

use std::collections::{HashMap, HashSet};

use fanout_acp::{Dialect, FrameOrigin, SubagentTask, ToolFrame};
use fanout_store::{Timestamp, UsageSource, is_terminal_tool_status};
use serde_json::{Map, Value};

use super::parse::{Entry, EntryKind, Response, ToolResult, ToolUse};
use crate::capture::{Capture, ResponseUsage};

/// A tool call as known so far (the accumulator the ACP tracker keeps for the wire).
struct KnownTool {
    title: Option<String>,
    kind: Option<&'static str>,
    parent: Option<String>,
    subagent: Option<SubagentTask>,
    last_status: Option<String>,
}

impl KnownTool {
    /// Once terminal, the row's status stays terminal (as the ACP tracker keeps it).
    fn advance_status(&mut self, status: &str) {
        if !self
            .last_status
            .as_deref()
            .is_some_and(is_terminal_tool_status)
        {
            self.last_status = Some(status.to_owned());
        }
    }
}

#[derive(Default)]
struct SessionTurns {
    open_turn: Option<String>,
    last_activity: Option<Timestamp>,
    last_stop_reason: Option<String>,
}

/// Replays merged entries into a [`Capture`].
#[derive(Default)]
pub(super) struct Replay {
    /// Sessions opened, and whether with a cwd (a later cwd re-opens the session).
    opened: HashMap<String, bool>,
    turns: HashMap<String, SessionTurns>,
    tools: HashMap<(String, String), KnownTool>,
    /// Sessions in first-seen order, for a deterministic finish.
    order: Vec<String>,
    /// (session, call) of the invocations whose child log has been linked.
    linked: HashSet<(String, String)>,
}

impl Replay {
    /// Applies one entry of a log whose spawning call is `spawning_call` (`None`: the
    /// session's own log, or a child log that links to no call). An entry only read for
    /// its context (`!entry.writes`) moves the replay's and capture's state, and its
    /// writes are dropped.
    ///
    /// A child log's agent id becomes its invocation's `agent_id` and `child_session_id`
    /// (where the call's result did not say them), once the call is known.
    pub(super) fn apply(
        &mut self,
        capture: &mut Capture,
        entry: Entry,
        spawning_call: Option<&str>,
        agent_id: Option<&str>,
    ) {
        let mark = capture.queued_writes();
        let writes = entry.writes;
        if let (Some(call), Some(agent)) = (spawning_call, agent_id) {
            self.link_child(capture, &entry.session, call, agent, entry.at);
        }
        self.apply_entry(capture, entry, spawning_call);
        if !writes {
            capture.discard_queued_from(mark);
        }
    }

    fn link_child(
        &mut self,
        capture: &mut Capture,
        session: &str,
        call: &str,
        agent: &str,
        at: Timestamp,
    ) {
        let key = (session.to_owned(), call.to_owned());
        if self.linked.contains(&key) {
            return;
        }
        let Some(known) = self.tools.get_mut(&key) else {
            return;
        };
        let Some(task) = known.subagent.as_mut() else {
            return;
        };
        self.linked.insert(key);
        if task.agent_id.is_some() && task.child_session_id.is_some() {
            return;
        }
        task.agent_id.get_or_insert_with(|| agent.to_owned());
        task.child_session_id
            .get_or_insert_with(|| agent.to_owned());
        queue_payload_update(capture, session, call, known, at);
    }

    fn apply_entry(&mut self, capture: &mut Capture, entry: Entry, spawning_call: Option<&str>) {
        let session = entry.session.clone();
        let had_cwd = self.opened.get(&session).copied();
        if had_cwd.is_none() {
            self.order.push(session.clone());
        }
        if had_cwd.is_none() || (had_cwd == Some(false) && entry.cwd.is_some()) {
            self.opened.insert(session.clone(), entry.cwd.is_some());
            capture.queue_open_session(&session, entry.cwd.clone(), entry.at);
        }
        match entry.kind {
            EntryKind::Prompt { key, .. } if !entry.sidechain => {
                self.close_turn(capture, &session);
                capture.queue_start_turn(&session, &key, entry.at);
                self.turns.entry(session.clone()).or_default().open_turn = Some(key);
            }
            EntryKind::Prompt { .. } => {}
            EntryKind::Assistant {
                uses,
                stop_reason,
                response,
            } => {
                if let Some(response) = response {
                    self.response(capture, &session, response, spawning_call, entry.at);
                }
                for tool in uses {
                    self.tool_use(capture, &session, tool, spawning_call, entry.at);
                }
                if !entry.sidechain && stop_reason.is_some() {
                    self.turns
                        .entry(session.clone())
                        .or_default()
                        .last_stop_reason = stop_reason;
                }
            }
            EntryKind::ToolResults {
                results,
                agent_result,
            } => {
                let mut agent_result = agent_result;
                for result in results {
                    self.tool_result(
                        capture,
                        &session,
                        result,
                        &mut agent_result,
                        spawning_call,
                        entry.at,
                    );
                }
            }
        }
        if !entry.sidechain {
            self.turns.entry(session).or_default().last_activity = Some(entry.at);
        }
    }

    /// Completes the session's open turn at its last activity.
    fn close_turn(&mut self, capture: &mut Capture, session: &str) {
        let Some(turns) = self.turns.get_mut(session) else {
            return;
        };
        let Some(key) = turns.open_turn.take() else {
            return;
        };
        let (Some(at), stop_reason) = (turns.last_activity, turns.last_stop_reason.take()) else {
            return;
        };
        capture.queue_end_turn(session, &key, stop_reason, at);
    }

    /// At the end of the folder, a last turn is completed only when its last stop reason
    /// says the model finished: a log still being written keeps its turn open, and
    /// completion is write-once.
    pub(super) fn finish(&mut self, capture: &mut Capture) {
        for session in std::mem::take(&mut self.order) {
            let finished = self.turns.get(&session).is_some_and(|t| {
                t.last_stop_reason
                    .as_deref()
                    .is_some_and(|reason| reason != "tool_use")
            });
            if finished {
                self.close_turn(capture, &session);
            }
        }
    }

    /// The accumulator of a tool call, and whether this is its first frame. A call first
    /// seen in a subagent log is nested under the spawning call.
    fn known_tool(
        &mut self,
        session: &str,
        tool_call_id: &str,
        spawning_call: Option<&str>,
    ) -> (bool, &mut KnownTool) {
        let key = (session.to_owned(), tool_call_id.to_owned());
        let is_new = !self.tools.contains_key(&key);
        let known = self.tools.entry(key).or_insert_with(|| KnownTool {
            title: None,
            kind: None,
            parent: spawning_call.map(str::to_owned),
            subagent: None,
            last_status: None,
        });
        (is_new, known)
    }

    /// One model response: its ledger row (when any record of it is new), attributed to
    /// the spawning call of its log; a child's first model names the invocation's model
    /// when the result did not.
    fn response(
        &mut self,
        capture: &mut Capture,
        session: &str,
        response: Response,
        spawning_call: Option<&str>,
        at: Timestamp,
    ) {
        if let (Some(call), Some(model)) = (spawning_call, response.model.as_deref())
            && let Some(known) = self.tools.get_mut(&(session.to_owned(), call.to_owned()))
            && let Some(task) = known.subagent.as_mut()
            && task.model.is_none()
        {
            task.model = Some(model.to_owned());
            queue_payload_update(capture, session, call, known, at);
        }
        if response.writes {
            capture.queue_usage(
                session,
                ResponseUsage {
                    response_id: response.id,
                    model: response.model,
                    tokens: response.tokens,
                    subagent_tool_call_id: spawning_call.map(str::to_owned),
                    source: UsageSource::ClaudeLog,
                },
                at,
            );
        }
    }

    fn tool_use(
        &mut self,
        capture: &mut Capture,
        session: &str,
        tool: ToolUse,
        spawning_call: Option<&str>,
        at: Timestamp,
    ) {
        let (is_new, known) = self.known_tool(session, &tool.id, spawning_call);
        known.title = Some(tool.title);
        known.kind = Some(tool.kind);
        if known.subagent.is_none() {
            known.subagent = tool.subagent;
        }
        let status = "pending";
        known.advance_status(status);
        let frame = tool_frame(
            session,
            &tool.id,
            known,
            Some(status),
            is_new,
            FrameOrigin::ToolCall,
        );
        capture.queue_tool_frame(&frame, at);
    }

    fn tool_result(
        &mut self,
        capture: &mut Capture,
        session: &str,
        result: ToolResult,
        agent_result: &mut Option<Box<Map<String, Value>>>,
        spawning_call: Option<&str>,
        at: Timestamp,
    ) {
        let (is_new, known) = self.known_tool(session, &result.tool_use_id, spawning_call);
        let status = if result.is_error {
            "failed"
        } else {
            "completed"
        };
        if let Some(task) = known.subagent.as_mut() {
            // The entry's one `toolUseResult` belongs to its first subagent result.
            if let Some(agent) = agent_result.take() {
                task.merge_claude_result(&agent);
            }
            if task.result_text.as_deref().is_none_or(str::is_empty) {
                task.result_text = result.text;
            }
        }
        known.advance_status(status);
        let frame = tool_frame(
            session,
            &result.tool_use_id,
            known,
            Some(status),
            is_new,
            FrameOrigin::ToolCallUpdate,
        );
        capture.queue_tool_frame(&frame, at);
    }
}

/// A status-less update of an invocation (its payload merges, its tool status stays).
fn queue_payload_update(
    capture: &mut Capture,
    session: &str,
    call: &str,
    known: &KnownTool,
    at: Timestamp,
) {
    let frame = tool_frame(
        session,
        call,
        known,
        None,
        false,
        FrameOrigin::ToolCallUpdate,
    );
    capture.queue_tool_frame(&frame, at);
}

fn tool_frame(
    session: &str,
    tool_call_id: &str,
    known: &KnownTool,
    tool_status: Option<&str>,
    is_new: bool,
    origin: FrameOrigin,
) -> ToolFrame {
    ToolFrame {
        acp_session_id: session.to_owned(),
        tool_call_id: tool_call_id.to_owned(),
        wire_tool_call_id: tool_call_id.to_owned(),
        wire_session_id: session.to_owned(),
        parent_tool_call_id: known.parent.clone(),
        title: known.title.clone(),
        kind: known.kind.map(str::to_owned),
        tool_status: tool_status.map(str::to_owned),
        last_tool_status: known.last_status.clone(),
        is_new,
        subagent: known.subagent.clone(),
        dialect: known.subagent.as_ref().and(Dialect::named("claude")),
        origin,
    }
}
