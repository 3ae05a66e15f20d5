//! The stateful tracker: JSON-RPC lines in, semantic events out.
//!
//! This module is the facade and the JSON-RPC correlation (requests matched to their
//! responses per direction; `initialize`, session opening and prompt turns). The rest is
//! split by what it keeps: `rows` (the per-session row accumulator), `children` (which
//! row owns a child session's traffic), `tool` (the tool-call path) and `signals` (row
//! status updates carried by other session updates). It names no agent: what one agent's
//! frames mean is its dialect's (`crate::dialect`), and what a dialect correlates across
//! frames is its state, whose hooks this path calls ([`DialectState`]).
//!
//! [`DialectState`]: crate::dialect::DialectState

pub(crate) mod children;
pub(crate) mod rows;
mod signals;
pub(crate) mod tool;

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use self::children::ChildSessions;
use self::rows::RowSession;
use crate::dialect::Rules;
use crate::dialect::state::{Conn, Flow, States};
use crate::event::{IgnoredReason, SessionOpenMethod, TrackerEvent, TrackerStats};
use crate::json::text_at;
use crate::jsonrpc::{self, Direction, Message, PendingRequests, RequestId, ResponseOutcome};

/// Requests awaiting a response, per direction.
const MAX_PENDING_REQUESTS: usize = 4096;

/// Feeds on `(direction, line)` pairs and reports what they mean.
///
/// Knows ACP only: no database, no clock, no task. One tracker per agent connection
/// (execution); it is cheap to create. Memory is bounded (see the `MAX_*` constants of
/// its modules).
#[derive(Debug)]
pub struct Tracker {
    /// Requests sent client-to-agent, answered agent-to-client.
    pending_from_client: PendingRequests<PendingRequest>,
    /// Requests sent agent-to-client, answered client-to-agent.
    pending_from_agent: PendingRequests<PendingRequest>,
    /// Which dialects read this connection (from the agent's `agentInfo.name`).
    rules: Rules,
    /// Tool-call rows per session they belong to.
    rows: HashMap<String, RowSession>,
    /// Child sessions and the rows that own their traffic.
    children: ChildSessions,
    /// Sessions opened by the client: never accepted as someone's child.
    opened: HashSet<String>,
    /// Sessions whose `session/load` is in flight (history replay).
    loading: HashSet<String>,
    /// Every dialect's state on this connection (ACP subagent sessions' included).
    states: States,
    seq: u64,
    stats: TrackerStats,
}

impl Default for Tracker {
    fn default() -> Self {
        Self::new()
    }
}

#[derive(Debug)]
enum PendingRequest {
    Initialize,
    SessionOpen {
        method: SessionOpenMethod,
        cwd: Option<String>,
        session_id: Option<String>,
    },
    Prompt {
        session: String,
        request_id: String,
    },
    Other,
}

impl Tracker {
    /// A tracker for one agent connection.
    pub fn new() -> Self {
        Self {
            pending_from_client: PendingRequests::new(MAX_PENDING_REQUESTS),
            pending_from_agent: PendingRequests::new(MAX_PENDING_REQUESTS),
            rules: Rules::default(),
            rows: HashMap::new(),
            children: ChildSessions::default(),
            opened: HashSet::new(),
            loading: HashSet::new(),
            states: States::new(),
            seq: 0,
            stats: TrackerStats::default(),
        }
    }

    /// Running totals since creation.
    pub fn stats(&self) -> TrackerStats {
        self.stats
    }

    /// The dialect of the agent on this connection, once its `initialize` response named
    /// an agent fanout knows (`agentInfo.name`); `None` means every shape rule applies.
    pub fn agent_dialect(&self) -> Option<crate::Dialect> {
        self.rules.agent()
    }

    /// Observes one line (without its newline). Never panics, whatever the line.
    pub fn observe(&mut self, direction: Direction, line: &str) -> Vec<TrackerEvent> {
        self.observe_classified(direction, jsonrpc::classify(line))
    }

    /// [`Tracker::observe`] for raw bytes (invalid UTF-8 is not understood).
    pub fn observe_bytes(&mut self, direction: Direction, line: &[u8]) -> Vec<TrackerEvent> {
        self.observe_classified(direction, jsonrpc::classify_bytes(line))
    }

    /// Observes a line the caller already classified.
    pub fn observe_classified(
        &mut self,
        direction: Direction,
        classified: Result<Message, jsonrpc::NotUnderstoodReason>,
    ) -> Vec<TrackerEvent> {
        self.stats.lines += 1;
        let mut out = Vec::new();
        match classified {
            Err(reason) => {
                self.stats.not_understood += 1;
                out.push(TrackerEvent::NotUnderstood { direction, reason });
            }
            Ok(Message::Request { id, method, params }) => {
                self.stats.requests += 1;
                self.on_request(direction, id, &method, &params, &mut out);
            }
            Ok(Message::Notification { method, params }) => {
                self.stats.notifications += 1;
                self.on_notification(direction, &method, &params, &mut out);
            }
            Ok(Message::Response { id, outcome }) => {
                self.stats.responses += 1;
                self.on_response(direction, id, outcome, &mut out);
            }
        }
        for event in &out {
            match event {
                TrackerEvent::Ignored { reason, .. } => {
                    self.stats.ignored += 1;
                    if reason.is_anomaly() {
                        self.stats.anomalies += 1;
                    }
                }
                TrackerEvent::Tool(_) => self.stats.tool_frames += 1,
                _ => {}
            }
        }
        out
    }

    fn on_request(
        &mut self,
        direction: Direction,
        id: RequestId,
        method: &str,
        params: &Value,
        out: &mut Vec<TrackerEvent>,
    ) {
        let mut pending = PendingRequest::Other;
        match direction {
            Direction::ClientToAgent => {
                if method == "initialize" {
                    pending = PendingRequest::Initialize;
                } else if let Some(open) = SessionOpenMethod::from_method(method) {
                    let session_id = text_at(params, "sessionId").map(str::to_owned);
                    if open == SessionOpenMethod::Load
                        && let Some(session) = &session_id
                    {
                        self.loading.insert(session.clone());
                    }
                    pending = PendingRequest::SessionOpen {
                        method: open,
                        cwd: text_at(params, "cwd").map(str::to_owned),
                        session_id,
                    };
                } else if method == "session/prompt" {
                    match text_at(params, "sessionId") {
                        Some(session) => {
                            let request_id = id.to_string();
                            out.push(TrackerEvent::PromptStarted {
                                acp_session_id: session.to_owned(),
                                request_id: request_id.clone(),
                            });
                            pending = PendingRequest::Prompt {
                                session: session.to_owned(),
                                request_id,
                            };
                        }
                        None => out.push(TrackerEvent::Ignored {
                            direction,
                            reason: IgnoredReason::MissingSessionId,
                        }),
                    }
                }
                self.pending_from_client.insert(id, pending);
            }
            Direction::AgentToClient => {
                self.on_agent_message(method, params, out);
                self.pending_from_agent.insert(id, pending);
            }
        }
    }

    fn on_notification(
        &mut self,
        direction: Direction,
        method: &str,
        params: &Value,
        out: &mut Vec<TrackerEvent>,
    ) {
        match (direction, method) {
            (Direction::AgentToClient, "session/update") => self.on_session_update(params, out),
            (Direction::AgentToClient, other) => self.on_agent_message(other, params, out),
            (Direction::ClientToAgent, "session/update") => out.push(TrackerEvent::Ignored {
                direction,
                reason: IgnoredReason::UnexpectedDirection,
            }),
            _ => {}
        }
    }

    fn on_response(
        &mut self,
        direction: Direction,
        id: Option<RequestId>,
        outcome: ResponseOutcome,
        out: &mut Vec<TrackerEvent>,
    ) {
        // A response travels opposite to its request.
        let pending = id.and_then(|id| match direction {
            Direction::AgentToClient => self.pending_from_client.take(&id),
            Direction::ClientToAgent => self.pending_from_agent.take(&id),
        });
        let Some(pending) = pending else {
            self.stats.unmatched_responses += 1;
            out.push(TrackerEvent::Ignored {
                direction,
                reason: IgnoredReason::UnmatchedResponse,
            });
            return;
        };
        match pending {
            PendingRequest::Initialize => {
                if let ResponseOutcome::Result(result) = outcome {
                    let name = result
                        .get("agentInfo")
                        .and_then(|info| text_at(info, "name"));
                    self.rules = Rules::for_agent(name);
                }
            }
            PendingRequest::SessionOpen {
                method,
                cwd,
                session_id,
            } => {
                if method == SessionOpenMethod::Load
                    && let Some(session) = &session_id
                {
                    self.loading.remove(session);
                }
                let ResponseOutcome::Result(result) = outcome else {
                    return;
                };
                let session = text_at(&result, "sessionId")
                    .map(str::to_owned)
                    .or(session_id);
                let Some(session) = session else {
                    out.push(TrackerEvent::Ignored {
                        direction,
                        reason: IgnoredReason::MissingSessionId,
                    });
                    return;
                };
                self.opened.insert(session.clone());
                out.push(TrackerEvent::SessionOpened {
                    acp_session_id: session,
                    cwd,
                    method,
                });
            }
            PendingRequest::Prompt {
                session,
                request_id,
            } => {
                for state in self.states.active(self.rules) {
                    state.prompt_ended(&session);
                }
                let (stop_reason, error) = match outcome {
                    ResponseOutcome::Result(result) => {
                        (text_at(&result, "stopReason").map(str::to_owned), None)
                    }
                    ResponseOutcome::Error(error) => (None, Some(error.summary())),
                };
                out.push(TrackerEvent::PromptEnded {
                    acp_session_id: session,
                    request_id,
                    stop_reason,
                    error,
                });
            }
            PendingRequest::Other => {}
        }
    }

    /// The connection as a dialect state's hook sees it.
    fn conn<'a>(&'a mut self, out: &'a mut Vec<TrackerEvent>) -> (Conn<'a>, &'a mut States) {
        let conn = Conn {
            rows: &mut self.rows,
            children: &mut self.children,
            opened: &self.opened,
            rules: self.rules,
            seq: &mut self.seq,
            out,
        };
        (conn, &mut self.states)
    }

    /// An agent-to-client request or notification other than `session/update`: a side
    /// request some dialect's state may read.
    fn on_agent_message(&mut self, method: &str, params: &Value, out: &mut Vec<TrackerEvent>) {
        let rules = self.rules;
        let (mut conn, states) = self.conn(out);
        for state in states.active(rules) {
            state.agent_message(method, params, &mut conn);
        }
    }

    fn on_session_update(&mut self, params: &Value, out: &mut Vec<TrackerEvent>) {
        let wire_session = text_at(params, "sessionId").unwrap_or_default();
        let Some((update, kind)) = params
            .get("update")
            .filter(|update| update.is_object())
            .and_then(|update| Some((update, text_at(update, "sessionUpdate")?)))
        else {
            out.push(TrackerEvent::Ignored {
                direction: Direction::AgentToClient,
                reason: IgnoredReason::MalformedUpdate,
            });
            return;
        };
        if !wire_session.is_empty() {
            let route = self.children.route(wire_session);
            if self.loading.contains(wire_session) || self.loading.contains(&route.row_session) {
                out.push(TrackerEvent::Ignored {
                    direction: Direction::AgentToClient,
                    reason: IgnoredReason::LoadReplay,
                });
                return;
            }
        }
        match kind {
            // Without a session too: the writer counts the missing identity.
            "tool_call" => return self.on_tool(wire_session, update, true, out),
            "tool_call_update" => return self.on_tool(wire_session, update, false, out),
            _ => {}
        }
        let rules = self.rules;
        let (mut conn, states) = self.conn(out);
        for state in states.active(rules) {
            if state.session_update(kind, wire_session, update, &mut conn) == Flow::Stop {
                return;
            }
        }
        if wire_session.is_empty() {
            out.push(TrackerEvent::Ignored {
                direction: Direction::AgentToClient,
                reason: IgnoredReason::MissingSessionId,
            });
            return;
        }
        self.on_row_signals(kind, wire_session, update, out);
        self.session_update_event(kind, wire_session, update, out);
    }

    /// Any other update: which session and row it belongs to, and for a child's message
    /// chunk on the parent session the caller and usage it names (a dialect's `caller`).
    fn session_update_event(
        &self,
        kind: &str,
        wire_session: &str,
        update: &Value,
        out: &mut Vec<TrackerEvent>,
    ) {
        let route = self.children.route(wire_session);
        let caller = self.rules.caller(update).unwrap_or_default();
        let parent = route.nesting_parent.or_else(|| {
            let wire_id = caller.parent?;
            Some(self.rows.get(&route.row_session).map_or_else(
                || wire_id.to_owned(),
                |row| row.emitted_for(wire_session, wire_id),
            ))
        });
        out.push(TrackerEvent::SessionUpdate {
            acp_session_id: route.row_session,
            wire_session_id: wire_session.to_owned(),
            update_kind: kind.to_owned(),
            parent_tool_call_id: parent,
            usage: caller.usage.cloned(),
        });
    }
}
