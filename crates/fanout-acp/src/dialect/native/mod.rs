//! ACP's own subagent sessions (DESIGN 3.6, stabilized 2026-11-20): what one
//! `subagent_update` (or its August 2026 draft names `subagent_spawned` /
//! `subagent_state_update`) and one `session_message` / `session_message_chunk` say,
//! read leniently, and how the update's `title` and `description` map onto a row per
//! agent ([`NativeFields`], which each agent's dialect gives). The work cycles and the
//! message bookkeeping are this protocol's state on a connection, in `sessions.rs`.
//!
//! Why not the official `agent-client-protocol-schema` types (1.20.0 has `SubagentUpdate`
//! with `MaybeUndefined` patch fields in v1): that crate turns on `serde_json`'s
//! `preserve_order` feature, which Cargo unifies across the workspace and which reorders
//! every JSON object fanout writes (the message metadata, the reference agent's wire
//! bytes and the committed snapshot transcripts); its `SubagentUpdate` rejects the whole
//! update when `sessionId`, `cwd` or `additionalDirectories` has the wrong type (fanout
//! must still count the frame), and it has no draft names. [`Patch`] mirrors its
//! `MaybeUndefined` (absent = unchanged, `null` = cleared, a value replaces), and a field
//! of the wrong type reads as unchanged, as its `DefaultOnError` fields do.

mod sessions;

use serde_json::Value;

pub(crate) use sessions::NativeSessions;

use crate::frame::content_text;
use crate::json::text;
use crate::subagent::SubagentTask;

/// The `sessionUpdate` kinds that carry a subagent update.
pub(crate) const UPDATE_KINDS: [&str; 3] = [
    "subagent_update",
    "subagent_spawned",
    "subagent_state_update",
];

/// The `sessionUpdate` kinds of messages between sessions.
pub(crate) const MESSAGE_KINDS: [&str; 2] = ["session_message", "session_message_chunk"];

/// One patch field: absent = unchanged, `null` = cleared, a value replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Patch<T> {
    Unchanged,
    Cleared,
    Set(T),
}

impl<'a> Patch<&'a str> {
    /// A string field: a string replaces (an empty one clears), `null` clears, anything
    /// else (absent, a wrong type) leaves it unchanged.
    fn text(update: &'a Value, key: &str) -> Self {
        match update.get(key) {
            Some(Value::String(value)) if value.is_empty() => Patch::Cleared,
            Some(Value::String(value)) => Patch::Set(value),
            Some(Value::Null) => Patch::Cleared,
            _ => Patch::Unchanged,
        }
    }

    /// Applies the patch to a payload text field (cleared = empty).
    pub(crate) fn apply_text(self, slot: &mut String) {
        match self {
            Patch::Unchanged => {}
            Patch::Cleared => slot.clear(),
            Patch::Set(value) => value.clone_into(slot),
        }
    }

    /// Applies the patch to a stored value.
    pub(crate) fn apply(self, slot: &mut Option<String>) {
        match self {
            Patch::Unchanged => {}
            Patch::Cleared => *slot = None,
            Patch::Set(value) => *slot = Some(value.to_owned()),
        }
    }
}

/// A child's work state: `state.state` verbatim, and `stopReason` when `idle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct State<'a> {
    pub name: &'a str,
    pub stop_reason: Option<&'a str>,
}

impl<'a> State<'a> {
    /// `{"state": "<name>", "stopReason"?: …}`, or (`bare`, the draft's) `"<name>"`.
    fn read(value: Option<&'a Value>, bare: bool) -> Patch<State<'a>> {
        match value {
            None => Patch::Unchanged,
            Some(Value::Null) => Patch::Cleared,
            Some(Value::String(name)) if bare && !name.is_empty() => Patch::Set(State {
                name,
                stop_reason: None,
            }),
            Some(object @ Value::Object(_)) => match text(object.get("state")) {
                Some(name) => Patch::Set(State {
                    name,
                    stop_reason: text(object.get("stopReason")),
                }),
                None => Patch::Unchanged,
            },
            Some(_) => Patch::Unchanged,
        }
    }

    /// `idle` ends a work cycle.
    pub(crate) fn is_idle(self) -> bool {
        self.name == "idle"
    }

    /// The tool status an ending cycle settles with: `cancelled` for a cancelled stop,
    /// else `completed` (an error stop included: the child's work is over).
    pub(crate) fn settled_status(self) -> &'static str {
        if self.stop_reason == Some("cancelled") {
            "cancelled"
        } else {
            "completed"
        }
    }
}

/// One subagent update, whichever name it came under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SubagentUpdate<'a> {
    /// The child session (`sessionId`; the draft's `subagentSessionId`).
    pub child: Option<&'a str>,
    pub title: Patch<&'a str>,
    pub description: Patch<&'a str>,
    pub state: Patch<State<'a>>,
    /// Whether it is more than a lone state: an announcement says what the child is (a
    /// title, a description, capabilities, a directory, metadata) or, minimally, only
    /// names it.
    pub describes: bool,
}

impl<'a> SubagentUpdate<'a> {
    /// Reads an update of one of [`UPDATE_KINDS`].
    pub(crate) fn read(kind: &str, update: &'a Value) -> Option<Self> {
        match kind {
            "subagent_update" => {
                // Only a state, for a child the update does not otherwise describe.
                let state_only = update.get("state").is_some()
                    && update.as_object().is_some_and(|map| {
                        map.keys().all(|key| {
                            matches!(key.as_str(), "sessionUpdate" | "sessionId" | "state")
                        })
                    });
                Some(Self {
                    child: text(update.get("sessionId")),
                    title: Patch::text(update, "title"),
                    description: Patch::text(update, "description"),
                    state: State::read(update.get("state"), false),
                    describes: !state_only,
                })
            }
            // `{subagentSessionId, name, task}`: the announcement.
            "subagent_spawned" => Some(Self {
                child: text(update.get("subagentSessionId")),
                title: Patch::text(update, "name"),
                description: Patch::text(update, "task"),
                state: Patch::Unchanged,
                describes: true,
            }),
            // `{subagentSessionId, state}`.
            "subagent_state_update" => Some(Self {
                child: text(update.get("subagentSessionId")),
                title: Patch::Unchanged,
                description: Patch::Unchanged,
                state: State::read(update.get("state"), true),
                describes: false,
            }),
            _ => None,
        }
    }
}

/// A child's display metadata as patched so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NativeMeta {
    pub title: Option<String>,
    pub description: Option<String>,
}

impl NativeMeta {
    pub(crate) fn patch(&mut self, update: &SubagentUpdate<'_>) {
        update.title.apply(&mut self.title);
        update.description.apply(&mut self.description);
    }

    /// Writes the row fields this metadata maps to (DESIGN 3.6): a cleared field clears
    /// the payload's (the store keeps what it had: an empty value never blanks a row).
    pub(crate) fn apply_to(&self, task: &mut SubagentTask, fields: NativeFields, child: &str) {
        let set = |slot: &mut String, value: Option<&String>| match value {
            Some(value) => value.clone_into(slot),
            None => slot.clear(),
        };
        let field = |field: NativeField| match field {
            NativeField::Title => self.title.as_ref(),
            NativeField::Description => self.description.as_ref(),
        };
        set(
            &mut task.description,
            fields.description.iter().find_map(|f| field(*f)),
        );
        if let Some(source) = fields.subagent_type {
            set(&mut task.subagent_type, field(source));
        }
        if fields.child_is_agent_id {
            task.agent_id = Some(child.to_owned());
        }
    }
}

/// How a `subagent_update`'s `title` and `description` map onto the row, for the agent
/// on the connection (its dialect's [`native_fields`](super::DialectRules::native_fields)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NativeFields {
    /// The update fields the row's description is read from, the first present wins.
    pub description: &'static [NativeField],
    /// The update field the row's subagent type is read from, if any.
    pub subagent_type: Option<NativeField>,
    /// The child session id is also the row's agent id.
    pub child_is_agent_id: bool,
}

/// A display field of a subagent update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NativeField {
    Title,
    Description,
}

impl NativeFields {
    /// The protocol's meaning: `description` -> description, `title` -> description only
    /// when there is no description.
    pub(crate) const PROTOCOL: Self = Self {
        description: &[NativeField::Description, NativeField::Title],
        subagent_type: None,
        child_is_agent_id: false,
    };

    /// Whether the update's `description` is the row's description (so a patch of it
    /// patches a tool call that owns the child).
    pub(crate) fn description_is_description(self) -> bool {
        self.description.first() == Some(&NativeField::Description)
    }
}

/// One `session_message` (an upsert of a message between sessions) or
/// `session_message_chunk` (one content block appended to it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionMessage<'a> {
    pub message_id: &'a str,
    pub sender: Patch<&'a str>,
    pub recipient: Patch<&'a str>,
    pub content: MessageContent,
}

/// What a message update does to the message's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MessageContent {
    Unchanged,
    /// `null` or `[]`.
    Cleared,
    /// A non-empty array: the text of its text blocks.
    Replace(String),
    /// A chunk's block.
    Append(String),
}

impl<'a> SessionMessage<'a> {
    pub(crate) fn read(kind: &str, update: &'a Value) -> Option<Self> {
        let message_id = text(update.get("messageId"))?;
        let content = match (kind, update.get("content")) {
            ("session_message_chunk", Some(block)) => {
                let is_text = block.get("type").and_then(Value::as_str) == Some("text");
                let appended = block
                    .get("text")
                    .and_then(Value::as_str)
                    .filter(|_| is_text)?;
                MessageContent::Append(appended.to_owned())
            }
            ("session_message_chunk", None) => return None,
            (_, None) => MessageContent::Unchanged,
            (_, Some(Value::Null)) => MessageContent::Cleared,
            (_, Some(Value::Array(blocks))) if blocks.is_empty() => MessageContent::Cleared,
            (_, Some(blocks @ Value::Array(_))) => {
                MessageContent::Replace(content_text(Some(blocks)).unwrap_or_default())
            }
            (_, Some(_)) => MessageContent::Unchanged,
        };
        Some(Self {
            message_id,
            sender: Patch::text(update, "senderSessionId"),
            recipient: Patch::text(update, "recipientSessionId"),
            content,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn patches_mirror_maybe_undefined() {
        let update = json!({"sessionId": "c", "title": "T", "description": null,
            "state": {"state": "idle", "stopReason": "cancelled"}});
        let read = SubagentUpdate::read("subagent_update", &update).unwrap();
        assert_eq!(read.child, Some("c"));
        assert_eq!(read.title, Patch::Set("T"));
        assert_eq!(read.description, Patch::Cleared);
        assert_eq!(
            read.state,
            Patch::Set(State {
                name: "idle",
                stop_reason: Some("cancelled")
            })
        );
        assert!(read.describes);
        let wrong = json!({"sessionId": 7, "title": 5, "state": "running"});
        let read = SubagentUpdate::read("subagent_update", &wrong).unwrap();
        assert_eq!(
            (read.child, read.title, read.state),
            (None, Patch::Unchanged, Patch::Unchanged)
        );
        assert_eq!(
            SubagentUpdate::read(
                "subagent_update",
                &json!({"sessionId": "c", "state": {"state": 3}})
            )
            .unwrap()
            .state,
            Patch::Unchanged
        );
    }

    #[test]
    fn a_lone_state_does_not_describe_the_child() {
        let describes = |update: Value| {
            SubagentUpdate::read("subagent_update", &update)
                .unwrap()
                .describes
        };
        assert!(!describes(
            json!({"sessionUpdate": "subagent_update", "sessionId": "c",
            "state": {"state": "idle"}})
        ));
        assert!(describes(
            json!({"sessionUpdate": "subagent_update", "sessionId": "c"})
        ));
        assert!(describes(
            json!({"sessionUpdate": "subagent_update", "sessionId": "c",
            "capabilities": {}, "state": {"state": "running"}})
        ));
    }

    #[test]
    fn draft_names_read_the_same() {
        let spawned = json!({"subagentSessionId": "c", "name": "Reviewer", "task": "Review it"});
        let read = SubagentUpdate::read("subagent_spawned", &spawned).unwrap();
        assert_eq!(
            (read.child, read.title, read.description),
            (Some("c"), Patch::Set("Reviewer"), Patch::Set("Review it"))
        );
        let state = json!({"subagentSessionId": "c", "state": "idle"});
        let read = SubagentUpdate::read("subagent_state_update", &state).unwrap();
        assert_eq!(
            read.state,
            Patch::Set(State {
                name: "idle",
                stop_reason: None
            })
        );
        assert!(!read.describes);
    }

    #[test]
    fn idle_settles_cancelled_or_completed() {
        let state = |stop_reason| State {
            name: "idle",
            stop_reason,
        };
        assert_eq!(state(Some("cancelled")).settled_status(), "cancelled");
        assert_eq!(state(Some("end_turn")).settled_status(), "completed");
        assert_eq!(state(Some("error")).settled_status(), "completed");
        assert_eq!(state(None).settled_status(), "completed");
    }

    /// The mapping as data: the protocol's, and one as claude-agent-acp's (title ->
    /// description, description -> type, the child is the agent id).
    #[test]
    fn fields_map_per_agent() {
        let meta = NativeMeta {
            title: Some("Read hello.txt".into()),
            description: Some("general-purpose".into()),
        };
        let mapped = |fields| {
            let mut task = SubagentTask::default();
            meta.apply_to(&mut task, fields, "kid");
            (task.description, task.subagent_type, task.agent_id)
        };
        let swapped = NativeFields {
            description: &[NativeField::Title],
            subagent_type: Some(NativeField::Description),
            child_is_agent_id: true,
        };
        assert_eq!(
            mapped(swapped),
            (
                "Read hello.txt".into(),
                "general-purpose".into(),
                Some("kid".into())
            )
        );
        assert!(!swapped.description_is_description());
        assert_eq!(
            mapped(NativeFields::PROTOCOL),
            ("general-purpose".into(), String::new(), None)
        );
        assert!(NativeFields::PROTOCOL.description_is_description());
        let title_only = NativeMeta {
            title: Some("Read hello".into()),
            description: None,
        };
        let mut task = SubagentTask::default();
        title_only.apply_to(&mut task, NativeFields::PROTOCOL, "kid");
        assert_eq!(task.description, "Read hello");
    }

    #[test]
    fn messages_upsert_and_chunks_append() {
        let message = json!({"messageId": "m1", "senderSessionId": "kid", "recipientSessionId": "p",
            "content": [{"type": "text", "text": "hello.txt says: hi"}]});
        let read = SessionMessage::read("session_message", &message).unwrap();
        assert_eq!(read.sender, Patch::Set("kid"));
        assert_eq!(
            read.content,
            MessageContent::Replace("hello.txt says: hi".into())
        );
        let chunk = json!({"messageId": "m1", "content": {"type": "text", "text": " more"}});
        assert_eq!(
            SessionMessage::read("session_message_chunk", &chunk)
                .unwrap()
                .content,
            MessageContent::Append(" more".into())
        );
        assert_eq!(
            SessionMessage::read(
                "session_message",
                &json!({"messageId": "m1", "content": []})
            )
            .unwrap()
            .content,
            MessageContent::Cleared
        );
        assert!(SessionMessage::read("session_message", &json!({"content": []})).is_none());
    }
}
