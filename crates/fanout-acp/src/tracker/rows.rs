//! The row accumulator: one [`ToolEntry`] per emitted row of a session, the wire-key
//! index, collision-free ids and the bounded eviction queues.

use std::collections::{BTreeMap, HashMap};

use crate::dialect::Dialect;
use crate::event::{FrameOrigin, ToolFrame};
use crate::json::base64url;
use crate::metadata::is_terminal_tool_status;
use crate::subagent::SubagentTask;

/// Non-subagent tool calls that never reported a terminal status, per session.
const MAX_OPEN_TOOL_CALLS: usize = 4096;
/// Finished non-subagent tool calls kept so late frames still find title and parent.
const MAX_SETTLED_TOOL_CALLS: usize = 1024;
/// Finished subagent rows kept for late updates.
/// Unfinished subagent rows are never evicted.
const MAX_SETTLED_SUBAGENTS: usize = 256;
/// Tool calls that linked a child session before it was announced.
pub(crate) const MAX_PENDING_LINKS: usize = 1024;

/// A tool call as the wire names it: (wire session, wire tool call id).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct WireKey {
    pub session: String,
    pub tool_call_id: String,
}

impl WireKey {
    pub(crate) fn new(session: &str, tool_call_id: &str) -> Self {
        Self {
            session: session.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
        }
    }
}

/// A recognised subagent: its dialect and cumulative payload.
#[derive(Debug)]
pub(crate) struct Subagent {
    pub dialect: Dialect,
    pub task: SubagentTask,
}

/// Eviction classes; open subagent rows belong to none (never evicted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    OpenTool,
    SettledTool,
    SettledSubagent,
}

impl Class {
    fn index(self) -> usize {
        match self {
            Self::OpenTool => 0,
            Self::SettledTool => 1,
            Self::SettledSubagent => 2,
        }
    }

    fn capacity(self) -> usize {
        match self {
            Self::OpenTool => MAX_OPEN_TOOL_CALLS,
            Self::SettledTool => MAX_SETTLED_TOOL_CALLS,
            Self::SettledSubagent => MAX_SETTLED_SUBAGENTS,
        }
    }
}

/// The accumulator entry for one row.
#[derive(Debug)]
pub(crate) struct ToolEntry {
    pub id: String,
    pub wire: WireKey,
    /// Creation order, for deterministic choices among several candidates.
    pub created: u64,
    pub parent: Option<String>,
    pub title: Option<String>,
    pub kind: Option<String>,
    pub last_status: Option<String>,
    pub subagent: Option<Subagent>,
    /// The child session this (non-subagent) tool call links with a session block.
    pub linked_child: Option<String>,
    /// Set when a recognised subagent call links a child that already has its own row:
    /// the call's payload enriches that row instead of forming a second row.
    pub merges_into_child: Option<Dialect>,
    class: Option<(Class, u64)>,
}

impl ToolEntry {
    pub(crate) fn new(id: String, wire: WireKey) -> Self {
        Self {
            id,
            wire,
            created: 0,
            parent: None,
            title: None,
            kind: None,
            last_status: None,
            subagent: None,
            linked_child: None,
            merges_into_child: None,
            class: None,
        }
    }

    pub(crate) fn is_terminal(&self) -> bool {
        self.last_status
            .as_deref()
            .is_some_and(is_terminal_tool_status)
    }

    /// A terminal status is never replaced (mirrors the store's settlement rule).
    pub(crate) fn record_status(&mut self, status: Option<&str>) {
        if let Some(status) = status
            && !self.is_terminal()
        {
            self.last_status = Some(status.to_owned());
        }
    }

    pub(crate) fn dialect(&self) -> Option<Dialect> {
        self.subagent.as_ref().map(|s| s.dialect)
    }

    /// The event for this row after a change.
    pub(crate) fn frame(
        &self,
        row_session: &str,
        tool_status: Option<&str>,
        is_new: bool,
        origin: FrameOrigin,
    ) -> ToolFrame {
        ToolFrame {
            acp_session_id: row_session.to_owned(),
            tool_call_id: self.id.clone(),
            wire_tool_call_id: self.wire.tool_call_id.clone(),
            wire_session_id: self.wire.session.clone(),
            parent_tool_call_id: self.parent.clone(),
            title: self.title.clone(),
            kind: self.kind.clone(),
            tool_status: tool_status.map(str::to_owned),
            last_tool_status: self.last_status.clone(),
            is_new,
            subagent: self.subagent.as_ref().map(|s| s.task.clone()),
            dialect: self.dialect(),
            origin,
        }
    }
}

/// All rows of one (top-level) session.
#[derive(Debug, Default)]
pub(crate) struct RowSession {
    pub entries: HashMap<String, ToolEntry>,
    /// Wire key -> emitted ids, oldest first; the last one is current. Several when a
    /// dialect's state gave a reused wire id a new row.
    pub by_wire: HashMap<WireKey, Vec<String>>,
    /// Eviction queues by [`Class::index`]: order of entering the class -> id.
    queues: [BTreeMap<u64, String>; 3],
    /// Child session -> tool call that linked it before it was announced.
    pub pending_links: HashMap<String, String>,
}

impl RowSession {
    /// The current emitted id of a wire key.
    pub(crate) fn current(&self, key: &WireKey) -> Option<&str> {
        self.by_wire.get(key)?.last().map(String::as_str)
    }

    /// The title the current row of a wire key has accumulated.
    pub(crate) fn current_title(&self, key: &WireKey) -> Option<String> {
        self.entries.get(self.current(key)?)?.title.clone()
    }

    /// The emitted id for a wire id of the same wire session (parent references).
    pub(crate) fn emitted_for(&self, wire_session: &str, wire_id: &str) -> String {
        self.current(&WireKey::new(wire_session, wire_id))
            .unwrap_or(wire_id)
            .to_owned()
    }

    /// The wire id when free in this session, else a collision-free derivation: tagged
    /// with `(tag, value)` when a dialect's state names what tells the rows apart (a
    /// reused wire id's other child), else with the wire session when it is not the row
    /// session (a child's call), else `~dup`.
    pub(crate) fn allocate_id(
        &self,
        key: &WireKey,
        row_session: &str,
        tagged: Option<(&str, &str)>,
    ) -> String {
        let base = &key.tool_call_id;
        if !self.entries.contains_key(base) {
            return base.clone();
        }
        let stem = match tagged {
            Some((tag, value)) => format!(
                "{base}~{tag}~{}-{}",
                value.len(),
                base64url(value.as_bytes())
            ),
            None if key.session != row_session => format!(
                "{base}~session~{}-{}",
                key.session.len(),
                base64url(key.session.as_bytes())
            ),
            None => format!("{base}~dup"),
        };
        if !self.entries.contains_key(&stem) {
            return stem;
        }
        // Terminates: at most entries.len() candidates are taken.
        let mut n: u64 = 2;
        loop {
            let candidate = format!("{stem}~{n}");
            if !self.entries.contains_key(&candidate) {
                return candidate;
            }
            n += 1;
        }
    }

    pub(crate) fn insert_entry(
        &mut self,
        mut entry: ToolEntry,
        index_by_wire: bool,
        seq: &mut u64,
    ) {
        *seq += 1;
        entry.created = *seq;
        let id = entry.id.clone();
        if index_by_wire {
            self.by_wire
                .entry(entry.wire.clone())
                .or_default()
                .push(id.clone());
        }
        self.entries.insert(id.clone(), entry);
        self.reclassify(&id, seq);
    }

    fn remove_entry(&mut self, id: &str) {
        let Some(entry) = self.entries.remove(id) else {
            return;
        };
        if let Some(ids) = self.by_wire.get_mut(&entry.wire) {
            ids.retain(|other| other != id);
            if ids.is_empty() {
                self.by_wire.remove(&entry.wire);
            }
        }
        if let Some((class, key)) = entry.class {
            self.queues[class.index()].remove(&key);
        }
    }

    /// Moves an entry to its eviction class and enforces the caps.
    pub(crate) fn reclassify(&mut self, id: &str, seq: &mut u64) {
        let Some(entry) = self.entries.get_mut(id) else {
            return;
        };
        let wanted = match (entry.subagent.is_some(), entry.is_terminal()) {
            (true, true) => Some(Class::SettledSubagent),
            (true, false) => None,
            (false, true) => Some(Class::SettledTool),
            (false, false) => Some(Class::OpenTool),
        };
        if entry.class.map(|(class, _)| class) == wanted {
            return;
        }
        if let Some((class, key)) = entry.class.take() {
            self.queues[class.index()].remove(&key);
        }
        let Some(class) = wanted else {
            return;
        };
        *seq += 1;
        entry.class = Some((class, *seq));
        self.queues[class.index()].insert(*seq, id.to_owned());
        while self.queues[class.index()].len() > class.capacity() {
            let Some((_, oldest)) = self.queues[class.index()].pop_first() else {
                break;
            };
            if let Some(evicted) = self.entries.get_mut(&oldest) {
                evicted.class = None;
            }
            self.remove_entry(&oldest);
        }
    }

    /// The newest subagent row of a child session (its current work cycle).
    pub(crate) fn subagent_for_child(&self, child: &str) -> Option<&str> {
        self.entries
            .values()
            .filter(|entry| {
                entry
                    .subagent
                    .as_ref()
                    .is_some_and(|s| s.task.child_session_id.as_deref() == Some(child))
            })
            .max_by_key(|entry| entry.created)
            .map(|entry| entry.id.as_str())
    }

    /// The newest row of `dialect` a row signal names.
    pub(crate) fn signalled_row(
        &self,
        dialect: Dialect,
        matches: impl Fn(&ToolEntry) -> bool,
    ) -> Option<String> {
        self.entries
            .values()
            .filter(|entry| entry.dialect() == Some(dialect) && matches(entry))
            .max_by_key(|entry| entry.created)
            .map(|entry| entry.id.clone())
    }
}
