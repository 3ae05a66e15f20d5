//! The tool-call path: one `tool_call` / `tool_call_update` through resolve (which row),
//! recognise (on the launch), enrich (by the row's own dialect), link (child sessions) and
//! emit (the [`ToolFrame`] after the frame).

use serde_json::Value;

use super::cursor::ParkedCursorTask;
use super::native::ChildLink;
use super::rows::{MAX_PENDING_LINKS, RowSession, Subagent, ToolEntry, WireKey};
use super::{Route, Tracker};
use crate::dialect::codex::{self, CodexSignal};
use crate::dialect::{self, Dialect, Rules};
use crate::event::{FrameOrigin, IgnoredReason, ToolFrame, TrackerEvent};
use crate::frame::FrameView;
use crate::jsonrpc::Direction;
use crate::metadata::is_terminal_tool_status;
use crate::subagent::SubagentTask;

/// Per-frame context handed to the row session.
pub(super) struct FrameCtx<'a> {
    pub row_session: &'a str,
    /// The child's current row, when the frame is a child session's traffic.
    pub nesting_parent: Option<&'a str>,
    pub key: &'a WireKey,
    pub view: &'a FrameView<'a>,
    pub is_call: bool,
    pub rules: Rules,
    pub seq: &'a mut u64,
    pub out: &'a mut Vec<TrackerEvent>,
    /// Children this frame made a row the owner of: (child session, row id).
    pub new_children: Vec<(String, String)>,
}

impl FrameCtx<'_> {
    pub(super) fn ignore(&mut self, reason: IgnoredReason) {
        self.out.push(TrackerEvent::Ignored {
            direction: Direction::AgentToClient,
            reason,
        });
    }

    fn origin(&self) -> FrameOrigin {
        if self.is_call {
            FrameOrigin::ToolCall
        } else {
            FrameOrigin::ToolCallUpdate
        }
    }
}

/// The row a frame goes to.
pub(super) enum Target {
    /// The entry for the wire key, created if needed.
    Wire,
    /// An existing entry, made a Codex card.
    Card(String),
    /// A new Codex card.
    NewCard(String),
}

/// A session link of a frame, with what the tracker knew about the child beforehand.
pub(super) struct LinkTarget {
    pub child: String,
    pub owner: Option<ChildLink>,
}

impl Tracker {
    pub(super) fn on_tool(
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
                let frame = unkeyed_frame(self.rules, wire_session, &view, is_call);
                out.push(TrackerEvent::Tool(Box::new(frame)));
                return;
            }
        };
        let route = self.route(wire_session);
        let links = self.links(wire_session, &route, &view);
        let parked = if is_call {
            self.cursor.take(wire_session, wire_id)
        } else {
            None
        };
        let key = WireKey::new(wire_session, wire_id);
        let signal = self.codex_signal(&route, &key, &view, is_call);
        let row = self.rows.entry(route.row_session.clone()).or_default();
        let mut ctx = FrameCtx {
            row_session: &route.row_session,
            nesting_parent: route.nesting_parent.as_deref(),
            key: &key,
            view: &view,
            is_call,
            rules: self.rules,
            seq: &mut self.seq,
            out,
            new_children: Vec::new(),
        };
        row.apply_tool(&mut ctx, signal, parked, &links);
        let new_children = ctx.new_children;
        for (child, row_id) in new_children {
            self.register_owned_child(child, wire_session, &route.row_session, row_id);
        }
    }

    /// The child sessions a frame links (fanout's `childSessionId`, session content).
    fn links(&self, wire_session: &str, route: &Route, view: &FrameView<'_>) -> Vec<LinkTarget> {
        let fanout_child = dialect::fanout_child(view);
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
        children
            .into_iter()
            .map(|child| LinkTarget {
                child: child.to_owned(),
                owner: self.native.link(child),
            })
            .collect()
    }

    /// What the frame says in Codex terms, when Codex may be speaking. codex-acp 2.x titles
    /// only the launch (`spawnAgent`, `wait`, …); its completing update carries the child
    /// thread, model and agentsStates without a title, so parsing sees the title the call
    /// already has.
    fn codex_signal(
        &self,
        route: &Route,
        key: &WireKey,
        view: &FrameView<'_>,
        is_call: bool,
    ) -> Option<CodexSignal> {
        if !self.rules.is_active(Dialect::Codex) {
            return None;
        }
        let known_title = if view.title.is_none() && !is_call {
            self.rows
                .get(&route.row_session)
                .and_then(|row| row.current_title(key))
        } else {
            None
        };
        codex::parse(&FrameView {
            title: view.title.or(known_title.as_deref()),
            ..*view
        })
    }
}

impl RowSession {
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
        let Some(target) = self.codex_target(ctx, codex.as_ref()) else {
            return;
        };
        let may_recognise = controls.is_none();
        self.apply_frame(ctx, target, codex.as_ref(), may_recognise, parked, links);
        if let Some(states) = controls {
            self.apply_codex_states(ctx, &states);
        }
    }

    /// Resolve, recognise, enrich, link, emit.
    fn apply_frame(
        &mut self,
        ctx: &mut FrameCtx<'_>,
        target: Target,
        codex: Option<&CodexSignal>,
        may_recognise: bool,
        parked: Option<ParkedCursorTask>,
        links: &[LinkTarget],
    ) {
        let (id, is_new, as_card) = self.resolve(ctx, target);
        // Lookups that need the whole session, before borrowing the entry.
        let parent = self.frame_parent(ctx, codex, &id);
        let owned_link = self.owned_link(ctx, links, &id);
        let Some(entry) = self.entries.get_mut(&id) else {
            return;
        };
        let view = ctx.view;
        if let Some(title) = view.title {
            entry.title = Some(title.to_owned());
        }
        if let Some(kind) = view.kind {
            entry.kind = Some(kind.to_owned());
        }
        if entry.parent.is_none() {
            entry.parent = parent;
        }
        if may_recognise && (ctx.is_call || is_new) {
            recognise(entry, ctx, as_card, owned_link.as_deref());
        }
        if let Some(subagent) = entry.subagent.as_mut() {
            // The frame's own inputs win over a side request's (both only fill).
            dialect::enrich(&mut subagent.task, subagent.dialect, view);
            if let Some(parked) = &parked {
                parked.apply(&mut subagent.task);
            }
            if let Some(signal) = codex {
                codex::enrich_from_signal(&mut subagent.task, signal, ctx.is_call);
            }
        }
        let status = frame_status(view, ctx.is_call, entry.dialect());
        entry.record_status(status.as_deref());
        let pending_link = link(entry, ctx, links);
        let merge_dialect = entry.merges_into_child;
        ctx.out.push(TrackerEvent::Tool(Box::new(entry.frame(
            ctx.row_session,
            status.as_deref(),
            is_new,
            ctx.origin(),
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

    /// The row id of a frame's target, whether it is new, and whether it is a Codex card.
    fn resolve(&mut self, ctx: &mut FrameCtx<'_>, target: Target) -> (String, bool, bool) {
        match target {
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
        }
    }

    /// A frame's parent: a child session's traffic belongs under the child's current row
    /// (DESIGN 3.6, whatever else it names); else a nested Codex spawn's sender thread,
    /// else the parent tool call the dialect reads (Claude `parentToolUseId`, Qwen
    /// `parentToolCallId`), as emitted in this session.
    fn frame_parent(
        &self,
        ctx: &FrameCtx<'_>,
        codex: Option<&CodexSignal>,
        id: &str,
    ) -> Option<String> {
        if let Some(nesting) = ctx.nesting_parent {
            return Some(nesting.to_owned());
        }
        self.codex_parent(codex, id).or_else(|| {
            ctx.rules
                .parent(ctx.view)
                .map(|parent| self.emitted_for(&ctx.key.session, parent))
                .filter(|parent| parent != id)
        })
    }

    /// A link to a child that already has a row of its own (in this session).
    fn owned_link(&self, ctx: &FrameCtx<'_>, links: &[LinkTarget], id: &str) -> Option<String> {
        links.iter().find_map(|link| {
            let owner = link.owner.as_ref()?;
            (owner.row_session == ctx.row_session
                && owner.row_id != id
                && self.entries.contains_key(&owner.row_id))
            .then(|| link.child.clone())
        })
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

/// Recognition: on the launch frame only (and for Codex cards, by correlation). A
/// recognised call linking a child that already has its row enriches that row instead.
fn recognise(entry: &mut ToolEntry, ctx: &FrameCtx<'_>, as_card: bool, owned_link: Option<&str>) {
    if entry.subagent.is_some() || entry.merges_into_child.is_some() {
        return;
    }
    if as_card {
        entry.subagent = Some(Subagent {
            dialect: Dialect::Codex,
            task: SubagentTask::default(),
        });
        return;
    }
    let Some(dialect) = ctx.rules.recognise(ctx.view, ctx.is_call) else {
        return;
    };
    match owned_link {
        Some(child) => {
            entry.linked_child = Some(child.to_owned());
            entry.merges_into_child = Some(dialect);
        }
        // The payload fills from this frame in the enrichment step.
        None => {
            entry.subagent = Some(Subagent {
                dialect,
                task: SubagentTask::default(),
            });
        }
    }
}

/// Session links: a subagent row owns its children; any other call drives the tool
/// status of the child's row. Returns a child linked before it was announced.
fn link(entry: &mut ToolEntry, ctx: &mut FrameCtx<'_>, links: &[LinkTarget]) -> Option<String> {
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
        return None;
    }
    if entry.linked_child.is_some() {
        return None;
    }
    let link = links.first()?;
    entry.linked_child = Some(link.child.clone());
    link.owner.is_none().then(|| link.child.clone())
}

/// DESIGN 3.4: explicit status verbatim; a `tool_call`, or a status-less update carrying
/// title/rawInput/content/locations, is `in_progress`; a subagent's dispatch by its
/// dialect (Claude's `async_launched`) is `completed`.
pub(super) fn frame_status(
    view: &FrameView<'_>,
    is_call: bool,
    dialect: Option<Dialect>,
) -> Option<String> {
    let mut status = view
        .status
        .map(str::to_owned)
        .or_else(|| (is_call || view.carries_payload()).then(|| "in_progress".to_owned()));
    if dialect.is_some_and(|dialect| dialect::dispatched(dialect, view))
        && !status.as_deref().is_some_and(is_terminal_tool_status)
    {
        status = Some("completed".to_owned());
    }
    status
}

/// A tool frame without session or tool call id: reported (so the writer can count the
/// missing identity) but never accumulated.
fn unkeyed_frame(
    rules: Rules,
    wire_session: &str,
    view: &FrameView<'_>,
    is_call: bool,
) -> ToolFrame {
    let subagent = rules.launch(view, is_call);
    let status = frame_status(
        view,
        is_call,
        subagent.as_ref().map(|(dialect, _)| *dialect),
    );
    ToolFrame {
        acp_session_id: wire_session.to_owned(),
        tool_call_id: view.tool_call_id.unwrap_or_default().to_owned(),
        wire_tool_call_id: view.tool_call_id.unwrap_or_default().to_owned(),
        wire_session_id: wire_session.to_owned(),
        parent_tool_call_id: rules.parent(view).map(str::to_owned),
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
