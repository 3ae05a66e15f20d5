//! Child sessions: which row owns the traffic of each session that is some row's child
//! (DESIGN 3.6). A child comes to be owned by a recognised tool call that links it (a
//! `{"type":"session"}` content block, a dialect's own child field) or by the work cycle
//! ACP's subagent sessions announce for it; its traffic then belongs to the owner's
//! session, nested under the owner's row.

use std::collections::{HashMap, HashSet};

/// Child sessions remembered (never evicted before this many).
const MAX_CHILD_SESSIONS: usize = 65_536;

/// Where a frame's rows go.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    pub row_session: String,
    /// The child's current row, when the frame is a child session's traffic.
    pub nesting_parent: Option<String>,
}

/// A child session and the row its traffic belongs under.
#[derive(Debug, Clone)]
pub(crate) struct ChildLink {
    /// The top-level session the child's rows belong to.
    pub row_session: String,
    /// The row owning the child's traffic: its current work cycle, or the tool call
    /// that owns it.
    pub row_id: String,
    /// The session that announced the child (its parent on the wire).
    pub parent_session: String,
}

/// Every child session of one connection.
#[derive(Debug, Default)]
pub(crate) struct ChildSessions {
    children: HashMap<String, ChildLink>,
}

impl ChildSessions {
    pub(crate) fn link(&self, child: &str) -> Option<&ChildLink> {
        self.children.get(child)
    }

    /// Where a wire session's traffic goes: under its child row, or its own session.
    pub(crate) fn route(&self, wire_session: &str) -> Route {
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

    pub(crate) fn is_child(&self, session: &str) -> bool {
        self.children.contains_key(session)
    }

    /// Makes `child` a child session, unless it cannot be one (its own row session, a
    /// session the client opened) or already is one; whether it became one.
    pub(crate) fn register(
        &mut self,
        child: &str,
        link: ChildLink,
        opened: &HashSet<String>,
    ) -> bool {
        if child == link.row_session
            || opened.contains(child)
            || self.children.contains_key(child)
            || self.children.len() >= MAX_CHILD_SESSIONS
        {
            return false;
        }
        self.children.insert(child.to_owned(), link);
        true
    }

    /// A recognised tool call links `child`: the call's row owns its traffic.
    pub(crate) fn register_owned(
        &mut self,
        child: &str,
        wire_session: &str,
        row_session: &str,
        row_id: String,
        opened: &HashSet<String>,
    ) {
        let link = ChildLink {
            row_session: row_session.to_owned(),
            row_id,
            parent_session: wire_session.to_owned(),
        };
        self.register(child, link, opened);
    }

    /// A known child's traffic now goes under another row (its next work cycle).
    pub(crate) fn move_to_row(&mut self, child: &str, row_id: String) {
        if let Some(link) = self.children.get_mut(child) {
            link.row_id = row_id;
        }
    }
}
