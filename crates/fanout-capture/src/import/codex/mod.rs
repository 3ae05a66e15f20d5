//! Codex rollouts (DESIGN 3.7): `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`, one
//! file per thread. A session is a root thread (`session_meta.payload.id ==
//! session_id`) with its subagent threads (`parent_thread_id`).
//!
//! Mapping: one `task_sessions` row per root thread (execution `'unknown'`, task = its
//! `cwd`, the ACP session id = the root thread id), a turn per root `task_started` (ended
//! by `task_complete`, which has no status, or by `turn_aborted`), a tool-call message per
//! `function_call`, and one subagent row per `spawn_agent` call: its `call_id` is the
//! row's `tool_call_id` (the id the ACP wire shows), `message` its description and v2's
//! `task_name` its type. `wait_agent`, `send_input`, `close_agent` and the other controls
//! are tool calls, never rows. The spawned thread is found by the spawn's output (v1
//! `{agent_id}`), by the thread's `agent_path` (v2 outputs `{task_name: "/root/…"}`), or
//! by the parent's `SubAgentActivity` record; it fills `child_session_id`, `model` (its
//! `turn_context`) and, from its own `task_complete`, `duration_ms` and agent status
//! `completed`. A subagent thread's tool calls belong to the root session, nested under
//! its spawn; its own spawns nest the same way.
//!
//! Usage: one ledger row per `token_usage_record`, in the root session, attributed to the
//! spawn of the thread that made it (NULL for the root thread), its model from that
//! turn's `turn_context` (the record's own is null).
//!
//! A v2 child rollout begins with a copy of its parent's records (a second
//! `session_meta`, the parent's turn with its spawns, a `turn_aborted`): everything before
//! the child's own first `task_started` (one with a parent turn) is passed over.

mod parse;

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fanout_acp::{Dialect, FrameOrigin, SubagentTask, ToolFrame};
use fanout_store::{ImportFileRecord, Source, Store, Timestamp, UsageSource};
use serde_json::Value;

use super::lenient::Text;
use super::source::{KnownFiles, read_source_lines};
use super::{FileSummary, ImportError, ImportProgress, SourceKind};
use crate::capture::{Capture, CaptureConfig, ResponseUsage};
use parse::{Meta, Record};

/// Queued writes per group commit.
const GROUP_WRITES: usize = 4096;

/// The spawning tool of Codex's multi-agent features (v1 and v2).
const SPAWN_TOOL: &str = "spawn_agent";

/// One record of a thread, ready to replay.
#[derive(Debug)]
struct Entry {
    at: Timestamp,
    record: Record,
    writes: bool,
}

/// One thread's file, read.
struct Thread {
    meta: Meta,
    /// When its `session_meta` was written (a root thread's session starts then).
    meta_at: Option<Timestamp>,
    entries: VecDeque<Entry>,
}

/// A Codex session's rollouts, read and linked, ready to be written.
pub(super) struct ReadSession {
    summary: FileSummary,
    root: String,
    /// Each thread with the call that spawned it (`None`: the root thread, or a thread
    /// no spawn names).
    threads: Vec<(Option<String>, Thread)>,
    files: Vec<ImportFileRecord>,
}

/// Reads the rollouts of one session (the root thread's first) and links the threads.
pub(super) fn read_codex_session(
    root: &str,
    paths: &[PathBuf],
    known: &KnownFiles,
    progress: &dyn ImportProgress,
) -> Result<ReadSession, ImportError> {
    let first = paths.first().cloned().unwrap_or_default();
    let mut summary = FileSummary::new(&first, SourceKind::CodexRollout);
    summary.subagent_logs = paths.iter().skip(1).cloned().collect();
    let mut files = Vec::new();
    let mut threads = Vec::new();
    for path in paths {
        threads.push(read_thread(
            path,
            known,
            &mut summary,
            &mut files,
            progress,
        )?);
    }
    let links = SpawnLinks::from_threads(&threads);
    let threads = threads
        .into_iter()
        .map(|thread| {
            let call = (thread.meta.thread != root)
                .then(|| links.spawning_call(&thread.meta))
                .flatten();
            (call, thread)
        })
        .collect();
    Ok(ReadSession {
        summary,
        root: root.to_owned(),
        threads,
        files,
    })
}

fn read_thread(
    path: &Path,
    known: &KnownFiles,
    summary: &mut FileSummary,
    files: &mut Vec<ImportFileRecord>,
    progress: &dyn ImportProgress,
) -> Result<Thread, ImportError> {
    let mut meta: Option<Meta> = None;
    let mut meta_at = None;
    let mut entries = VecDeque::new();
    // A v2 child's copy of its parent runs until the child's own first turn.
    let mut copying = false;
    read_source_lines(
        path,
        "rollout",
        known,
        summary,
        files,
        progress,
        |line, writes| {
            let parsed = parse::parse_line(line.bytes)?;
            let (Some(at), Some(record)) = (parsed.at, parsed.record) else {
                return Ok(parsed.note);
            };
            match &record {
                Record::Meta(m) => {
                    if meta.is_none() {
                        copying = m.forked;
                        meta = Some(m.clone());
                        meta_at = Some(at);
                    }
                    return Ok(parsed.note);
                }
                Record::TaskStarted { parent_turn_id, .. } if copying => {
                    if parent_turn_id.is_none() {
                        return Ok(parsed.note);
                    }
                    copying = false;
                }
                _ if copying => return Ok(parsed.note),
                _ => {}
            }
            entries.push_back(Entry { at, record, writes });
            Ok(parsed.note)
        },
    )?;
    let meta = meta.unwrap_or_else(|| Meta {
        thread: super::discover::rollout_thread_id(path)
            .unwrap_or_default()
            .to_owned(),
        ..Meta::default()
    });
    Ok(Thread {
        meta,
        meta_at,
        entries,
    })
}

/// Which spawn made which thread.
struct SpawnLinks {
    /// v1: the spawn's output `{agent_id}`; any version: `SubAgentActivity`.
    by_thread: HashMap<String, String>,
    /// v2: the spawn's output `{task_name: "/root/…"}`.
    by_path: HashMap<String, String>,
}

impl SpawnLinks {
    fn from_threads(threads: &[Thread]) -> Self {
        let mut links = SpawnLinks {
            by_thread: HashMap::new(),
            by_path: HashMap::new(),
        };
        for entry in threads.iter().flat_map(|t| &t.entries) {
            match &entry.record {
                Record::FunctionCallOutput {
                    call_id,
                    output: Some(output),
                } => {
                    let Ok(value) = serde_json::from_str::<Value>(output) else {
                        continue;
                    };
                    if let Some(thread) = value.get("agent_id").and_then(Value::as_str) {
                        links
                            .by_thread
                            .entry(thread.to_owned())
                            .or_insert_with(|| call_id.clone());
                    }
                    if let Some(path) = value.get("task_name").and_then(Value::as_str) {
                        links
                            .by_path
                            .entry(path.to_owned())
                            .or_insert_with(|| call_id.clone());
                    }
                }
                Record::SpawnActivity { call_id, thread } => {
                    links
                        .by_thread
                        .entry(thread.clone())
                        .or_insert_with(|| call_id.clone());
                }
                _ => {}
            }
        }
        links
    }

    fn spawning_call(&self, meta: &Meta) -> Option<String> {
        self.by_thread
            .get(&meta.thread)
            .or_else(|| meta.agent_path.as_ref().and_then(|p| self.by_path.get(p)))
            .cloned()
    }
}

/// Replays a read session: the threads' records in time order through one [`Capture`],
/// queued for the unit's group commit as the Claude replay is.
pub(super) async fn replay_codex_session(
    store: Arc<dyn Store>,
    read: ReadSession,
) -> super::QueuedUnit {
    let ReadSession {
        summary,
        root,
        threads,
        files,
    } = read;
    let mut capture = Capture::new(store, CaptureConfig::default());
    capture.set_source(Source::Import);
    let root_thread = threads
        .iter()
        .find(|(_, t)| t.meta.thread == root)
        .or_else(|| threads.first())
        .map(|(_, t)| t);
    let cwd = root_thread.and_then(|t| t.meta.cwd.clone());
    let started_at = root_thread.and_then(|t| t.meta_at);
    let mut replay = Replay {
        root: root.clone(),
        cwd,
        started_at,
        ..Replay::default()
    };
    let mut streams: Vec<(ThreadKey, VecDeque<Entry>)> = threads
        .into_iter()
        .map(|(call, t)| ((call, t.meta.thread), t.entries))
        .collect();
    while let Some(((call, thread), entry)) =
        super::next_in_time_order(&mut streams, |e: &Entry| e.at)
    {
        let mark = capture.queued_writes();
        let writes = entry.writes;
        replay.apply(&mut capture, &thread, call.as_deref(), entry);
        if !writes {
            capture.discard_queued_from(mark);
        }
        if capture.queued_writes() >= GROUP_WRITES {
            capture.commit_queued().await;
        }
    }
    super::queue_unit(capture, files, summary)
}

/// A thread's stream key: the spawn that made it (`None` for the root) and its id.
type ThreadKey = (Option<String>, String);

/// A tool call as known so far.
struct KnownTool {
    title: String,
    kind: &'static str,
    parent: Option<String>,
    subagent: Option<SubagentTask>,
    last_status: Option<String>,
}

/// Replays the merged records into a [`Capture`].
#[derive(Default)]
struct Replay {
    root: String,
    cwd: Option<String>,
    /// The root thread's `session_meta` time: the session's start.
    started_at: Option<Timestamp>,
    opened: bool,
    open_turn: Option<String>,
    tools: HashMap<String, KnownTool>,
    /// Per thread, the model of each of its turns.
    models: HashMap<(String, String), String>,
    /// Subagent threads whose spawn has been given its child.
    linked: std::collections::HashSet<String>,
}

impl Replay {
    fn apply(&mut self, capture: &mut Capture, thread: &str, call: Option<&str>, entry: Entry) {
        let at = entry.at;
        if !self.opened {
            self.opened = true;
            let started = self.started_at.map_or(at, |meta| meta.min(at));
            capture.queue_open_session(&self.root, self.cwd.clone(), started);
        }
        let is_root = thread == self.root;
        if !is_root && self.linked.insert(thread.to_owned()) {
            // The spawned thread is the row's child, whatever the spawn's output said.
            let child = thread.to_owned();
            self.update_spawn(capture, call, at, |task| {
                task.child_session_id.get_or_insert(child);
            });
        }
        match entry.record {
            Record::Meta(_) => {}
            Record::TaskStarted { turn_id, .. } if is_root => {
                if let Some(open) = self.open_turn.take() {
                    capture.queue_end_turn(&self.root, &open, None, at);
                }
                capture.queue_start_turn(&self.root, &turn_id, at);
                self.open_turn = Some(turn_id);
            }
            Record::TaskComplete { turn_id, .. } if is_root => {
                self.end_turn(capture, &turn_id, None, at);
            }
            Record::TurnAborted { turn_id, reason } if is_root => {
                let stop = match reason.as_deref() {
                    Some("interrupted") | None => "cancelled".to_owned(),
                    Some(other) => other.to_owned(),
                };
                self.end_turn(capture, &turn_id, Some(stop), at);
            }
            Record::TaskStarted { .. } => {}
            Record::TaskComplete { duration_ms, .. } => {
                self.update_spawn(capture, call, at, |task| {
                    task.status = Some("completed".to_owned());
                    task.duration_ms = duration_ms.or(task.duration_ms);
                });
            }
            Record::TurnAborted { reason, .. } => {
                self.update_spawn(capture, call, at, |task| {
                    task.status = Some(reason.unwrap_or_else(|| "aborted".to_owned()));
                });
            }
            Record::TurnContext { turn_id, model } => {
                if let Some(model) = model {
                    self.models
                        .insert((thread.to_owned(), turn_id), model.clone());
                    if !is_root {
                        self.update_spawn(capture, call, at, |task| {
                            if task.model.is_none() {
                                task.model = Some(model);
                            }
                        });
                    }
                }
            }
            Record::SpawnActivity { .. } => {}
            Record::FunctionCall {
                call_id,
                name,
                arguments,
            } => {
                let parent = if is_root {
                    None
                } else {
                    call.map(str::to_owned)
                };
                self.function_call(capture, call_id, name, arguments, parent, at);
            }
            Record::FunctionCallOutput { call_id, output } => {
                self.output(capture, call_id, output, at);
            }
            Record::Usage {
                response_id,
                turn_id,
                tokens,
            } => {
                let model = turn_id
                    .and_then(|t| self.models.get(&(thread.to_owned(), t)))
                    .cloned();
                capture.queue_usage(
                    &self.root,
                    ResponseUsage {
                        response_id,
                        model,
                        tokens,
                        subagent_tool_call_id: if is_root {
                            None
                        } else {
                            call.map(str::to_owned)
                        },
                        source: UsageSource::CodexRollout,
                    },
                    at,
                );
            }
        }
    }

    fn end_turn(
        &mut self,
        capture: &mut Capture,
        turn_id: &str,
        stop: Option<String>,
        at: Timestamp,
    ) {
        if self.open_turn.as_deref() == Some(turn_id) {
            self.open_turn = None;
        }
        capture.queue_end_turn(&self.root, turn_id, stop, at);
    }

    fn function_call(
        &mut self,
        capture: &mut Capture,
        call_id: String,
        name: String,
        arguments: Option<String>,
        parent: Option<String>,
        at: Timestamp,
    ) {
        let subagent = (name == SPAWN_TOOL).then(|| spawn_task(arguments.as_deref()));
        let is_new = !self.tools.contains_key(&call_id);
        let known = self
            .tools
            .entry(call_id.clone())
            .or_insert_with(|| KnownTool {
                title: name.clone(),
                kind: tool_kind(&name),
                parent,
                subagent: None,
                last_status: None,
            });
        if known.subagent.is_none() {
            known.subagent = subagent;
        }
        if known.last_status.is_none() {
            known.last_status = Some("pending".to_owned());
        }
        let frame = frame(
            &self.root,
            &call_id,
            known,
            Some("pending"),
            is_new,
            FrameOrigin::ToolCall,
        );
        capture.queue_tool_frame(&frame, at);
    }

    fn output(
        &mut self,
        capture: &mut Capture,
        call_id: String,
        output: Option<String>,
        at: Timestamp,
    ) {
        let Some(known) = self.tools.get_mut(&call_id) else {
            return;
        };
        if let Some(task) = known.subagent.as_mut()
            && let Some(value) = output
                .as_deref()
                .and_then(|o| serde_json::from_str::<Value>(o).ok())
            && let Some(child) = value.get("agent_id").and_then(Value::as_str)
            && task.child_session_id.is_none()
        {
            task.child_session_id = Some(child.to_owned());
        }
        known.last_status = Some("completed".to_owned());
        let frame = frame(
            &self.root,
            &call_id,
            known,
            Some("completed"),
            false,
            FrameOrigin::ToolCallUpdate,
        );
        capture.queue_tool_frame(&frame, at);
    }

    /// A change of the row of the spawn that made the current thread (a status-less
    /// frame: the payload merges, the tool status stays).
    fn update_spawn(
        &mut self,
        capture: &mut Capture,
        call: Option<&str>,
        at: Timestamp,
        change: impl FnOnce(&mut SubagentTask),
    ) {
        let Some(call) = call else {
            return;
        };
        let Some(known) = self.tools.get_mut(call) else {
            return;
        };
        let Some(task) = known.subagent.as_mut() else {
            return;
        };
        change(task);
        let frame = frame(
            &self.root,
            call,
            known,
            None,
            false,
            FrameOrigin::ToolCallUpdate,
        );
        capture.queue_tool_frame(&frame, at);
    }
}

/// A spawn's inputs: `message` (its description and prompt) and v2's `task_name` (type).
fn spawn_task(arguments: Option<&str>) -> SubagentTask {
    #[derive(serde::Deserialize, Default)]
    struct Arguments<'a> {
        #[serde(default, borrow)]
        message: Text<'a>,
        #[serde(default, borrow)]
        task_name: Text<'a>,
        #[serde(default, borrow)]
        model: Text<'a>,
    }
    let args: Arguments<'_> = arguments
        .and_then(|a| serde_json::from_str::<super::lenient::Object<Arguments<'_>>>(a).ok())
        .map(|o| o.0)
        .unwrap_or_default();
    let message = args.message.owned().unwrap_or_default();
    SubagentTask {
        description: message.clone(),
        prompt: message,
        subagent_type: args.task_name.owned().unwrap_or_default(),
        model: args.model.owned(),
        ..SubagentTask::default()
    }
}

/// The ACP tool kind of a Codex tool.
fn tool_kind(name: &str) -> &'static str {
    match name {
        "exec_command" | "shell" | "local_shell" | "write_stdin" => "execute",
        "apply_patch" => "edit",
        "read_file" | "view_image" => "read",
        "web_search" => "fetch",
        SPAWN_TOOL => "think",
        _ => "other",
    }
}

fn frame(
    session: &str,
    call_id: &str,
    known: &KnownTool,
    status: Option<&str>,
    is_new: bool,
    origin: FrameOrigin,
) -> ToolFrame {
    ToolFrame {
        acp_session_id: session.to_owned(),
        tool_call_id: call_id.to_owned(),
        wire_tool_call_id: call_id.to_owned(),
        wire_session_id: session.to_owned(),
        parent_tool_call_id: known.parent.clone(),
        title: Some(known.title.clone()),
        kind: Some(known.kind.to_owned()),
        tool_status: status.map(str::to_owned),
        last_tool_status: known.last_status.clone(),
        is_new,
        subagent: known.subagent.clone(),
        dialect: known.subagent.as_ref().and(Dialect::named("codex")),
        origin,
    }
}
