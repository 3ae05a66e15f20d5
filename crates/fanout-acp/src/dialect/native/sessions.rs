//! The state of ACP's own subagent sessions (DESIGN 3.6) on one connection: the work
//! cycles of each child it announced (one row per cycle: `<child>`, `<child>#2`, …) and
//! the messages between sessions whose last hand-back from a child to its parent is the
//! cycle's result text. Which row owns a child's traffic is the tracker's
//! ([`ChildSessions`](crate::tracker::children::ChildSessions)): a recognised tool call can
//! own a child as much as a work cycle can.

use std::collections::HashMap;

use serde_json::Value;

use super::{
    MESSAGE_KINDS, MessageContent, NativeFields, NativeMeta, Patch, SessionMessage, State,
    SubagentUpdate, UPDATE_KINDS,
};
use crate::dialect::Dialect;
use crate::dialect::state::{Conn, DialectState, Flow};
use crate::event::{FrameOrigin, IgnoredReason, ToolFrame, TrackerEvent};
use crate::subagent::SubagentTask;
use crate::tracker::children::{ChildLink, Route};
use crate::tracker::rows::{RowSession, Subagent, ToolEntry, WireKey};

/// Messages between sessions remembered (oldest forgotten first).
const MAX_SESSION_MESSAGES: usize = 4096;

/// The work cycles of one child whose rows are its own.
#[derive(Debug, Clone)]
struct Cycles {
    /// How many cycles have started (the current one's number).
    count: u32,
    /// Whether the current cycle is still running (not `idle` yet).
    open: bool,
    /// The display metadata patched so far, for the next cycle's row.
    meta: NativeMeta,
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

/// Work cycles and messages between sessions.
#[derive(Debug, Default)]
pub(crate) struct NativeSessions {
    /// The children announced by a subagent update (their rows are their own cycles),
    /// by child session; a child a tool call owns has none.
    cycles: HashMap<String, Cycles>,
    /// By (row session, message id): the copies of a message sent under each of its two
    /// sessions are one message.
    messages: HashMap<(String, String), MessageState>,
}

impl DialectState for NativeSessions {
    fn session_update(
        &mut self,
        kind: &str,
        wire_session: &str,
        update: &Value,
        conn: &mut Conn<'_>,
    ) -> Flow {
        if UPDATE_KINDS.contains(&kind) {
            if wire_session.is_empty() {
                // Like a tool frame without a session: reported, never accumulated, so the
                // writer counts the missing identity (AC-2).
                match unkeyed_frame(kind, update, conn.rules.native_fields()) {
                    Some(frame) => conn.out.push(TrackerEvent::Tool(Box::new(frame))),
                    None => conn.ignore(IgnoredReason::MissingSessionId),
                }
            } else {
                self.on_subagent_update(kind, wire_session, update, conn);
            }
            return Flow::Stop;
        }
        if MESSAGE_KINDS.contains(&kind) && !wire_session.is_empty() {
            self.on_session_message(kind, wire_session, update, conn);
        }
        Flow::Continue
    }
}

impl NativeSessions {
    /// ACP's `subagent_update` (or a draft name): `sessionId` is the child, the outer
    /// session id the session it arrived on (its parent).
    fn on_subagent_update(
        &mut self,
        kind: &str,
        wire_session: &str,
        update: &Value,
        conn: &mut Conn<'_>,
    ) {
        let Some(read) = SubagentUpdate::read(kind, update) else {
            return;
        };
        let route = conn.children.route(wire_session);
        let child = read.child.filter(|child| {
            *child != wire_session
                && *child != route.row_session
                && (conn.children.is_child(child) || !conn.opened.contains(*child))
        });
        let Some(child) = child else {
            return conn.ignore(IgnoredReason::InvalidSubagentUpdate);
        };
        let fields = conn.rules.native_fields();
        match conn.children.link(child).cloned() {
            Some(link) if self.cycles.contains_key(child) => {
                self.next_in_cycle(child, &link, &route, &read, fields, conn);
            }
            Some(link) => patch_owner(&link.row_session, &link.row_id, &read, fields, conn),
            None => {
                let owner = conn
                    .rows
                    .get(&route.row_session)
                    .and_then(|row| row.subagent_for_child(child))
                    .map(str::to_owned);
                match owner {
                    // A recognised call named this child first (a result naming its
                    // session, a thread id): that row is the child's, as if it had linked it.
                    Some(row_id) => {
                        conn.children.register_owned(
                            child,
                            wire_session,
                            &route.row_session,
                            row_id.clone(),
                            conn.opened,
                        );
                        patch_owner(&route.row_session, &row_id, &read, fields, conn);
                    }
                    // A lone state for a child nothing announced or linked.
                    None if !read.describes && !is_linked(conn, &route.row_session, child) => {
                        conn.ignore(IgnoredReason::SubagentStateForUnknownChild);
                    }
                    None => self.announce(child, wire_session, &route, &read, fields, conn),
                }
            }
        }
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
        conn: &mut Conn<'_>,
    ) {
        let mut meta = NativeMeta::default();
        meta.patch(read);
        let row = conn.rows.entry(route.row_session.clone()).or_default();
        // A tool call that linked the child before it was announced.
        let linked_status = row
            .pending_links
            .remove(child)
            .and_then(|linking| row.entries.get(&linking))
            .and_then(|linking| linking.last_status.clone());
        let key = WireKey::new(wire_session, child);
        let id = new_cycle_row(row, conn.seq, key, route, &meta, fields, child);
        let mut open = true;
        let mut status = linked_status;
        if let Some(entry) = row.entries.get_mut(&id) {
            entry.record_status(status.as_deref());
            if let Patch::Set(state) = read.state {
                open = !state.is_idle();
                status = apply_state(entry, state).or(status);
            }
            conn.out.push(TrackerEvent::Tool(Box::new(entry.frame(
                &route.row_session,
                status.as_deref(),
                true,
                FrameOrigin::SubagentUpdate,
            ))));
        }
        row.reclassify(&id, conn.seq);
        let link = ChildLink {
            row_session: route.row_session.clone(),
            row_id: id,
            parent_session: wire_session.to_owned(),
        };
        if conn.children.register(child, link, conn.opened) {
            let cycles = Cycles {
                count: 1,
                open,
                meta,
            };
            self.cycles.insert(child.to_owned(), cycles);
        }
    }

    /// A later update of a child with its own rows: patches the current cycle, ends it on
    /// `idle`, or starts the next on a `running` that follows `idle`.
    fn next_in_cycle(
        &mut self,
        child: &str,
        link: &ChildLink,
        route: &Route,
        read: &SubagentUpdate<'_>,
        fields: NativeFields,
        conn: &mut Conn<'_>,
    ) {
        let Some(cycles) = self.cycles.get_mut(child) else {
            return;
        };
        cycles.meta.patch(read);
        let patches_fields = read.title != Patch::Unchanged || read.description != Patch::Unchanged;
        let state = match read.state {
            Patch::Set(state) => Some(state),
            Patch::Unchanged | Patch::Cleared => None,
        };
        let starts = state.is_some_and(|state| state.name == "running") && !cycles.open;
        // (A start is `running`, never `idle`: the open state before it decides.)
        let idle_twice = state.is_some_and(State::is_idle) && !cycles.open;
        if idle_twice {
            conn.ignore(IgnoredReason::IdleOutsideCycle);
        }
        let row = conn.rows.entry(link.row_session.clone()).or_default();
        let mut row_id = link.row_id.clone();
        if starts {
            cycles.count += 1;
            cycles.open = true;
            let key = WireKey::new(&link.parent_session, &format!("{child}#{}", cycles.count));
            row_id = new_cycle_row(row, conn.seq, key, route, &cycles.meta, fields, child);
            // A forgotten (evicted) row still moves the cycle bookkeeping on.
            conn.children.move_to_row(child, row_id.clone());
        }
        let state = state.filter(|_| !idle_twice);
        if state.is_some_and(State::is_idle) {
            cycles.open = false;
        }
        let Some(entry) = row.entries.get_mut(&row_id) else {
            return;
        };
        if patches_fields {
            entry.title.clone_from(&cycles.meta.title);
            if let Some(subagent) = entry.subagent.as_mut() {
                cycles.meta.apply_to(&mut subagent.task, fields, child);
            }
        }
        let status = state.and_then(|state| apply_state(entry, state));
        if starts || patches_fields || state.is_some() {
            conn.out.push(TrackerEvent::Tool(Box::new(entry.frame(
                &link.row_session,
                status.as_deref(),
                starts,
                FrameOrigin::SubagentUpdate,
            ))));
        }
        row.reclassify(&row_id, conn.seq);
    }

    /// `session_message` / `session_message_chunk`: the last message of a cycle from a
    /// child to the session that announced it is the cycle's result text (kept in the
    /// message metadata only). The copies under each session are one message.
    fn on_session_message(
        &mut self,
        kind: &str,
        wire_session: &str,
        update: &Value,
        conn: &mut Conn<'_>,
    ) {
        let Some(message) = SessionMessage::read(kind, update) else {
            return;
        };
        let route = conn.children.route(wire_session);
        let key = (route.row_session.clone(), message.message_id.to_owned());
        if !self.messages.contains_key(&key)
            && self.messages.len() >= MAX_SESSION_MESSAGES
            && let Some(oldest) = self
                .messages
                .iter()
                .min_by_key(|(_, state)| state.seq)
                .map(|(key, _)| key.clone())
        {
            self.messages.remove(&oldest);
        }
        *conn.seq += 1;
        let seq = *conn.seq;
        let state = self.messages.entry(key).or_insert_with(|| MessageState {
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
        let known = conn.opened.contains(&sender)
            || conn.children.is_child(&sender)
            || conn.rows.contains_key(&sender);
        if !known {
            if !state.reported {
                state.reported = true;
                conn.ignore(IgnoredReason::HandbackFromUnknownSession);
            }
            return;
        }
        let Some(link) = conn.children.link(&sender) else {
            return;
        };
        if state.recipient.as_deref() != Some(link.parent_session.as_str()) || state.text.is_empty()
        {
            return;
        }
        let text = state.text.clone();
        let Some(entry) = conn
            .rows
            .get_mut(&link.row_session)
            .and_then(|row| row.entries.get_mut(&link.row_id))
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
        conn.out.push(TrackerEvent::Tool(Box::new(entry.frame(
            &link.row_session,
            None,
            false,
            FrameOrigin::SessionMessage,
        ))));
    }
}

/// Whether a tool call of the session linked `child` before it was announced.
fn is_linked(conn: &Conn<'_>, row_session: &str, child: &str) -> bool {
    conn.rows
        .get(row_session)
        .is_some_and(|row| row.pending_links.contains_key(child))
}

/// An update of a child a recognised tool call owns: the state is its agent status
/// and the title and description patch the call's (the protocol's meaning, where the
/// agent's description is the row's); the call's own status decides settling, and it is
/// one row, not cycles.
fn patch_owner(
    row_session: &str,
    row_id: &str,
    read: &SubagentUpdate<'_>,
    fields: NativeFields,
    conn: &mut Conn<'_>,
) {
    let Some(row) = conn.rows.get_mut(row_session) else {
        return;
    };
    let Some(entry) = row.entries.get_mut(row_id) else {
        return;
    };
    if let Patch::Set(title) = read.title {
        entry.title = Some(title.to_owned());
    }
    if let Some(subagent) = entry.subagent.as_mut() {
        if fields.description_is_description() {
            read.description.apply_text(&mut subagent.task.description);
        }
        if let Patch::Set(state) = read.state {
            subagent.task.set_status(Some(state.name));
        }
    }
    conn.out.push(TrackerEvent::Tool(Box::new(entry.frame(
        row_session,
        None,
        false,
        FrameOrigin::SubagentUpdate,
    ))));
    row.reclassify(row_id, conn.seq);
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
        dialect: Dialect::ACP_NATIVE,
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

/// A subagent update announcing a child without naming the parent session: reported
/// (so the writer counts the missing identity), never accumulated; its row id would be
/// the child session id.
fn unkeyed_frame(kind: &str, update: &Value, fields: NativeFields) -> Option<ToolFrame> {
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
        dialect: Some(Dialect::ACP_NATIVE),
        origin: FrameOrigin::SubagentUpdate,
    })
}
