//! The state of ACP's own subagent sessions (DESIGN 3.6): the child sessions and the row
//! that owns each one's traffic, their work cycles (one row per cycle: `<child>`,
//! `<child>#2`, …) and the messages between sessions whose last hand-back from a child
//! to its parent is the cycle's result text.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::rows::{RowSession, Subagent, ToolEntry, WireKey};
use super::{Route, Tracker};
use crate::dialect::native::{
    MessageContent, NativeMeta, Patch, SessionMessage, State, SubagentUpdate,
};
use crate::dialect::{Dialect, NativeFields};
use crate::event::{FrameOrigin, IgnoredReason, ToolFrame, TrackerEvent};
use crate::jsonrpc::Direction;
use crate::subagent::SubagentTask;

/// Child sessions remembered (never evicted before this many).
const MAX_CHILD_SESSIONS: usize = 65_536;
/// Messages between sessions remembered (oldest forgotten first).
const MAX_SESSION_MESSAGES: usize = 4096;

/// A child session and the row its traffic belongs under.
#[derive(Debug, Clone)]
pub(super) struct ChildLink {
    /// The top-level session the child's rows belong to.
    pub row_session: String,
    /// The row owning the child's traffic: its current work cycle, or the tool call
    /// that owns it.
    pub row_id: String,
    /// The session that announced the child (its parent on the wire).
    pub parent_session: String,
    /// The work cycles, when the child's rows are its own (announced by
    /// `subagent_update`); `None` when a recognised tool call owns the child (fanout's
    /// agent, a call whose session link came first).
    pub cycles: Option<Cycles>,
}

/// The work cycles of one child.
#[derive(Debug, Clone)]
pub(super) struct Cycles {
    /// How many cycles have started (the current one's number).
    pub count: u32,
    /// Whether the current cycle is still running (not `idle` yet).
    pub open: bool,
    /// The display metadata patched so far, for the next cycle's row.
    pub meta: NativeMeta,
}

/// A message between sessions, as upserted so far.
#[derive(Debug, Default)]
struct MessageState {
    seq: u64,
    sender: Option<String>,
    recipient: Option<String>,
    text: String,
    /// Its sender was counted as never announced.
    reported: bool,
}

/// Child sessions and messages between sessions.
#[derive(Debug, Default)]
pub(super) struct NativeState {
    children: HashMap<String, ChildLink>,
    /// By (row session, message id): the copies of a message sent under each of its two
    /// sessions are one message.
    messages: HashMap<(String, String), MessageState>,
}

impl NativeState {
    pub(super) fn link(&self, child: &str) -> Option<ChildLink> {
        self.children.get(child).cloned()
    }

    /// Where a wire session's traffic goes: under its child row, or its own session.
    pub(super) fn route(&self, wire_session: &str) -> Route {
        match self.children.get(wire_session) {
            Some(link) => Route {
                row_session: link.row_session.clone(),
                nesting_parent: Some(link.row_id.clone()),
            },
            None => Route {
                row_session: wire_session.to_owned(),
                nesting_parent: None,
            },
        }
    }

    pub(super) fn is_child(&self, session: &str) -> bool {
        self.children.contains_key(session)
    }

    fn register(&mut self, child: &str, link: ChildLink, opened: &HashSet<String>) {
        if child == link.row_session
            || opened.contains(child)
            || self.children.contains_key(child)
            || self.children.len() >= MAX_CHILD_SESSIONS
        {
            return;
        }
        self.children.insert(child.to_owned(), link);
    }
}

impl Tracker {
    /// A recognised tool call links `child`: the call's row owns its traffic.
    pub(super) fn register_owned_child(
        &mut self,
        child: String,
        wire_session: &str,
        row_session: &str,
        row_id: String,
    ) {
        let link = ChildLink {
            row_session: row_session.to_owned(),
            row_id,
            parent_session: wire_session.to_owned(),
            cycles: None,
        };
        self.native.register(&child, link, &self.opened);
    }

    /// ACP's `subagent_update` (or a draft name): `sessionId` is the child, the outer
    /// session id the session it arrived on (its parent).
    pub(super) fn on_subagent_update(
        &mut self,
        kind: &str,
        wire_session: &str,
        update: &Value,
        out: &mut Vec<TrackerEvent>,
    ) {
        let Some(read) = SubagentUpdate::read(kind, update) else {
            return;
        };
        let route = self.route(wire_session);
        let child = read.child.filter(|child| {
            *child != wire_session
                && *child != route.row_session
                && (self.native.is_child(child) || !self.opened.contains(*child))
        });
        let Some(child) = child else {
            return ignore(out, IgnoredReason::InvalidSubagentUpdate);
        };
        let fields = self.rules.native_fields();
        match self.native.children.get(child).cloned() {
            Some(link) if link.cycles.is_some() => {
                self.next_in_cycle(child, link, &route, &read, fields, out);
            }
            Some(link) => self.patch_owner(&link.row_session, &link.row_id, &read, fields, out),
            None => {
                let owner = self
                    .rows
                    .get(&route.row_session)
                    .and_then(|row| row.subagent_for_child(child))
                    .map(str::to_owned);
                match owner {
                    // A recognised call named this child first (OpenCode's result,
                    // Codex's thread): that row is the child's, as if it had linked it.
                    Some(row_id) => {
                        self.register_owned_child(
                            child.to_owned(),
                            wire_session,
                            &route.row_session,
                            row_id.clone(),
                        );
                        self.patch_owner(&route.row_session, &row_id, &read, fields, out);
                    }
                    // A lone state for a child nothing announced or linked.
                    None if !read.describes && !self.is_linked(&route.row_session, child) => {
                        ignore(out, IgnoredReason::SubagentStateForUnknownChild);
                    }
                    None => self.announce(child, wire_session, &route, &read, fields, out),
                }
            }
        }
    }

    /// Whether a tool call of the session linked `child` before it was announced.
    fn is_linked(&self, row_session: &str, child: &str) -> bool {
        self.rows
            .get(row_session)
            .is_some_and(|row| row.pending_links.contains_key(child))
    }

    /// The first update of an unknown child announces it: cycle 1, `tool_call_id` = the
    /// child session id.
    fn announce(
        &mut self,
        child: &str,
        wire_session: &str,
        route: &Route,
        read: &SubagentUpdate<'_>,
        fields: NativeFields,
        out: &mut Vec<TrackerEvent>,
    ) {
        let mut meta = NativeMeta::default();
        meta.patch(read);
        let row = self.rows.entry(route.row_session.clone()).or_default();
        // A tool call that linked the child before it was announced.
        let linked_status = row
            .pending_links
            .remove(child)
            .and_then(|linking| row.entries.get(&linking))
            .and_then(|linking| linking.last_status.clone());
        let id = new_cycle_row(
            row,
            &mut self.seq,
            WireKey::new(wire_session, child),
            route,
            &meta,
            fields,
            child,
        );
        let mut open = true;
        let mut status = linked_status;
        if let Some(entry) = row.entries.get_mut(&id) {
            entry.record_status(status.as_deref());
            if let Patch::Set(state) = read.state {
                open = !state.is_idle();
                status = apply_state(entry, state).or(status);
            }
            out.push(TrackerEvent::Tool(Box::new(entry.frame(
                &route.row_session,
                status.as_deref(),
                true,
                FrameOrigin::SubagentUpdate,
            ))));
        }
        row.reclassify(&id, &mut self.seq);
        let link = ChildLink {
            row_session: route.row_session.clone(),
            row_id: id,
            parent_session: wire_session.to_owned(),
            cycles: Some(Cycles {
                count: 1,
                open,
                meta,
            }),
        };
        self.native.register(child, link, &self.opened);
    }

    /// A later update of a child with its own rows: patches the current cycle, ends it on
    /// `idle`, or starts the next on a `running` that follows `idle`.
    fn next_in_cycle(
        &mut self,
        child: &str,
        mut link: ChildLink,
        route: &Route,
        read: &SubagentUpdate<'_>,
        fields: NativeFields,
        out: &mut Vec<TrackerEvent>,
    ) {
        let Some(mut cycles) = link.cycles.take() else {
            return;
        };
        cycles.meta.patch(read);
        let patches_fields = read.title != Patch::Unchanged || read.description != Patch::Unchanged;
        let state = match read.state {
            Patch::Set(state) => Some(state),
            Patch::Unchanged | Patch::Cleared => None,
        };
        let row = self.rows.entry(link.row_session.clone()).or_default();
        let starts = state.is_some_and(|state| state.name == "running") && !cycles.open;
        if starts {
            cycles.count += 1;
            cycles.open = true;
            let key = WireKey::new(&link.parent_session, &format!("{child}#{}", cycles.count));
            link.row_id =
                new_cycle_row(row, &mut self.seq, key, route, &cycles.meta, fields, child);
        }
        let idle_twice = state.is_some_and(State::is_idle) && !cycles.open;
        if idle_twice {
            ignore(out, IgnoredReason::IdleOutsideCycle);
        }
        let state = state.filter(|_| !idle_twice);
        if state.is_some_and(State::is_idle) {
            cycles.open = false;
        }
        if let Some(entry) = row.entries.get_mut(&link.row_id) {
            if patches_fields {
                entry.title.clone_from(&cycles.meta.title);
                if let Some(subagent) = entry.subagent.as_mut() {
                    cycles.meta.apply_to(&mut subagent.task, fields, child);
                }
            }
            let status = state.and_then(|state| apply_state(entry, state));
            if starts || patches_fields || state.is_some() {
                out.push(TrackerEvent::Tool(Box::new(entry.frame(
                    &link.row_session,
                    status.as_deref(),
                    starts,
                    FrameOrigin::SubagentUpdate,
                ))));
            }
            row.reclassify(&link.row_id, &mut self.seq);
        }
        // A forgotten (evicted) row still moves the cycle bookkeeping on.
        link.cycles = Some(cycles);
        self.native.children.insert(child.to_owned(), link);
    }

    /// An update of a child a recognised tool call owns: the state is its agent status
    /// and the title and description patch the call's (the protocol's meaning); the
    /// call's own status decides settling, and it is one row, not cycles.
    fn patch_owner(
        &mut self,
        row_session: &str,
        row_id: &str,
        read: &SubagentUpdate<'_>,
        fields: NativeFields,
        out: &mut Vec<TrackerEvent>,
    ) {
        let seq = &mut self.seq;
        let Some(row) = self.rows.get_mut(row_session) else {
            return;
        };
        let Some(entry) = row.entries.get_mut(row_id) else {
            return;
        };
        if let Patch::Set(title) = read.title {
            entry.title = Some(title.to_owned());
        }
        if let Some(subagent) = entry.subagent.as_mut() {
            if fields != NativeFields::Claude {
                read.description.apply_text(&mut subagent.task.description);
            }
            if let Patch::Set(state) = read.state {
                subagent.task.set_status(Some(state.name));
            }
        }
        out.push(TrackerEvent::Tool(Box::new(entry.frame(
            row_session,
            None,
            false,
            FrameOrigin::SubagentUpdate,
        ))));
        row.reclassify(row_id, seq);
    }

    /// `session_message` / `session_message_chunk`: the last message of a cycle from a
    /// child to the session that announced it is the cycle's result text (kept in the
    /// message metadata only). The copies under each session are one message.
    pub(super) fn on_session_message(
        &mut self,
        kind: &str,
        wire_session: &str,
        update: &Value,
        out: &mut Vec<TrackerEvent>,
    ) {
        let Some(message) = SessionMessage::read(kind, update) else {
            return;
        };
        let route = self.route(wire_session);
        let key = (route.row_session.clone(), message.message_id.to_owned());
        if !self.native.messages.contains_key(&key)
            && self.native.messages.len() >= MAX_SESSION_MESSAGES
            && let Some(oldest) = self
                .native
                .messages
                .iter()
                .min_by_key(|(_, state)| state.seq)
                .map(|(key, _)| key.clone())
        {
            self.native.messages.remove(&oldest);
        }
        self.seq += 1;
        let seq = self.seq;
        let state = self
            .native
            .messages
            .entry(key)
            .or_insert_with(|| MessageState {
                seq,
                ..MessageState::default()
            });
        message.sender.apply(&mut state.sender);
        message.recipient.apply(&mut state.recipient);
        match message.content {
            MessageContent::Unchanged => {}
            MessageContent::Cleared => state.text.clear(),
            MessageContent::Replace(text) => state.text = text,
            MessageContent::Append(text) => state.text.push_str(&text),
        }
        let Some(sender) = state.sender.clone() else {
            return;
        };
        let known = |session: &str| {
            self.opened.contains(session)
                || self.native.children.contains_key(session)
                || self.rows.contains_key(session)
        };
        if !known(&sender) {
            if !state.reported {
                state.reported = true;
                ignore(out, IgnoredReason::HandbackFromUnknownSession);
            }
            return;
        }
        let Some(link) = self.native.children.get(&sender) else {
            return;
        };
        if state.recipient.as_deref() != Some(link.parent_session.as_str()) || state.text.is_empty()
        {
            return;
        }
        let text = state.text.clone();
        let (row_session, row_id) = (link.row_session.clone(), link.row_id.clone());
        let Some(entry) = self
            .rows
            .get_mut(&row_session)
            .and_then(|row| row.entries.get_mut(&row_id))
        else {
            return;
        };
        let Some(subagent) = entry.subagent.as_mut() else {
            return;
        };
        if subagent.task.result_text.as_deref() == Some(text.as_str()) {
            return;
        }
        subagent.task.result_text = Some(text);
        out.push(TrackerEvent::Tool(Box::new(entry.frame(
            &row_session,
            None,
            false,
            FrameOrigin::SessionMessage,
        ))));
    }
}

/// A new work-cycle row: `tool_call_id` = its key's id (made collision-free), nested
/// under the row of the session the update arrived on.
fn new_cycle_row(
    row: &mut RowSession,
    seq: &mut u64,
    key: WireKey,
    route: &Route,
    meta: &NativeMeta,
    fields: NativeFields,
    child: &str,
) -> String {
    let id = row.allocate_id(&key, &route.row_session, None);
    let mut task = SubagentTask {
        child_session_id: Some(child.to_owned()),
        ..SubagentTask::default()
    };
    meta.apply_to(&mut task, fields, child);
    let mut entry = ToolEntry::new(id.clone(), key);
    entry.parent = route.nesting_parent.clone();
    // The message row's title: the update's own, whatever it maps to.
    entry.title.clone_from(&meta.title);
    entry.subagent = Some(Subagent {
        dialect: Dialect::AcpNative,
        task,
    });
    row.insert_entry(entry, false, seq);
    id
}

/// A state onto a cycle's row: verbatim as agent status; `idle` settles it. Returns the
/// tool status it settles with.
fn apply_state(entry: &mut ToolEntry, state: State<'_>) -> Option<String> {
    if let Some(subagent) = entry.subagent.as_mut() {
        subagent.task.set_status(Some(state.name));
    }
    if !state.is_idle() {
        return None;
    }
    let status = state.settled_status();
    entry.record_status(Some(status));
    Some(status.to_owned())
}

fn ignore(out: &mut Vec<TrackerEvent>, reason: IgnoredReason) {
    out.push(TrackerEvent::Ignored {
        direction: Direction::AgentToClient,
        reason,
    });
}

/// A subagent update announcing a child without naming the parent session: reported
/// (so the writer counts the missing identity), never accumulated; its row id would be
/// the child session id.
pub(super) fn unkeyed_native_frame(
    kind: &str,
    update: &Value,
    fields: NativeFields,
) -> Option<ToolFrame> {
    let read = SubagentUpdate::read(kind, update)?;
    let child = read.child?;
    let mut meta = NativeMeta::default();
    meta.patch(&read);
    let mut task = SubagentTask {
        child_session_id: Some(child.to_owned()),
        ..SubagentTask::default()
    };
    meta.apply_to(&mut task, fields, child);
    if let Patch::Set(state) = read.state {
        task.set_status(Some(state.name));
    }
    Some(ToolFrame {
        acp_session_id: String::new(),
        tool_call_id: child.to_owned(),
        wire_tool_call_id: child.to_owned(),
        wire_session_id: String::new(),
        parent_tool_call_id: None,
        title: meta.title,
        kind: None,
        tool_status: None,
        last_tool_status: None,
        is_new: true,
        subagent: Some(task),
        dialect: Some(Dialect::AcpNative),
        origin: FrameOrigin::SubagentUpdate,
    })
}
