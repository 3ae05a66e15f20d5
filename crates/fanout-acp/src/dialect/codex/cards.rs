//! Codex's state on one connection ([`CodexCards`]): codex-acp's frames correlated across
//! wire ids. A spawn's child thread is often known only on its completing update; a v2
//! lifecycle frame on another wire id (`subagent-completed-…`) or a control's
//! `agentsStates` updates the row (the "card") of that child and never creates one; a
//! wire id reused for another child gets a new row.

use std::collections::HashMap;

use super::{CodexSignal, enrich_from_signal, merge_status, parse};
use crate::dialect::Dialect;
use crate::dialect::state::{DialectState, FramePlan, Recognition, Target};
use crate::event::{FrameOrigin, IgnoredReason, TrackerEvent};
use crate::frame::FrameView;
use crate::tracker::rows::{MAX_PENDING_LINKS, RowSession, Subagent, ToolEntry, WireKey};
use crate::tracker::tool::FrameCtx;

/// Codex lifecycle wire ids folded into another row, per session.
const MAX_CODEX_ALIASES: usize = MAX_PENDING_LINKS;

/// The tag of an emitted id that a reused wire id gets for another child.
const REUSED_ID_TAG: &str = "codex-subagent";

/// Where a Codex frame goes.
enum CodexRoute {
    /// Fold into a card of this wire id.
    Own(String),
    /// Fold into a card announced on another wire id.
    Foreign(String),
    /// A new card with this emitted id.
    New(String),
    /// A frame for no known child that would only invent a row.
    Suppress,
    /// Not a Codex card frame: the ordinary path.
    Ordinary,
}

/// The cards' correlation state of one connection.
#[derive(Debug)]
pub(super) struct CodexCards {
    /// The Codex dialect (the cards' rows carry it).
    me: Dialect,
    /// Wire ids of lifecycle calls folded into another row, per row session.
    aliases: HashMap<String, HashMap<WireKey, String>>,
    /// What the frame under way says in Codex terms (spawn or lifecycle).
    signal: Option<CodexSignal>,
    /// The `(child thread, agent status)` pairs of the control frame under way.
    controls: Option<Vec<(String, String)>>,
}

impl CodexCards {
    pub(super) fn new(me: Dialect) -> Self {
        Self {
            me,
            aliases: HashMap::new(),
            signal: None,
            controls: None,
        }
    }
}

impl DialectState for CodexCards {
    fn plan(&mut self, rows: &mut RowSession, frame: &mut FrameCtx<'_>, plan: &mut FramePlan) {
        let (controls, signal) = match self.parse(rows, frame) {
            Some(CodexSignal::Control(states)) => (Some(states), None),
            other => (None, other),
        };
        self.signal = None;
        self.controls = None;
        let Some(signal) = signal else {
            if !frame.is_call && self.is_alias(frame.row_session, frame.key) {
                frame.ignore(IgnoredReason::CodexLifecycleFollowUp);
                plan.target = Target::Handled;
                return;
            }
            if controls.is_some() {
                plan.recognition = Recognition::Never;
            }
            self.controls = controls;
            return;
        };
        match self.route(rows, frame, &signal) {
            CodexRoute::Suppress => {
                frame.ignore(IgnoredReason::UnmatchedCodexLifecycle);
                plan.target = Target::Handled;
                return;
            }
            CodexRoute::Foreign(id) => {
                self.fold_foreign(rows, frame, &id, &signal);
                plan.target = Target::Handled;
                return;
            }
            CodexRoute::Own(id) => {
                plan.target = Target::Row { id, created: false };
                plan.recognition = Recognition::As(self.me);
            }
            CodexRoute::New(id) => {
                let entry = ToolEntry::new(id.clone(), frame.key.clone());
                rows.insert_entry(entry, true, frame.seq);
                plan.target = Target::Row { id, created: true };
                plan.recognition = Recognition::As(self.me);
            }
            CodexRoute::Ordinary => {}
        }
        plan.parent = self.sender_card(rows, &signal);
        self.signal = Some(signal);
    }

    fn enrich(&mut self, subagent: &mut Subagent, frame: &FrameCtx<'_>) {
        if let Some(signal) = &self.signal {
            enrich_from_signal(&mut subagent.task, signal, frame.is_call);
        }
    }

    fn after(&mut self, rows: &mut RowSession, frame: &mut FrameCtx<'_>) {
        self.signal = None;
        if let Some(states) = self.controls.take() {
            self.apply_states(rows, frame, &states);
        }
    }
}

impl CodexCards {
    /// What the frame says in Codex terms. codex-acp 2.x titles only the launch
    /// (`spawnAgent`, `wait`, …); its completing update carries the child thread, model
    /// and agentsStates without a title, so parsing sees the title the call already has.
    fn parse(&self, rows: &RowSession, frame: &FrameCtx<'_>) -> Option<CodexSignal> {
        let view = frame.view;
        let known_title = if view.title.is_none() && !frame.is_call {
            rows.current_title(frame.key)
        } else {
            None
        };
        parse(&FrameView {
            title: view.title.or(known_title.as_deref()),
            ..*view
        })
    }

    fn is_alias(&self, row_session: &str, key: &WireKey) -> bool {
        self.aliases
            .get(row_session)
            .is_some_and(|aliases| aliases.contains_key(key))
    }

    /// The child thread of a Codex card.
    fn card_child<'e>(&self, entry: &'e ToolEntry) -> Option<&'e str> {
        let subagent = entry.subagent.as_ref()?;
        if subagent.dialect != self.me {
            return None;
        }
        subagent.task.child_session_id.as_deref()
    }

    fn is_card(&self, entry: &ToolEntry) -> bool {
        entry.dialect() == Some(self.me)
    }

    /// The oldest Codex card of a child thread.
    fn card_for_child<'r>(&self, rows: &'r RowSession, child: &str) -> Option<&'r ToolEntry> {
        rows.entries
            .values()
            .filter(|entry| self.card_child(entry) == Some(child))
            .min_by_key(|entry| entry.created)
    }

    fn new_id(rows: &RowSession, frame: &FrameCtx<'_>, child: Option<&str>) -> String {
        let tagged = child.map(|child| (REUSED_ID_TAG, child));
        rows.allocate_id(frame.key, frame.row_session, tagged)
    }

    fn route(&self, rows: &RowSession, frame: &FrameCtx<'_>, signal: &CodexSignal) -> CodexRoute {
        if let Some(target) = self
            .aliases
            .get(frame.row_session)
            .and_then(|aliases| aliases.get(frame.key))
            && rows.entries.contains_key(target)
        {
            return CodexRoute::Foreign(target.clone());
        }
        let (child, lifecycle) = match signal {
            CodexSignal::Spawn(spawn) => (spawn.child.as_deref(), None),
            CodexSignal::Lifecycle(lifecycle) => (lifecycle.child.as_deref(), Some(lifecycle)),
            CodexSignal::Control(_) => return CodexRoute::Ordinary,
        };
        let own: Vec<&ToolEntry> = rows
            .by_wire
            .get(frame.key)
            .into_iter()
            .flatten()
            .filter_map(|id| rows.entries.get(id))
            .filter(|entry| self.is_card(entry))
            .collect();
        if let Some(child) = child {
            if let Some(card) = own.iter().find(|card| self.card_child(card) == Some(child)) {
                return CodexRoute::Own(card.id.clone());
            }
            if let Some(card) = self.card_for_child(rows, child) {
                return CodexRoute::Foreign(card.id.clone());
            }
        }
        if let Some(current) = own.last() {
            if child.is_none() || self.card_child(current).is_none() || !frame.is_call {
                return CodexRoute::Own(current.id.clone());
            }
            // The wire id is reused for a different child: a new row.
            return CodexRoute::New(Self::new_id(rows, frame, child));
        }
        let ordinary_or_new = || match rows.current(frame.key) {
            Some(existing) => CodexRoute::Own(existing.to_owned()),
            None => CodexRoute::New(Self::new_id(rows, frame, child)),
        };
        let Some(lifecycle) = lifecycle else {
            return if frame.is_call {
                ordinary_or_new()
            } else {
                CodexRoute::Ordinary
            };
        };
        // Adopt the one card this frame can only mean (its child was unknown at launch).
        let candidates: Vec<&ToolEntry> = rows
            .entries
            .values()
            .filter(|entry| self.is_card(entry))
            .filter(|entry| child.is_none() || self.card_child(entry).is_none())
            .collect();
        if let [sole] = candidates.as_slice() {
            return if sole.wire == *frame.key {
                CodexRoute::Own(sole.id.clone())
            } else {
                CodexRoute::Foreign(sole.id.clone())
            };
        }
        if lifecycle.is_terminal() {
            return CodexRoute::Suppress;
        }
        if frame.is_call {
            ordinary_or_new()
        } else {
            CodexRoute::Ordinary
        }
    }

    /// A Codex frame on another wire id for a known child: updates that row only.
    fn fold_foreign(
        &mut self,
        rows: &mut RowSession,
        frame: &mut FrameCtx<'_>,
        id: &str,
        signal: &CodexSignal,
    ) {
        let Some(entry) = rows.entries.get_mut(id) else {
            return;
        };
        let aliased = entry.wire != *frame.key;
        if let Some(subagent) = entry.subagent.as_mut() {
            enrich_from_signal(&mut subagent.task, signal, frame.is_call);
        }
        let status = match signal {
            CodexSignal::Lifecycle(lifecycle) if lifecycle.is_terminal() => Some("completed"),
            CodexSignal::Lifecycle(_) => Some("in_progress"),
            _ => None,
        };
        entry.record_status(status);
        frame.out.push(TrackerEvent::Tool(Box::new(entry.frame(
            frame.row_session,
            status,
            false,
            FrameOrigin::CodexLifecycle,
        ))));
        if aliased {
            let aliases = self
                .aliases
                .entry(frame.row_session.to_owned())
                .or_default();
            if aliases.len() >= MAX_CODEX_ALIASES {
                aliases.clear();
            }
            aliases.insert(frame.key.clone(), id.to_owned());
        }
        rows.reclassify(id, frame.seq);
    }

    /// `agentsStates` of a Codex control: agent statuses of known children.
    fn apply_states(
        &self,
        rows: &mut RowSession,
        frame: &mut FrameCtx<'_>,
        states: &[(String, String)],
    ) {
        for (child, status) in states {
            let Some(id) = self.card_for_child(rows, child).map(|e| e.id.clone()) else {
                continue;
            };
            let Some(entry) = rows.entries.get_mut(&id) else {
                continue;
            };
            if let Some(subagent) = entry.subagent.as_mut() {
                merge_status(&mut subagent.task, Some(status), frame.is_call);
            }
            frame.out.push(TrackerEvent::Tool(Box::new(entry.frame(
                frame.row_session,
                None,
                false,
                FrameOrigin::CodexControl,
            ))));
        }
    }

    /// The card a nested spawn's sender thread names: that child's row.
    fn sender_card(&self, rows: &RowSession, signal: &CodexSignal) -> Option<String> {
        let CodexSignal::Spawn(spawn) = signal else {
            return None;
        };
        self.card_for_child(rows, spawn.sender.as_deref()?)
            .map(|card| card.id.clone())
    }
}
