//! The tool-call path: one `tool_call` / `tool_call_update` through plan (the dialect
//! states: which row, whether it may be recognised, or applied already), resolve (which
//! row), recognise (on the launch), enrich (by the row's own dialect, then the states),
//! link (child sessions) and emit (the [`ToolFrame`] after the frame).

use serde_json::Value;

use super::Tracker;
use super::children::{ChildLink, Route};
use super::rows::{MAX_PENDING_LINKS, RowSession, Subagent, ToolEntry, WireKey};
use crate::dialect::state::{FramePlan, Recognition, States, Target};
use crate::dialect::{self, Dialect, Rules};
use crate::event::{FrameOrigin, IgnoredReason, ToolFrame, TrackerEvent};
use crate::frame::FrameView;
use crate::jsonrpc::Direction;
use crate::metadata::is_terminal_tool_status;
use crate::subagent::SubagentTask;

/// One keyed tool frame on its way through the tracker, as the dialect states see it.
pub(crate) struct FrameCtx<'a> {
    /// The session its rows belong to.
    pub row_session: &'a str,
    /// The child's current row, when the frame is a child session's traffic.
    pub nesting_parent: Option<&'a str>,
    /// Its (wire session, wire tool call id).
    pub key: &'a WireKey,
    pub view: &'a FrameView<'a>,
    /// A `tool_call` (else a `tool_call_update`).
    pub is_call: bool,
    pub rules: Rules,
    /// The tracker's sequence counter (creation order).
    pub seq: &'a mut u64,
    /// The events of the line.
    pub out: &'a mut Vec<TrackerEvent>,
    /// Children this frame made a row the owner of: (child session, row id).
    pub new_children: Vec<(String, String)>,
}

impl FrameCtx<'_> {
    /// Reports that the frame was passed over, and why.
    pub(crate) fn ignore(&mut self, reason: IgnoredReason) {
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
        let route = self.children.route(wire_session);
        let links = self.links(wire_session, &route, &view);
        let key = WireKey::new(wire_session, wire_id);
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
        let mut plan = FramePlan::default();
        for state in self.states.active(self.rules) {
            state.plan(row, &mut ctx, &mut plan);
        }
        if plan.target == Target::Handled {
            return;
        }
        row.apply_frame(&mut ctx, plan, &mut self.states, &links);
        for state in self.states.active(self.rules) {
            state.after(row, &mut ctx);
        }
        for (child, row_id) in ctx.new_children {
            self.children.register_owned(
                &child,
                wire_session,
                &route.row_session,
                row_id,
                &self.opened,
            );
        }
    }

    /// The child sessions a frame links (a dialect's own child field, session content).
    fn links(&self, wire_session: &str, route: &Route, view: &FrameView<'_>) -> Vec<LinkTarget> {
        let own_child = self.rules.child_session(view);
        let mut children: Vec<&str> = Vec::new();
        for child in own_child.as_deref().into_iter().chain(view.session_links()) {
            if !children.contains(&child) && child != wire_session && child != route.row_session {
                children.push(child);
            }
        }
        children
            .into_iter()
            .map(|child| LinkTarget {
                child: child.to_owned(),
                owner: self.children.link(child).cloned(),
            })
            .collect()
    }
}

impl RowSession {
    /// Resolve, recognise, enrich, link, emit.
    fn apply_frame(
        &mut self,
        ctx: &mut FrameCtx<'_>,
        plan: FramePlan,
        states: &mut States,
        links: &[LinkTarget],
    ) {
        let (id, is_new) = self.resolve(ctx, plan.target);
        // Lookups that need the whole session, before borrowing the entry.
        let parent = self.frame_parent(ctx, plan.parent, &id);
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
        if plan.recognition != Recognition::Never && (ctx.is_call || is_new) {
            recognise(entry, ctx, plan.recognition, owned_link.as_deref());
        }
        if let Some(subagent) = entry.subagent.as_mut() {
            dialect::enrich(&mut subagent.task, subagent.dialect, view);
            for state in states.active(ctx.rules) {
                state.enrich(subagent, ctx);
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

    /// The row id of a frame's target and whether the frame is its first.
    fn resolve(&mut self, ctx: &mut FrameCtx<'_>, target: Target) -> (String, bool) {
        if let Target::Row { id, created } = target {
            return (id, created);
        }
        if let Some(id) = self.current(ctx.key) {
            return (id.to_owned(), false);
        }
        let id = self.allocate_id(ctx.key, ctx.row_session, None);
        let entry = ToolEntry::new(id.clone(), ctx.key.clone());
        self.insert_entry(entry, true, ctx.seq);
        (id, true)
    }

    /// A frame's parent: a child session's traffic belongs under the child's current row
    /// (DESIGN 3.6, whatever else it names); else the parent a dialect's state knows
    /// (another row it correlated), else the parent tool call the rules read, as emitted
    /// in this session. Never the row itself.
    fn frame_parent(
        &self,
        ctx: &FrameCtx<'_>,
        planned: Option<String>,
        id: &str,
    ) -> Option<String> {
        if let Some(nesting) = ctx.nesting_parent {
            return Some(nesting.to_owned());
        }
        planned.filter(|parent| parent != id).or_else(|| {
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

/// Recognition: on the launch frame only (or as a dialect's state correlated it). A
/// recognised call linking a child that already has its row enriches that row instead.
fn recognise(
    entry: &mut ToolEntry,
    ctx: &FrameCtx<'_>,
    recognition: Recognition,
    owned_link: Option<&str>,
) {
    if entry.subagent.is_some() || entry.merges_into_child.is_some() {
        return;
    }
    if let Recognition::As(dialect) = recognition {
        entry.subagent = Some(Subagent {
            dialect,
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
/// dialect's rule (a status-less background dispatch) is `completed`.
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
