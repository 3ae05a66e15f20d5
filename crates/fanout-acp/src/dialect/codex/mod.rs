//! codex-acp (`@agentclientprotocol/codex-acp` 1.x with `_meta.codex.*`, and 2.x, which
//! sends the same shapes without `_meta`; DESIGN 3.3). What one frame says in Codex terms
//! ([`CodexSignal`]) and how it fills a payload; the correlation of frames across wire ids
//! (a lifecycle frame on another id, a control's agent states) is Codex's state on a
//! connection (`cards.rs`). With `clientCapabilities.subagents` codex-acp 2.x speaks
//! ACP's own subagent sessions instead, with [`NATIVE_FIELDS`].

mod cards;

use serde_json::{Map, Value};

use super::{Dialect, DialectRules, DialectState, NativeField, NativeFields};
use crate::frame::FrameView;
use crate::json::{first_text, object_at, text, text_at};
use crate::subagent::{SubagentInputs, SubagentTask};

pub(crate) struct Codex;

impl DialectRules for Codex {
    fn name(&self) -> &'static str {
        "codex"
    }

    fn agent_names(&self) -> &'static [&'static str] {
        &[
            "@agentclientprotocol/codex-acp",
            "@zed-industries/codex-acp",
            "codex-acp",
        ]
    }

    /// A spawn or lifecycle frame. Keyed frames go through Codex's state first
    /// ([`cards::CodexCards`], which claims cards before the launch signals run); this
    /// serves the rest and frames it cannot key.
    fn is_launch(&self, view: &FrameView<'_>) -> bool {
        matches!(
            parse(view),
            Some(CodexSignal::Spawn(_) | CodexSignal::Lifecycle(_))
        )
    }

    fn enrich(&self, task: &mut SubagentTask, view: &FrameView<'_>) {
        task.fill_inputs(&view.inputs());
    }

    fn native_fields(&self) -> NativeFields {
        NATIVE_FIELDS
    }

    fn state(&self, me: Dialect) -> Option<Box<dyn DialectState>> {
        Some(Box::new(cards::CodexCards::new(me)))
    }
}

/// codex-acp's subagent sessions: `description` is the task (-> description); `title`
/// maps to nothing.
const NATIVE_FIELDS: NativeFields = NativeFields {
    description: &[NativeField::Description],
    subagent_type: None,
    child_is_agent_id: false,
};

/// Codex fields into a payload. `rank_merge`: on `tool_call` frames the agent status only
/// moves up; on updates it is replaced.
fn enrich_from_signal(task: &mut SubagentTask, signal: &CodexSignal, rank_merge: bool) {
    match signal {
        CodexSignal::Spawn(spawn) => {
            // DESIGN 3.3: the prompt is the description, falling back to the message.
            task.fill_inputs(&SubagentInputs {
                description: spawn.prompt.clone().or_else(|| spawn.message.clone()),
                prompt: spawn.prompt.clone(),
                subagent_type: None,
            });
            fill(&mut task.child_session_id, spawn.child.as_deref());
            if let Some(model) = spawn.model.as_deref() {
                task.model = Some(model.to_owned());
            }
            merge_status(task, spawn.status.as_deref(), rank_merge);
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
            fill(&mut task.child_session_id, child.as_deref());
            merge_status(task, Some(activity), rank_merge);
        }
        CodexSignal::Control(_) => {}
    }
}

/// An agent status from Codex; with `rank_merge` it never moves down.
fn merge_status(task: &mut SubagentTask, status: Option<&str>, rank_merge: bool) {
    let Some(status) = status.filter(|s| !s.is_empty()) else {
        return;
    };
    if rank_merge
        && let Some(current) = task.status.as_deref()
        && status_rank(status) < status_rank(current)
    {
        return;
    }
    task.set_status(Some(status));
}

fn fill(slot: &mut Option<String>, value: Option<&str>) {
    if slot.as_deref().is_none_or(str::is_empty)
        && let Some(value) = value.filter(|v| !v.is_empty())
    {
        *slot = Some(value.to_owned());
    }
}

/// Lifecycle activities that are accepted (anything else, e.g. `interacted`, is not a
/// lifecycle frame).
const ACTIVITIES: [&str; 9] = [
    "started",
    "completed",
    "complete",
    "interrupted",
    "cancelled",
    "errored",
    "error",
    "shutdown",
    "notFound",
];

const CONTROLS: [&str; 3] = ["interact", "wait", "close"];

/// What a frame says in Codex terms.
#[derive(Debug, Clone, PartialEq, Eq)]
enum CodexSignal {
    Spawn(CodexSpawn),
    Lifecycle(CodexLifecycle),
    /// `interact` / `wait` / `close`: never a row; `(child thread, agent status)` pairs.
    Control(Vec<(String, String)>),
}

/// A `spawnAgent` frame.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct CodexSpawn {
    child: Option<String>,
    sender: Option<String>,
    prompt: Option<String>,
    /// `agentsStates[child].message`.
    message: Option<String>,
    model: Option<String>,
    /// `agentsStates[child].status`, else `rawInput.status`.
    status: Option<String>,
}

/// A v2 lifecycle frame (`Start subagent <name>` / `Complete subagent <name>`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct CodexLifecycle {
    child: Option<String>,
    /// Basename of the agent path: both type and description.
    name: Option<String>,
    activity: String,
}

impl CodexLifecycle {
    fn is_terminal(&self) -> bool {
        self.activity != "started"
    }
}

/// Recognises a Codex frame; `None` lets the common rules run.
fn parse(view: &FrameView<'_>) -> Option<CodexSignal> {
    let raw = view.raw_input;
    let codex = view.meta.and_then(|meta| meta.get("codex"));
    if let Some(collaboration) = codex.and_then(|c| object_at(c, "collaboration")) {
        match text(collaboration.get("tool")) {
            Some("spawnAgent") => return Some(CodexSignal::Spawn(spawn(Some(collaboration), raw))),
            Some(tool) if CONTROLS.contains(&tool) => {
                return Some(CodexSignal::Control(agent_states(raw)));
            }
            _ => {}
        }
    }
    if let Some(subagent) = codex.and_then(|c| object_at(c, "subagent"))
        && let Some(activity) = text(subagent.get("activity")).filter(|a| ACTIVITIES.contains(a))
    {
        let child = text(subagent.get("threadId"))
            .or_else(|| raw.and_then(|r| text_at(r, "agentThreadId")));
        let path = text(subagent.get("path")).or_else(|| raw.and_then(|r| text_at(r, "agentPath")));
        return Some(lifecycle(child, path, activity));
    }
    let raw_object = raw.and_then(Value::as_object)?;
    let has_collaboration_input = ["senderThreadId", "receiverThreadIds"]
        .iter()
        .any(|key| raw_object.contains_key(*key));
    if view.title == Some("spawnAgent") && has_collaboration_input {
        return Some(CodexSignal::Spawn(spawn(None, raw)));
    }
    if let Some(activity) = text(raw_object.get("activityKind")).filter(|a| ACTIVITIES.contains(a))
    {
        let child = text(raw_object.get("agentThreadId"));
        let path = text(raw_object.get("agentPath"));
        if child.is_some() || path.is_some() {
            return Some(lifecycle(child, path, activity));
        }
    }
    if view.title.is_some_and(|title| CONTROLS.contains(&title))
        && (has_collaboration_input || raw_object.contains_key("agentsStates"))
    {
        return Some(CodexSignal::Control(agent_states(raw)));
    }
    None
}

fn lifecycle(child: Option<&str>, path: Option<&str>, activity: &str) -> CodexSignal {
    let name = path
        .map(|p| p.trim_end_matches('/'))
        .and_then(|p| p.rsplit('/').next())
        .filter(|name| !name.is_empty());
    CodexSignal::Lifecycle(CodexLifecycle {
        child: child.map(str::to_owned),
        name: name.map(str::to_owned),
        activity: activity.to_owned(),
    })
}

fn spawn(collaboration: Option<&Map<String, Value>>, raw: Option<&Value>) -> CodexSpawn {
    let states = raw.and_then(|r| object_at(r, "agentsStates"));
    let child = collaboration
        .and_then(|c| first_text(c.get("receiverThreadIds")))
        .or_else(|| first_text(raw.and_then(|r| r.get("receiverThreadIds"))))
        // Often known only from the completing update's agentsStates.
        .or_else(|| sole_key(states));
    let child_state = child.and_then(|c| states.and_then(|s| s.get(c)));
    let raw_text = |key: &str| raw.and_then(|r| text_at(r, key)).map(str::to_owned);
    CodexSpawn {
        child: child.map(str::to_owned),
        sender: collaboration
            .and_then(|c| text(c.get("senderThreadId")))
            .or_else(|| raw.and_then(|r| text_at(r, "senderThreadId")))
            .map(str::to_owned),
        prompt: raw_text("prompt"),
        message: child_state
            .and_then(|s| text_at(s, "message"))
            .map(str::to_owned),
        model: raw_text("model"),
        status: child_state
            .and_then(|s| text_at(s, "status"))
            .map(str::to_owned)
            .or_else(|| raw_text("status")),
    }
}

fn sole_key(states: Option<&Map<String, Value>>) -> Option<&str> {
    let states = states?;
    if states.len() != 1 {
        return None;
    }
    states
        .keys()
        .next()
        .map(String::as_str)
        .filter(|k| !k.is_empty())
}

fn agent_states(raw: Option<&Value>) -> Vec<(String, String)> {
    let Some(states) = raw.and_then(|r| object_at(r, "agentsStates")) else {
        return Vec::new();
    };
    states
        .iter()
        .filter(|(child, _)| !child.is_empty())
        .filter_map(|(child, state)| Some((child.clone(), text_at(state, "status")?.to_owned())))
        .collect()
}

/// Rank for merging agent statuses on repeated `tool_call` frames: a status never moves
/// down (a late `started` does not undo `completed`).
fn status_rank(status: &str) -> u8 {
    match status {
        "started" | "pendingInit" | "pending_init" => 1,
        s if ACTIVITIES.contains(&s) || s == "failed" => 3,
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parsed(update: Value) -> Option<CodexSignal> {
        parse(&FrameView::parse(&update))
    }

    #[test]
    fn v1_spawn_from_collaboration_meta() {
        let signal = parsed(json!({
            "title": "spawnAgent",
            "rawInput": {"prompt": "Audit", "model": "gpt-5.2-codex",
                "agentsStates": {"thread-child": {"status": "running", "message": "Reading"}}},
            "_meta": {"codex": {"collaboration": {"tool": "spawnAgent", "senderThreadId": "main",
                "receiverThreadIds": [7, "thread-child"]}}}
        }));
        assert_eq!(
            signal,
            Some(CodexSignal::Spawn(CodexSpawn {
                child: Some("thread-child".into()),
                sender: Some("main".into()),
                prompt: Some("Audit".into()),
                message: Some("Reading".into()),
                model: Some("gpt-5.2-codex".into()),
                status: Some("running".into()),
            }))
        );
    }

    #[test]
    fn spawn_fallbacks_to_raw_input() {
        let Some(CodexSignal::Spawn(spawn)) = parsed(json!({
            "rawInput": {"prompt": "p", "status": "pendingInit", "receiverThreadIds": ["t1"]},
            "_meta": {"codex": {"collaboration": {"tool": "spawnAgent"}}}
        })) else {
            panic!("spawn expected");
        };
        assert_eq!(spawn.child.as_deref(), Some("t1"));
        assert_eq!(spawn.status.as_deref(), Some("pendingInit"));
        assert_eq!(spawn.message, None);
    }

    #[test]
    fn v2_spawn_without_meta_needs_thread_fields() {
        let Some(CodexSignal::Spawn(spawn)) = parsed(json!({
            "title": "spawnAgent", "rawInput": {"senderThreadId": "main", "receiverThreadIds": []}
        })) else {
            panic!("spawn expected");
        };
        assert_eq!(spawn.child, None);
        assert_eq!(spawn.sender.as_deref(), Some("main"));
        assert_eq!(
            parsed(json!({"title": "spawnAgent", "rawInput": {"prompt": "p"}})),
            None
        );
        assert_eq!(parsed(json!({"title": "spawnAgent"})), None);
    }

    #[test]
    fn child_from_sole_agents_state_when_no_receivers() {
        let Some(CodexSignal::Spawn(spawn)) = parsed(json!({
            "rawInput": {"agentsStates": {"t9": {"status": "completed"}}},
            "_meta": {"codex": {"collaboration": {"tool": "spawnAgent", "receiverThreadIds": []}}}
        })) else {
            panic!("spawn expected");
        };
        assert_eq!(spawn.child.as_deref(), Some("t9"));
        assert_eq!(spawn.status.as_deref(), Some("completed"));
    }

    #[test]
    fn lifecycle_from_meta_or_raw_input() {
        let expected = Some(CodexSignal::Lifecycle(CodexLifecycle {
            child: Some("thread-child".into()),
            name: Some("review_agent".into()),
            activity: "completed".into(),
        }));
        assert_eq!(
            parsed(
                json!({"_meta": {"codex": {"subagent": {"threadId": "thread-child",
                "path": "/agents/review_agent", "activity": "completed"}}}})
            ),
            expected
        );
        assert_eq!(
            parsed(
                json!({"title": "Complete subagent review_agent", "rawInput": {
                "agentThreadId": "thread-child", "agentPath": "/agents/review_agent/", "activityKind": "completed"}})
            ),
            expected
        );
    }

    #[test]
    fn rejects_unknown_activities_controls_and_malformed_shapes() {
        assert_eq!(
            parsed(
                json!({"_meta": {"codex": {"subagent": {"threadId": "t", "activity": "interacted"}}}})
            ),
            None
        );
        assert_eq!(parsed(json!({"_meta": {"codex": {"subagent": "x"}}})), None);
        assert_eq!(
            parsed(json!({"_meta": {"codex": {"collaboration": {"tool": 3}}}})),
            None
        );
        assert_eq!(parsed(json!({"_meta": {"codex": []}})), None);
        assert_eq!(
            parsed(json!({"rawInput": {"activityKind": "started"}})),
            None
        );
        assert_eq!(
            parsed(
                json!({"rawInput": {"agentsStates": {"t": {"status": "running"}, "u": 3}},
                "_meta": {"codex": {"collaboration": {"tool": "wait"}}}})
            ),
            Some(CodexSignal::Control(vec![("t".into(), "running".into())]))
        );
        assert_eq!(
            parsed(json!({"title": "close", "rawInput": {"receiverThreadIds": ["t"]}})),
            Some(CodexSignal::Control(Vec::new()))
        );
        assert_eq!(
            parsed(json!({"title": "wait", "rawInput": {"seconds": 3}})),
            None
        );
    }

    #[test]
    fn malformed_collections_are_safe() {
        let Some(CodexSignal::Spawn(spawn)) = parsed(json!({
            "rawInput": {"receiverThreadIds": "t", "agentsStates": ["t"], "prompt": 5},
            "_meta": {"codex": {"collaboration": {"tool": "spawnAgent", "receiverThreadIds": {"a": 1}}}}
        })) else {
            panic!("spawn expected");
        };
        assert_eq!(spawn, CodexSpawn::default());
    }

    #[test]
    fn ranks_order_started_running_terminal() {
        assert!(status_rank("started") < status_rank("running"));
        assert!(status_rank("running") < status_rank("completed"));
        assert_eq!(status_rank("notFound"), 3);
        assert_eq!(status_rank("whatever"), 2);
    }

    /// With the subagents capability: `description` -> description, `title` -> nothing.
    #[test]
    fn subagent_session_fields() {
        let mapped = |title: Option<&str>, description: Option<&str>| {
            let meta = crate::dialect::native::NativeMeta {
                title: title.map(str::to_owned),
                description: description.map(str::to_owned),
            };
            let mut task = SubagentTask::default();
            meta.apply_to(&mut task, Codex.native_fields(), "kid");
            (task.description, task.subagent_type, task.agent_id)
        };
        assert_eq!(
            mapped(Some("Read hello.txt"), Some("general-purpose")),
            ("general-purpose".into(), String::new(), None)
        );
        assert_eq!(mapped(Some("Read hello"), None).0, "");
        assert!(Codex.native_fields().description_is_description());
    }
}
