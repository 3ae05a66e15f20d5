//! Codex's state: correlation of codex-acp frames across wire ids. A spawn's child thread
//! is often known only on its completing update; a v2 lifecycle frame on another wire id
//! (`subagent-completed-…`) or a control's `agentsStates` updates the row of that child and
//! never creates one; a wire id reused for another child gets a new row.

use super::rows::{MAX_PENDING_LINKS, RowSession, ToolEntry};
use super::tool::{FrameCtx, Target};
use crate::dialect::codex::{self, CodexSignal};
use crate::event::{FrameOrigin, IgnoredReason, TrackerEvent};

/// Codex lifecycle wire ids folded into another row, per session.
const MAX_CODEX_ALIASES: usize = MAX_PENDING_LINKS;

/// Where a Codex frame goes.
pub(super) enum CodexRoute {
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

impl RowSession {
    /// The ordinary target of a frame, or its Codex one (`None`: handled here already).
    pub(super) fn codex_target(
        &mut self,
        ctx: &mut FrameCtx<'_>,
        signal: Option<&CodexSignal>,
    ) -> Option<Target> {
        let Some(signal) = signal else {
            if !ctx.is_call && self.codex_aliases.contains_key(ctx.key) {
                ctx.ignore(IgnoredReason::CodexLifecycleFollowUp);
                return None;
            }
            return Some(Target::Wire);
        };
        match self.route_codex(ctx, signal) {
            CodexRoute::Suppress => {
                ctx.ignore(IgnoredReason::UnmatchedCodexLifecycle);
                None
            }
            CodexRoute::Foreign(id) => {
                self.fold_codex_foreign(ctx, &id, signal);
                None
            }
            CodexRoute::Own(id) => Some(Target::Card(id)),
            CodexRoute::New(id) => Some(Target::NewCard(id)),
            CodexRoute::Ordinary => Some(Target::Wire),
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
            codex::enrich_from_signal(&mut subagent.task, signal, ctx.is_call);
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
    pub(super) fn apply_codex_states(
        &mut self,
        ctx: &mut FrameCtx<'_>,
        states: &[(String, String)],
    ) {
        for (child, status) in states {
            let Some(id) = self.codex_card_for_child(child).map(|e| e.id.clone()) else {
                continue;
            };
            let Some(entry) = self.entries.get_mut(&id) else {
                continue;
            };
            if let Some(subagent) = entry.subagent.as_mut() {
                codex::merge_status(&mut subagent.task, Some(status), ctx.is_call);
            }
            ctx.out.push(TrackerEvent::Tool(Box::new(entry.frame(
                ctx.row_session,
                None,
                false,
                FrameOrigin::CodexControl,
            ))));
        }
    }

    /// The card a nested spawn's sender thread names: that child's row.
    pub(super) fn codex_parent(&self, signal: Option<&CodexSignal>, id: &str) -> Option<String> {
        let Some(CodexSignal::Spawn(spawn)) = signal else {
            return None;
        };
        self.codex_card_for_child(spawn.sender.as_deref()?)
            .filter(|card| card.id != id)
            .map(|card| card.id.clone())
    }
}
