//! A dialect's state on one connection ([`DialectState`]): what it correlates across
//! frames, kept in the dialect's own module. The tracker creates each dialect's state
//! once per connection ([`DialectRules::state`](super::DialectRules::state)) and calls its
//! hooks while that dialect reads the connection ([`Rules::reads`]); ACP's own subagent
//! sessions are such a state too, on every connection.
//!
//! The hooks see the tracker's rows ([`RowSession`], [`ToolEntry`]): a state may create
//! rows (several for one call, its ids derived from the wire id with
//! [`RowSession::allocate_id`]), route a frame to a row other than its wire key's, fold a
//! frame into another row and stop it, and move other rows' agent statuses. Every row it
//! changes it reports with [`ToolEntry::frame`] into the frame's events, and it ends with
//! [`RowSession::reclassify`] so the eviction caps hold.

use std::collections::HashMap;
use std::collections::HashSet;
use std::fmt;

use serde_json::Value;

use super::{Dialect, Rules};
use crate::event::{IgnoredReason, TrackerEvent};
use crate::jsonrpc::Direction;
use crate::tracker::children::ChildSessions;
use crate::tracker::rows::{RowSession, Subagent};
use crate::tracker::tool::FrameCtx;

/// One dialect's state on one connection. Every hook has a default that does nothing, so a
/// state implements only what its agent needs.
///
/// A keyed tool frame (`tool_call` / `tool_call_update` with a session and a tool call id)
/// passes three hooks, in this order and in registry order across the states: [`plan`]
/// (before the generic path: which row, whether it may be recognised, its parent, or
/// that the state applied it itself), [`enrich`] (the payload of the subagent row it went
/// to, after the rules' `enrich`) and [`after`] (the row was emitted: rows the frame
/// reports on). What `plan` learnt about the frame a state may keep in itself until
/// `after`; `plan` is called for every keyed frame, so it resets what it keeps.
///
/// [`plan`]: DialectState::plan
/// [`enrich`]: DialectState::enrich
/// [`after`]: DialectState::after
pub(crate) trait DialectState: fmt::Debug + Send + Sync {
    /// Before the generic path applies a keyed tool frame. The default leaves the plan as
    /// it is: the wire key's row (created if new), recognised by the rules on a launch.
    fn plan(&mut self, _rows: &mut RowSession, _frame: &mut FrameCtx<'_>, _plan: &mut FramePlan) {}

    /// The payload of the subagent row the frame went to (of any dialect: check
    /// `subagent.dialect` when only your own rows are yours), after the rules' `enrich`.
    fn enrich(&mut self, _subagent: &mut Subagent, _frame: &FrameCtx<'_>) {}

    /// After the frame's row was emitted (not called for a frame a `plan` stopped).
    fn after(&mut self, _rows: &mut RowSession, _frame: &mut FrameCtx<'_>) {}

    /// A `session/update` other than a tool call; `wire_session` is empty when it has no
    /// session id. [`Flow::Stop`]: the update was this state's, so no later state, row
    /// signal or session-update event sees it.
    fn session_update(
        &mut self,
        _kind: &str,
        _wire_session: &str,
        _update: &Value,
        _conn: &mut Conn<'_>,
    ) -> Flow {
        Flow::Continue
    }

    /// An agent-to-client request or notification other than `session/update` (a side
    /// request of the agent's own).
    fn agent_message(&mut self, _method: &str, _params: &Value, _conn: &mut Conn<'_>) {}

    /// The response to a `session/prompt` of `session` arrived: its turn ended.
    fn prompt_ended(&mut self, _session: &str) {}
}

/// What happens to a keyed tool frame, as the states planned it.
#[derive(Debug, Default)]
pub(crate) struct FramePlan {
    /// The row it goes to.
    pub target: Target,
    /// Whether, and as what, its row may be recognised as a subagent.
    pub recognition: Recognition,
    /// A parent row the state knows, ahead of the rules' `parent` (a child session's
    /// traffic still nests under the child's row first; a row is never its own parent).
    pub parent: Option<String>,
}

/// The row a keyed tool frame goes to.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) enum Target {
    /// The current row of the frame's wire key, created if there is none.
    #[default]
    Wire,
    /// This row, which the state found or created (`created`: the frame is its first).
    Row { id: String, created: bool },
    /// The state applied the frame itself, or passed it over with a reason: nothing more.
    Handled,
}

/// Recognition of a keyed tool frame's row (on a `tool_call`, or the first frame of a row).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recognition {
    /// By the active rules' launch signals.
    #[default]
    ByRules,
    /// As a subagent of this dialect, whatever the launch signals say.
    As(Dialect),
    /// Not on this frame (a control call that only reports on other rows).
    Never,
}

/// Whether a session update goes on to the generic path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    Continue,
    Stop,
}

/// The whole connection, for hooks that are not about one tool frame.
pub(crate) struct Conn<'a> {
    /// Tool-call rows per row session.
    pub rows: &'a mut HashMap<String, RowSession>,
    /// Child sessions and the rows that own their traffic.
    pub children: &'a mut ChildSessions,
    /// Sessions the client opened (never anyone's child).
    pub opened: &'a HashSet<String>,
    /// Which dialects read the connection.
    pub rules: Rules,
    /// The tracker's sequence counter (creation order of rows and parked items).
    pub seq: &'a mut u64,
    /// The events of the line under way.
    pub out: &'a mut Vec<TrackerEvent>,
}

impl Conn<'_> {
    /// Reports that an agent-to-client message was passed over, and why.
    pub(crate) fn ignore(&mut self, reason: IgnoredReason) {
        self.out.push(TrackerEvent::Ignored {
            direction: Direction::AgentToClient,
            reason,
        });
    }
}

/// Every dialect state of one connection, ACP's subagent sessions first, then the
/// registered dialects' in registry order.
#[derive(Debug)]
pub(crate) struct States(Vec<(Dialect, Box<dyn DialectState>)>);

impl States {
    pub(crate) fn new() -> Self {
        let mut states: Vec<(Dialect, Box<dyn DialectState>)> = vec![(
            Dialect::ACP_NATIVE,
            Box::new(super::native::NativeSessions::default()),
        )];
        states.extend(
            super::registered()
                .filter_map(|(dialect, rules)| Some((dialect, rules.state(dialect)?))),
        );
        Self(states)
    }

    /// The states of the dialects that read the connection, in order.
    pub(crate) fn active(
        &mut self,
        rules: Rules,
    ) -> impl Iterator<Item = &mut Box<dyn DialectState>> {
        self.0
            .iter_mut()
            .filter(move |(dialect, _)| rules.reads(*dialect))
            .map(|(_, state)| state)
    }
}
