//! The stateful tracker: JSON-RPC lines in, semantic events out.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use crate::codex::{self, CodexLifecycle, CodexSignal, CodexSpawn};
use crate::dialect::{self, Dialect, FrameView};
use crate::event::{
    FrameOrigin, IgnoredReason, SessionOpenMethod, ToolFrame, TrackerEvent, TrackerStats,
};
use crate::json::{base64url, text, text_at};
use crate::jsonrpc::{self, Direction, Message, PendingRequests, RequestId, ResponseOutcome};
use crate::metadata::is_terminal_tool_status;
use crate::subagent::{SubagentInputs, SubagentTask};

/// Requests awaiting a response, per direction.
const MAX_PENDING_REQUESTS: usize = 4096;
/// Non-subagent tool calls that never reported a terminal status, per session.
const MAX_OPEN_TOOL_CALLS: usize = 4096;
/// Finished non-subagent tool calls kept so late frames still find title and parent.
const MAX_SETTLED_TOOL_CALLS: usize = 1024;
/// Finished subagent rows kept for late updates.
/// Unfinished subagent rows are never evicted.
const MAX_SETTLED_SUBAGENTS: usize = 256;
const MAX_PARKED_CURSOR_TASKS: usize = 1024;
const MAX_CODEX_ALIASES: usize = 1024;
const MAX_PENDING_LINKS: usize = 1024;
const MAX_CHILD_SESSIONS: usize = 65_536;

/// Feeds on `(direction, line)` pairs and reports what they mean.
///
/// Knows ACP only: no database, no clock, no task. One tracker per agent connection
/// (execution); it is cheap to create. Memory is bounded (see the `MAX_*` constants).
#[derive(Debug)]
pub struct Tracker {
    /// Requests sent client-to-agent, answered agent-to-client.
    pending_from_client: PendingRequests<PendingRequest>,
    /// Requests sent agent-to-client, answered client-to-agent.
    pending_from_agent: PendingRequests<PendingRequest>,
    /// Tool-call rows per session they belong to.
    rows: HashMap<String, RowSession>,
    /// Child sessions (ACP native, fanout) -> the row that owns their traffic.
    children: HashMap<String, ChildLink>,
    /// Sessions opened by the client: never accepted as someone's child.
    opened: HashSet<String>,
    /// Sessions whose `session/load` is in flight (history replay).
    loading: HashSet<String>,
    /// `cursor/task` requests that arrived before their tool call, by tool call id.
    parked_cursor: HashMap<String, ParkedCursorTask>,
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

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct WireKey {
    session: String,
    tool_call_id: String,
}

impl WireKey {
    fn new(session: &str, tool_call_id: &str) -> Self {
        Self {
            session: session.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
        }
    }
}

#[derive(Debug, Clone)]
struct ChildLink {
    row_session: String,
    row_id: String,
}

#[derive(Debug, Default)]
struct ParkedCursorTask {
    session: Option<String>,
    seq: u64,
    agent_id: Option<String>,
    description: Option<String>,
    model: Option<String>,
    prompt: Option<String>,
}

impl ParkedCursorTask {
    fn merge(&mut self, later: ParkedCursorTask) {
        fill(&mut self.agent_id, later.agent_id);
        fill(&mut self.description, later.description);
        fill(&mut self.model, later.model);
        fill(&mut self.prompt, later.prompt);
        if self.session.is_none() {
            self.session = later.session;
        }
    }

    /// Fill-if-empty into a payload.
    fn apply(&self, task: &mut SubagentTask) {
        task.fill_inputs(&SubagentInputs {
            description: self.description.clone(),
            prompt: self.prompt.clone(),
            subagent_type: None,
        });
        fill(&mut task.agent_id, self.agent_id.clone());
        fill(&mut task.model, self.model.clone());
    }
}

fn fill(slot: &mut Option<String>, value: Option<String>) {
    if slot.as_deref().is_none_or(str::is_empty) && value.as_deref().is_some_and(|v| !v.is_empty())
    {
        *slot = value;
    }
}

#[derive(Debug)]
struct Subagent {
    dialect: Dialect,
    task: SubagentTask,
}

/// Eviction classes; open subagent rows belong to none (never evicted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
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
struct ToolEntry {
    id: String,
    wire: WireKey,
    /// Creation order, for deterministic choices among several candidates.
    created: u64,
    parent: Option<String>,
    title: Option<String>,
    kind: Option<String>,
    last_status: Option<String>,
    subagent: Option<Subagent>,
    /// The child session this (non-subagent) tool call links with a session block.
    linked_child: Option<String>,
    /// Set when a recognised subagent call links a child that already has its own row:
    /// the call's payload enriches that row instead of forming a second row.
    merges_into_child: Option<Dialect>,
    class: Option<(Class, u64)>,
}

impl ToolEntry {
    fn new(id: String, wire: WireKey) -> Self {
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

    fn is_terminal(&self) -> bool {
        self.last_status
            .as_deref()
            .is_some_and(is_terminal_tool_status)
    }

    /// A terminal status is never replaced (mirrors the store's settlement rule).
    fn record_status(&mut self, status: Option<&str>) {
        if let Some(status) = status
            && !self.is_terminal()
        {
            self.last_status = Some(status.to_owned());
        }
    }

    fn codex_child(&self) -> Option<&str> {
        let subagent = self.subagent.as_ref()?;
        if subagent.dialect != Dialect::Codex {
            return None;
        }
        subagent.task.child_session_id.as_deref()
    }

    fn is_codex_card(&self) -> bool {
        self.subagent
            .as_ref()
            .is_some_and(|s| s.dialect == Dialect::Codex)
    }

    fn frame(
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
            dialect: self.subagent.as_ref().map(|s| s.dialect),
            origin,
        }
    }
}

/// All rows of one (top-level) session.
#[derive(Debug, Default)]
struct RowSession {
    entries: HashMap<String, ToolEntry>,
    /// Wire key -> emitted ids, oldest first; the last one is current. Several only for
    /// a Codex wire id reused with different children.
    by_wire: HashMap<WireKey, Vec<String>>,
    /// Eviction queues by [`Class::index`]: order of entering the class -> id.
    queues: [BTreeMap<u64, String>; 3],
    /// Wire ids of Codex lifecycle calls folded into another row.
    codex_aliases: HashMap<WireKey, String>,
    /// Child session -> tool call that linked it before it was announced.
    pending_links: HashMap<String, String>,
}

impl RowSession {
    /// The title the current row of a wire key has accumulated.
    fn current_title(&self, key: &WireKey) -> Option<String> {
        let id = self.by_wire.get(key)?.last()?;
        self.entries.get(id)?.title.clone()
    }
}

/// Where a frame's rows go.
struct Route {
    row_session: String,
    /// The child row, when the frame is a child session's traffic.
    nesting_parent: Option<String>,
}

/// A session link of a frame, with what the tracker knew about the child beforehand.
struct LinkTarget {
    child: String,
    owner: Option<ChildLink>,
}

/// Per-frame context handed to the row session.
struct FrameCtx<'a> {
    row_session: &'a str,
    nesting_parent: Option<&'a str>,
    key: &'a WireKey,
    view: &'a FrameView<'a>,
    is_call: bool,
    seq: &'a mut u64,
    out: &'a mut Vec<TrackerEvent>,
    /// Children this frame made a row the owner of: (child session, row id).
    new_children: Vec<(String, String)>,
}

impl FrameCtx<'_> {
    fn ignore(&mut self, reason: IgnoredReason) {
        self.out.push(TrackerEvent::Ignored {
            direction: Direction::AgentToClient,
            reason,
        });
    }
}

enum CodexRoute {
    /// Fold into a card of this wire id.
    Own(String),
    /// Fold into a card announced on another wire id.
    Foreign(String),
    /// A new card with this emitted id.
    New(String),
    Suppress,
    /// Not a Codex card frame: the ordinary path.
    Ordinary,
}

enum Target {
    /// The entry for the wire key, created if needed.
    Wire,
    /// An existing entry, made a Codex card.
    Card(String),
    /// A new Codex card.
    NewCard(String),
}

impl RowSession {
    fn current(&self, key: &WireKey) -> Option<&str> {
        self.by_wire.get(key)?.last().map(String::as_str)
    }

    /// The emitted id for a wire id of the same wire session (parent references).
    fn emitted_for(&self, wire_session: &str, wire_id: &str) -> String {
        self.current(&WireKey::new(wire_session, wire_id))
            .unwrap_or(wire_id)
            .to_owned()
    }

    /// The wire id when free in this session, else a collision-free derivation.
    fn allocate_id(&self, key: &WireKey, row_session: &str, codex_child: Option<&str>) -> String {
        let base = &key.tool_call_id;
        if !self.entries.contains_key(base) {
            return base.clone();
        }
        let stem = match codex_child {
            Some(child) => format!(
                "{base}~codex-subagent~{}-{}",
                child.len(),
                base64url(child.as_bytes())
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

    fn insert_entry(&mut self, mut entry: ToolEntry, index_by_wire: bool, seq: &mut u64) {
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
    fn reclassify(&mut self, id: &str, seq: &mut u64) {
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

    fn codex_card_for_child(&self, child: &str) -> Option<&ToolEntry> {
        // Deterministic choice when several cards share a child: the oldest.
        self.entries
            .values()
            .filter(|entry| entry.codex_child() == Some(child))
            .min_by_key(|entry| entry.created)
    }

    fn subagent_for_child(&self, child: &str) -> Option<&str> {
        self.entries
            .values()
            .filter(|entry| {
                entry
                    .subagent
                    .as_ref()
                    .is_some_and(|s| s.task.child_session_id.as_deref() == Some(child))
            })
            .map(|entry| entry.id.as_str())
            .min()
    }

    fn apply_tool(
        &mut self,
        ctx: &mut FrameCtx<'_>,
        signal: Option<CodexSignal>,
        parked: Option<ParkedCursorTask>,
        links: &[LinkTarget],
    ) {
        let (controls, codex) = match signal {
            Some(CodexSignal::Control(states)) => (Some(states), None),
            other => (None, other),
        };
        let target = match &codex {
            Some(signal) => match self.route_codex(ctx, signal) {
                CodexRoute::Suppress => {
                    ctx.ignore(IgnoredReason::UnmatchedCodexLifecycle);
                    return;
                }
                CodexRoute::Foreign(id) => {
                    self.fold_codex_foreign(ctx, &id, signal);
                    return;
                }
                CodexRoute::Own(id) => Target::Card(id),
                CodexRoute::New(id) => Target::NewCard(id),
                CodexRoute::Ordinary => Target::Wire,
            },
            None => {
                if !ctx.is_call && self.codex_aliases.contains_key(ctx.key) {
                    ctx.ignore(IgnoredReason::CodexLifecycleFollowUp);
                    return;
                }
                Target::Wire
            }
        };
        let recognise = ctx.is_call && controls.is_none();
        self.apply_frame(ctx, target, codex.as_ref(), recognise, parked, links);
        if let Some(states) = controls {
            self.apply_codex_states(ctx, &states);
        }
    }

    fn route_codex(&self, ctx: &FrameCtx<'_>, signal: &CodexSignal) -> CodexRoute {
        if let Some(target) = self.codex_aliases.get(ctx.key)
            && self.entries.contains_key(target)
        {
            return CodexRoute::Foreign(target.clone());
        }
        let (child, lifecycle) = match signal {
            CodexSignal::Spawn(spawn) => (spawn.child.as_deref(), None),
            CodexSignal::Lifecycle(lifecycle) => (lifecycle.child.as_deref(), Some(lifecycle)),
            CodexSignal::Control(_) => return CodexRoute::Ordinary,
        };
        let own: Vec<&ToolEntry> = self
            .by_wire
            .get(ctx.key)
            .into_iter()
            .flatten()
            .filter_map(|id| self.entries.get(id))
            .filter(|entry| entry.is_codex_card())
            .collect();
        if let Some(child) = child {
            if let Some(card) = own.iter().find(|card| card.codex_child() == Some(child)) {
                return CodexRoute::Own(card.id.clone());
            }
            if let Some(card) = self.codex_card_for_child(child) {
                return CodexRoute::Foreign(card.id.clone());
            }
        }
        if let Some(current) = own.last() {
            if child.is_none() || current.codex_child().is_none() || !ctx.is_call {
                return CodexRoute::Own(current.id.clone());
            }
            // The wire id is reused for a different child: a new row.
            return CodexRoute::New(self.allocate_id(ctx.key, ctx.row_session, child));
        }
        let ordinary_or_new = |this: &Self| match this.current(ctx.key) {
            Some(existing) => CodexRoute::Own(existing.to_owned()),
            None => CodexRoute::New(this.allocate_id(ctx.key, ctx.row_session, child)),
        };
        let Some(lifecycle) = lifecycle else {
            return if ctx.is_call {
                ordinary_or_new(self)
            } else {
                CodexRoute::Ordinary
            };
        };
        // Adopt the one card this frame can only mean (its child was unknown at launch).
        let candidates: Vec<&ToolEntry> = self
            .entries
            .values()
            .filter(|entry| entry.is_codex_card())
            .filter(|entry| child.is_none() || entry.codex_child().is_none())
            .collect();
        if let [sole] = candidates.as_slice() {
            return if sole.wire == *ctx.key {
                CodexRoute::Own(sole.id.clone())
            } else {
                CodexRoute::Foreign(sole.id.clone())
            };
        }
        if lifecycle.is_terminal() {
            return CodexRoute::Suppress;
        }
        if ctx.is_call {
            ordinary_or_new(self)
        } else {
            CodexRoute::Ordinary
        }
    }

    /// A Codex frame on another wire id for a known child: updates that row only.
    fn fold_codex_foreign(&mut self, ctx: &mut FrameCtx<'_>, id: &str, signal: &CodexSignal) {
        let Some(entry) = self.entries.get_mut(id) else {
            return;
        };
        let aliased = entry.wire != *ctx.key;
        if let Some(subagent) = entry.subagent.as_mut() {
            codex_enrich(&mut subagent.task, signal, ctx.is_call);
        }
        let status = match signal {
            CodexSignal::Lifecycle(lifecycle) if lifecycle.is_terminal() => Some("completed"),
            CodexSignal::Lifecycle(_) => Some("in_progress"),
            _ => None,
        };
        entry.record_status(status);
        ctx.out.push(TrackerEvent::Tool(Box::new(entry.frame(
            ctx.row_session,
            status,
            false,
            FrameOrigin::CodexLifecycle,
        ))));
        if aliased {
            if self.codex_aliases.len() >= MAX_CODEX_ALIASES {
                self.codex_aliases.clear();
            }
            self.codex_aliases.insert(ctx.key.clone(), id.to_owned());
        }
        self.reclassify(id, ctx.seq);
    }

    /// `agentsStates` of a Codex control: agent statuses of known children.
    fn apply_codex_states(&mut self, ctx: &mut FrameCtx<'_>, states: &[(String, String)]) {
        for (child, status) in states {
            let Some(id) = self.codex_card_for_child(child).map(|e| e.id.clone()) else {
                continue;
            };
            let Some(entry) = self.entries.get_mut(&id) else {
                continue;
            };
            if let Some(subagent) = entry.subagent.as_mut() {
                merge_codex_status(&mut subagent.task, Some(status), ctx.is_call);
            }
            ctx.out.push(TrackerEvent::Tool(Box::new(entry.frame(
                ctx.row_session,
                None,
                false,
                FrameOrigin::CodexControl,
            ))));
        }
    }

    fn apply_frame(
        &mut self,
        ctx: &mut FrameCtx<'_>,
        target: Target,
        codex: Option<&CodexSignal>,
        recognise: bool,
        parked: Option<ParkedCursorTask>,
        links: &[LinkTarget],
    ) {
        let view = ctx.view;
        let (id, is_new, as_card) = match target {
            Target::Card(id) => (id, false, true),
            Target::NewCard(id) => {
                let entry = ToolEntry::new(id.clone(), ctx.key.clone());
                self.insert_entry(entry, true, ctx.seq);
                (id, true, true)
            }
            Target::Wire => match self.current(ctx.key) {
                Some(id) => (id.to_owned(), false, false),
                None => {
                    let id = self.allocate_id(ctx.key, ctx.row_session, None);
                    let entry = ToolEntry::new(id.clone(), ctx.key.clone());
                    self.insert_entry(entry, true, ctx.seq);
                    (id, true, false)
                }
            },
        };

        // Lookups that need the whole session, before borrowing the entry.
        let codex_parent = match codex {
            Some(CodexSignal::Spawn(CodexSpawn {
                sender: Some(sender),
                ..
            })) => self
                .codex_card_for_child(sender)
                .filter(|card| card.id != id)
                .map(|card| card.id.clone()),
            _ => None,
        };
        let claude_parent = view
            .claude_parent()
            .map(|parent| self.emitted_for(&ctx.key.session, parent));
        // A link to a child that already has a row of its own (in this session).
        let owned_link = links.iter().find_map(|link| {
            let owner = link.owner.as_ref()?;
            (owner.row_session == ctx.row_session
                && owner.row_id != id
                && self.entries.contains_key(&owner.row_id))
            .then(|| (link.child.clone(), owner.row_id.clone()))
        });

        let Some(entry) = self.entries.get_mut(&id) else {
            return;
        };
        if let Some(title) = view.title {
            entry.title = Some(title.to_owned());
        }
        if let Some(kind) = view.kind {
            entry.kind = Some(kind.to_owned());
        }
        if entry.parent.is_none() {
            entry.parent = codex_parent
                .or(claude_parent)
                .or_else(|| ctx.nesting_parent.map(str::to_owned));
        }

        // Recognition: only on tool_call frames (and for Codex cards, by correlation).
        if entry.subagent.is_none() && entry.merges_into_child.is_none() {
            if as_card {
                entry.subagent = Some(Subagent {
                    dialect: Dialect::Codex,
                    task: SubagentTask::default(),
                });
            } else if recognise && let Some((dialect, task)) = dialect::recognise(view) {
                match &owned_link {
                    Some((child, _)) => {
                        entry.linked_child = Some(child.clone());
                        entry.merges_into_child = Some(dialect);
                    }
                    None => entry.subagent = Some(Subagent { dialect, task }),
                }
            }
        }

        // Enrichment of a recognised payload.
        if let Some(subagent) = entry.subagent.as_mut() {
            if let Some(parked) = &parked {
                parked.apply(&mut subagent.task);
            }
            if let Some(signal) = codex {
                codex_enrich(&mut subagent.task, signal, ctx.is_call);
            }
            dialect::enrich(&mut subagent.task, subagent.dialect, view);
        }

        let status = frame_status(view, ctx.is_call, entry.subagent.is_some());
        entry.record_status(status.as_deref());

        // Session links: a subagent row owns its children; any other call drives the
        // tool status of the child's row.
        let mut pending_link = None;
        if let Some(subagent) = entry.subagent.as_mut() {
            for link in links {
                if subagent.task.child_session_id.is_none() {
                    subagent.task.child_session_id = Some(link.child.clone());
                }
                if link.owner.is_none() {
                    ctx.new_children
                        .push((link.child.clone(), entry.id.clone()));
                }
            }
        } else if entry.linked_child.is_none()
            && let Some(link) = links.first()
        {
            entry.linked_child = Some(link.child.clone());
            if link.owner.is_none() {
                pending_link = Some(link.child.clone());
            }
        }
        let merge_dialect = entry.merges_into_child;

        let origin = if ctx.is_call {
            FrameOrigin::ToolCall
        } else {
            FrameOrigin::ToolCallUpdate
        };
        ctx.out.push(TrackerEvent::Tool(Box::new(entry.frame(
            ctx.row_session,
            status.as_deref(),
            is_new,
            origin,
        ))));
        if let Some(child) = pending_link {
            if self.pending_links.len() >= MAX_PENDING_LINKS {
                self.pending_links.clear();
            }
            self.pending_links.insert(child, id.clone());
        }
        if let Some(row_id) = self.linked_row_of(&id) {
            self.propagate_link(ctx, &row_id, status.as_deref(), merge_dialect);
        }
        self.reclassify(&id, ctx.seq);
    }

    /// For a linking call without a link block in this frame: the row it linked before.
    fn linked_row_of(&self, id: &str) -> Option<String> {
        let child = self.entries.get(id)?.linked_child.as_deref()?;
        self.subagent_for_child(child)
            .filter(|row| *row != id)
            .map(str::to_owned)
    }

    /// The linking call's status becomes the child row's tool status.
    fn propagate_link(
        &mut self,
        ctx: &mut FrameCtx<'_>,
        row_id: &str,
        status: Option<&str>,
        merge_dialect: Option<Dialect>,
    ) {
        let Some(row) = self.entries.get_mut(row_id) else {
            return;
        };
        let Some(subagent) = row.subagent.as_mut() else {
            return;
        };
        if let Some(dialect) = merge_dialect {
            dialect::enrich(&mut subagent.task, dialect, ctx.view);
        }
        if status.is_none() && merge_dialect.is_none() {
            return;
        }
        row.record_status(status);
        ctx.out.push(TrackerEvent::Tool(Box::new(row.frame(
            ctx.row_session,
            status,
            false,
            FrameOrigin::SessionLink,
        ))));
        self.reclassify(row_id, ctx.seq);
    }
}

/// DESIGN 3.4: explicit status verbatim; a `tool_call`, or a status-less update carrying
/// title/rawInput/content/locations, is `in_progress`; Claude's async dispatch of a
/// subagent is `completed`.
fn frame_status(view: &FrameView<'_>, is_call: bool, is_subagent: bool) -> Option<String> {
    let mut status = view
        .status
        .map(str::to_owned)
        .or_else(|| (is_call || view.carries_payload()).then(|| "in_progress".to_owned()));
    if is_subagent
        && view.is_async_launch()
        && !status.as_deref().is_some_and(is_terminal_tool_status)
    {
        status = Some("completed".to_owned());
    }
    status
}

/// Codex fields into a card. `rank_merge`: on `tool_call` frames the agent status only
/// moves up; on updates it is replaced.
fn codex_enrich(task: &mut SubagentTask, signal: &CodexSignal, rank_merge: bool) {
    match signal {
        CodexSignal::Spawn(spawn) => {
            // DESIGN 3.3: the prompt is the description, falling back to the message.
            task.fill_inputs(&SubagentInputs {
                description: spawn.prompt.clone().or_else(|| spawn.message.clone()),
                prompt: spawn.prompt.clone(),
                subagent_type: None,
            });
            fill(&mut task.child_session_id, spawn.child.clone());
            if let Some(model) = spawn.model.as_deref() {
                task.model = Some(model.to_owned());
            }
            merge_codex_status(task, spawn.status.as_deref(), rank_merge);
        }
        CodexSignal::Lifecycle(CodexLifecycle {
            child,
            name,
            activity,
        }) => {
            task.fill_inputs(&SubagentInputs {
                description: name.clone(),
                prompt: None,
                subagent_type: name.clone(),
            });
            fill(&mut task.child_session_id, child.clone());
            merge_codex_status(task, Some(activity), rank_merge);
        }
        CodexSignal::Control(_) => {}
    }
}

fn merge_codex_status(task: &mut SubagentTask, status: Option<&str>, rank_merge: bool) {
    let Some(status) = status.filter(|s| !s.is_empty()) else {
        return;
    };
    if rank_merge
        && let Some(current) = task.status.as_deref()
        && codex::status_rank(status) < codex::status_rank(current)
    {
        return;
    }
    task.set_status(Some(status));
}

impl Tracker {
    pub fn new() -> Self {
        Self {
            pending_from_client: PendingRequests::new(MAX_PENDING_REQUESTS),
            pending_from_agent: PendingRequests::new(MAX_PENDING_REQUESTS),
            rows: HashMap::new(),
            children: HashMap::new(),
            opened: HashSet::new(),
            loading: HashSet::new(),
            parked_cursor: HashMap::new(),
            seq: 0,
            stats: TrackerStats::default(),
        }
    }

    /// Running totals since creation.
    pub fn stats(&self) -> TrackerStats {
        self.stats
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
                TrackerEvent::Ignored { .. } => self.stats.ignored += 1,
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
                if let Some(open) = SessionOpenMethod::from_method(method) {
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
                if method == "cursor/task" {
                    self.on_cursor_task(params, out);
                }
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
            (Direction::AgentToClient, "cursor/task") => self.on_cursor_task(params, out),
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
                // Cursor reuses wire ids across turns: unmatched side requests expire.
                self.parked_cursor
                    .retain(|_, parked| parked.session.as_ref().is_some_and(|s| *s != session));
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

    fn route(&self, wire_session: &str) -> Route {
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

    fn register_child(&mut self, child: String, row_session: &str, row_id: String) {
        if child == row_session
            || self.opened.contains(&child)
            || self.children.contains_key(&child)
            || self.children.len() >= MAX_CHILD_SESSIONS
        {
            return;
        }
        self.children.insert(
            child,
            ChildLink {
                row_session: row_session.to_owned(),
                row_id,
            },
        );
    }

    fn on_session_update(&mut self, params: &Value, out: &mut Vec<TrackerEvent>) {
        let wire_session = text_at(params, "sessionId").unwrap_or_default();
        let Some(update) = params.get("update").filter(|u| u.is_object()) else {
            out.push(TrackerEvent::Ignored {
                direction: Direction::AgentToClient,
                reason: IgnoredReason::MalformedUpdate,
            });
            return;
        };
        let Some(kind) = text_at(update, "sessionUpdate") else {
            out.push(TrackerEvent::Ignored {
                direction: Direction::AgentToClient,
                reason: IgnoredReason::MalformedUpdate,
            });
            return;
        };
        let is_tool = matches!(kind, "tool_call" | "tool_call_update");
        if !wire_session.is_empty() {
            let route = self.route(wire_session);
            if self.loading.contains(wire_session) || self.loading.contains(&route.row_session) {
                out.push(TrackerEvent::Ignored {
                    direction: Direction::AgentToClient,
                    reason: IgnoredReason::LoadReplay,
                });
                return;
            }
        } else if kind == "subagent_update" {
            // Like a tool frame without a session: reported, never accumulated, so the
            // writer counts the missing identity (AC-2).
            out.push(match unkeyed_native_frame(update) {
                Some(frame) => TrackerEvent::Tool(Box::new(frame)),
                None => TrackerEvent::Ignored {
                    direction: Direction::AgentToClient,
                    reason: IgnoredReason::MissingSessionId,
                },
            });
            return;
        } else if !is_tool {
            // Tool frames still go out so the writer can count the missing identity.
            out.push(TrackerEvent::Ignored {
                direction: Direction::AgentToClient,
                reason: IgnoredReason::MissingSessionId,
            });
            return;
        }
        match kind {
            "tool_call" => self.on_tool(wire_session, update, true, out),
            "tool_call_update" => self.on_tool(wire_session, update, false, out),
            "subagent_update" => self.on_subagent_update(wire_session, update, out),
            other => {
                let route = self.route(wire_session);
                out.push(TrackerEvent::SessionUpdate {
                    acp_session_id: route.row_session,
                    wire_session_id: wire_session.to_owned(),
                    update_kind: other.to_owned(),
                    parent_tool_call_id: route.nesting_parent,
                });
            }
        }
    }

    fn on_tool(
        &mut self,
        wire_session: &str,
        update: &Value,
        is_call: bool,
        out: &mut Vec<TrackerEvent>,
    ) {
        let view = FrameView::parse(update);
        let wire_id = match view.tool_call_id {
            Some(id) if !wire_session.is_empty() => id,
            _ => {
                out.push(TrackerEvent::Tool(Box::new(unkeyed_frame(
                    wire_session,
                    &view,
                    is_call,
                ))));
                return;
            }
        };
        let route = self.route(wire_session);
        let fanout_child = dialect::fanout_child(&view);
        let mut children: Vec<&str> = Vec::new();
        for child in fanout_child
            .as_deref()
            .into_iter()
            .chain(view.session_links())
        {
            if !children.contains(&child) && child != wire_session && child != route.row_session {
                children.push(child);
            }
        }
        let links: Vec<LinkTarget> = children
            .into_iter()
            .map(|child| LinkTarget {
                child: child.to_owned(),
                owner: self.children.get(child).cloned(),
            })
            .collect();
        let parked = if is_call {
            self.take_parked_cursor(wire_session, wire_id)
        } else {
            None
        };
        let key = WireKey::new(wire_session, wire_id);
        // codex-acp 2.x titles only the launch (`spawnAgent`, `wait`, …); its completing
        // update carries the child thread, model and agentsStates without a title, so
        // Codex parsing sees the title the call already has.
        let known_title = if view.title.is_none() && !is_call {
            self.rows
                .get(&route.row_session)
                .and_then(|row| row.current_title(&key))
        } else {
            None
        };
        let signal = codex::parse(&FrameView {
            title: view.title.or(known_title.as_deref()),
            ..view
        });
        let row = self.rows.entry(route.row_session.clone()).or_default();
        let mut ctx = FrameCtx {
            row_session: &route.row_session,
            nesting_parent: route.nesting_parent.as_deref(),
            key: &key,
            view: &view,
            is_call,
            seq: &mut self.seq,
            out,
            new_children: Vec::new(),
        };
        row.apply_tool(&mut ctx, signal, parked, &links);
        let new_children = ctx.new_children;
        for (child, row_id) in new_children {
            self.register_child(child, &route.row_session, row_id);
        }
    }

    /// ACP's `subagent_update`: `update.sessionId` is the child, the outer id the parent.
    fn on_subagent_update(
        &mut self,
        wire_session: &str,
        update: &Value,
        out: &mut Vec<TrackerEvent>,
    ) {
        let route = self.route(wire_session);
        let child = text_at(update, "sessionId").filter(|child| {
            *child != wire_session
                && *child != route.row_session
                && (self.children.contains_key(*child) || !self.opened.contains(*child))
        });
        let Some(child) = child else {
            out.push(TrackerEvent::Ignored {
                direction: Direction::AgentToClient,
                reason: IgnoredReason::InvalidSubagentUpdate,
            });
            return;
        };
        let (row_session, existing, nesting_parent) = match self.children.get(child) {
            Some(link) => (link.row_session.clone(), Some(link.row_id.clone()), None),
            None => (route.row_session.clone(), None, route.nesting_parent),
        };
        let seq = &mut self.seq;
        let row = self.rows.entry(row_session.clone()).or_default();
        let existing = existing
            .filter(|id| row.entries.contains_key(id))
            .or_else(|| row.subagent_for_child(child).map(str::to_owned));
        let (id, is_new, status) = match existing {
            Some(id) => (id, false, None),
            None => {
                let key = WireKey::new(wire_session, child);
                let id = row.allocate_id(&key, &row_session, None);
                let mut entry = ToolEntry::new(id.clone(), key);
                entry.parent = nesting_parent;
                entry.subagent = Some(Subagent {
                    dialect: Dialect::AcpNative,
                    task: SubagentTask {
                        child_session_id: Some(child.to_owned()),
                        ..SubagentTask::default()
                    },
                });
                // A tool call that linked the child before it was announced.
                let linked_status = row
                    .pending_links
                    .remove(child)
                    .and_then(|linking| row.entries.get(&linking))
                    .and_then(|linking| linking.last_status.clone());
                entry.record_status(linked_status.as_deref());
                row.insert_entry(entry, false, seq);
                (id, true, linked_status)
            }
        };
        let Some(entry) = row.entries.get_mut(&id) else {
            return;
        };
        match update.get("title") {
            Some(Value::String(title)) if !title.is_empty() => entry.title = Some(title.clone()),
            Some(Value::Null) => entry.title = None,
            _ => {}
        }
        if let Some(subagent) = entry.subagent.as_mut() {
            patch_native(&mut subagent.task, update);
        }
        out.push(TrackerEvent::Tool(Box::new(entry.frame(
            &row_session,
            status.as_deref(),
            is_new,
            FrameOrigin::SubagentUpdate,
        ))));
        row.reclassify(&id, seq);
        self.register_child(child.to_owned(), &row_session, id);
    }

    fn on_cursor_task(&mut self, params: &Value, out: &mut Vec<TrackerEvent>) {
        let Some(tool_call_id) = text_at(params, "toolCallId") else {
            out.push(TrackerEvent::Ignored {
                direction: Direction::AgentToClient,
                reason: IgnoredReason::CursorTaskWithoutToolCallId,
            });
            return;
        };
        let field = |key: &str| text_at(params, key).map(str::to_owned);
        let task = ParkedCursorTask {
            session: field("sessionId"),
            seq: self.seq,
            agent_id: field("agentId"),
            description: field("description"),
            model: field("model"),
            prompt: field("prompt"),
        };
        let Some((row_session, id)) = self.find_tool_call(task.session.as_deref(), tool_call_id)
        else {
            self.park_cursor_task(tool_call_id, task);
            return;
        };
        let seq = &mut self.seq;
        let Some(row) = self.rows.get_mut(&row_session) else {
            return;
        };
        let Some(entry) = row.entries.get_mut(&id) else {
            return;
        };
        let Some(subagent) = entry.subagent.as_mut() else {
            out.push(TrackerEvent::Ignored {
                direction: Direction::AgentToClient,
                reason: IgnoredReason::CursorTaskForNonSubagent,
            });
            return;
        };
        task.apply(&mut subagent.task);
        entry.record_status(Some("in_progress"));
        out.push(TrackerEvent::Tool(Box::new(entry.frame(
            &row_session,
            Some("in_progress"),
            false,
            FrameOrigin::CursorTask,
        ))));
        row.reclassify(&id, seq);
    }

    /// The row of a wire tool call id: in the given session, else the most recent match.
    fn find_tool_call(
        &self,
        session: Option<&str>,
        tool_call_id: &str,
    ) -> Option<(String, String)> {
        if let Some(session) = session {
            let route = self.route(session);
            let row = self.rows.get(&route.row_session)?;
            let id = row.current(&WireKey::new(session, tool_call_id))?;
            return Some((route.row_session, id.to_owned()));
        }
        self.rows
            .iter()
            .flat_map(|(row_session, row)| {
                row.by_wire
                    .iter()
                    .filter(|(key, _)| key.tool_call_id == tool_call_id)
                    .filter_map(|(_, ids)| ids.last())
                    .filter_map(move |id| row.entries.get(id).map(|entry| (row_session, entry)))
            })
            .max_by_key(|(_, entry)| entry.created)
            .map(|(row_session, entry)| (row_session.clone(), entry.id.clone()))
    }

    fn park_cursor_task(&mut self, tool_call_id: &str, task: ParkedCursorTask) {
        if let Some(parked) = self.parked_cursor.get_mut(tool_call_id) {
            parked.merge(task);
            return;
        }
        if self.parked_cursor.len() >= MAX_PARKED_CURSOR_TASKS
            && let Some(oldest) = self
                .parked_cursor
                .iter()
                .min_by_key(|(_, parked)| parked.seq)
                .map(|(id, _)| id.clone())
        {
            self.parked_cursor.remove(&oldest);
        }
        self.seq += 1;
        self.parked_cursor.insert(
            tool_call_id.to_owned(),
            ParkedCursorTask {
                seq: self.seq,
                ..task
            },
        );
    }

    fn take_parked_cursor(
        &mut self,
        wire_session: &str,
        tool_call_id: &str,
    ) -> Option<ParkedCursorTask> {
        let parked = self.parked_cursor.get(tool_call_id)?;
        if parked
            .session
            .as_deref()
            .is_some_and(|session| session != wire_session)
        {
            return None;
        }
        self.parked_cursor.remove(tool_call_id)
    }
}

/// Patch semantics of ACP `subagent_update`: absent = unchanged, `null` = cleared.
fn patch_native(task: &mut SubagentTask, update: &Value) {
    match update.get("description") {
        Some(Value::String(description)) => description.clone_into(&mut task.description),
        Some(Value::Null) => task.description.clear(),
        _ => {}
    }
    if let Some(state) = update
        .get("state")
        .and_then(|state| text(state.get("state")))
    {
        task.set_status(Some(state));
    }
}

/// An ACP-native `subagent_update` announcing a child without naming the parent
/// session: reported like [`unkeyed_frame`], its row id being the child session id.
fn unkeyed_native_frame(update: &Value) -> Option<ToolFrame> {
    let child = text_at(update, "sessionId")?;
    let mut task = SubagentTask {
        child_session_id: Some(child.to_owned()),
        ..SubagentTask::default()
    };
    patch_native(&mut task, update);
    Some(ToolFrame {
        acp_session_id: String::new(),
        tool_call_id: child.to_owned(),
        wire_tool_call_id: child.to_owned(),
        wire_session_id: String::new(),
        parent_tool_call_id: None,
        title: text_at(update, "title").map(str::to_owned),
        kind: None,
        tool_status: None,
        last_tool_status: None,
        is_new: true,
        subagent: Some(task),
        dialect: Some(Dialect::AcpNative),
        origin: FrameOrigin::SubagentUpdate,
    })
}

/// A tool frame without session or tool call id: reported (so the writer can count the
/// missing identity) but never accumulated.
fn unkeyed_frame(wire_session: &str, view: &FrameView<'_>, is_call: bool) -> ToolFrame {
    let subagent = if is_call {
        dialect::recognise(view).map(|(dialect, mut task)| {
            dialect::enrich(&mut task, dialect, view);
            (dialect, task)
        })
    } else {
        None
    };
    let status = frame_status(view, is_call, subagent.is_some());
    ToolFrame {
        acp_session_id: wire_session.to_owned(),
        tool_call_id: view.tool_call_id.unwrap_or_default().to_owned(),
        wire_tool_call_id: view.tool_call_id.unwrap_or_default().to_owned(),
        wire_session_id: wire_session.to_owned(),
        parent_tool_call_id: view.claude_parent().map(str::to_owned),
        title: view.title.map(str::to_owned),
        kind: view.kind.map(str::to_owned),
        tool_status: status.clone(),
        last_tool_status: status,
        is_new: true,
        dialect: subagent.as_ref().map(|(dialect, _)| *dialect),
        subagent: subagent.map(|(_, task)| task),
        origin: if is_call {
            FrameOrigin::ToolCall
        } else {
            FrameOrigin::ToolCallUpdate
        },
    }
}
