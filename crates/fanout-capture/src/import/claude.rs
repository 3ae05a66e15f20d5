//! Claude Code's native session folders: `<id>.jsonl` plus `<id>/subagents/agent-*.jsonl`.
//!
//! Shapes read (every other field and entry type is passed over):
//! - every entry: `type`, `sessionId`, `cwd`, `timestamp`, `uuid`, `isSidechain`, `isMeta`;
//! - `type: "assistant"`: `message.content[]` blocks `{type: "tool_use", id, name, input}`
//!   and `message.stop_reason`; the subagent tool is `Agent` (older versions: `Task`) with
//!   `input.{description, prompt, subagent_type}`;
//! - `type: "user"`: a prompt (string content or text blocks), or `tool_result` blocks
//!   `{tool_use_id, is_error, content}` with a top-level `toolUseResult` object that, for
//!   the subagent tool, carries `status` (`completed`, `async_launched`, …), `agentId`,
//!   `agentType`, `totalTokens`, `totalDurationMs`, `totalToolUseCount`, `isAsync`,
//!   `outputFile`, `content`;
//! - a subagent log holds the child's own entries (`isSidechain: true`); the parent's
//!   `toolUseResult.agentId` names its file, which links it to the spawning call.
//!
//! Mapping: one session row per `sessionId` (execution `'unknown'`, task = the log's
//! `cwd`); a turn per non-sidechain prompt, completed by the next prompt (or at the end
//! of the log when its last stop reason says the model finished); one tool-call message
//! per tool use; one subagent row per `Agent`/`Task` call. The child log's tool uses
//! become messages of the same session whose parent is the spawning call. Entries of all
//! logs are merged in time order, so child activity lands in the turn open at the time.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fanout_acp::{Dialect, FrameOrigin, SubagentTask, ToolFrame};
use fanout_store::{Store, Timestamp, is_terminal_tool_status};
use serde_json::{Map, Value};

use super::discover::subagent_log_agent_id;
use super::lines::NumberedLines;
use super::{FileSummary, ImportError, ImportProgress, SourceKind};
use crate::capture::{Capture, CaptureConfig};

/// Claude Code's subagent tool (`Task` before it was renamed `Agent`).
const SUBAGENT_TOOL_NAMES: [&str; 2] = ["Agent", "Task"];

/// What a Claude session folder becomes, entry by entry.
#[derive(Debug)]
struct Entry {
    at: Timestamp,
    session: String,
    cwd: Option<String>,
    sidechain: bool,
    kind: EntryKind,
}

#[derive(Debug)]
enum EntryKind {
    /// A user prompt; `text` is kept for sidechain prompts only (child-log linking).
    Prompt { key: String, text: Option<String> },
    Assistant {
        uses: Vec<ToolUse>,
        stop_reason: Option<String>,
    },
    ToolResults {
        results: Vec<ToolResult>,
        /// Boxed: most results are not a subagent's, and entries are held in memory.
        /// The entry's `toolUseResult`: for the subagent tool, Claude's result object.
        agent_result: Option<Box<Map<String, Value>>>,
    },
}

#[derive(Debug)]
struct ToolUse {
    id: String,
    title: String,
    kind: &'static str,
    /// Set for the subagent tool.
    subagent: Option<SubagentTask>,
}

#[derive(Debug)]
struct ToolResult {
    tool_use_id: String,
    is_error: bool,
    text: Option<String>,
}

/// One log's entries, in file order.
struct LogEntries {
    entries: VecDeque<Entry>,
    /// Subagent logs: the agent id from the file name (`agent-<id>.jsonl`).
    agent_id: Option<String>,
    /// Subagent logs: the first sidechain prompt, to link by prompt when no id matches.
    first_prompt: Option<String>,
}

pub(super) async fn import_claude_session(
    store: Arc<dyn Store>,
    log: &Path,
    subagent_logs: &[PathBuf],
    progress: &dyn ImportProgress,
) -> Result<FileSummary, ImportError> {
    let mut summary = FileSummary::new(log, SourceKind::ClaudeNative);
    summary.subagent_logs = subagent_logs.to_vec();
    let fallback_session = file_stem(log).unwrap_or_default();
    // Everything is read before anything is written: an unreadable subagent log fails
    // the whole session without leaving half of it recorded.
    let parent = read_log(log, &fallback_session, None, &mut summary, progress).await?;
    let mut children = Vec::new();
    for path in subagent_logs {
        let agent_id = subagent_log_agent_id(path).map(str::to_owned);
        children.push(read_log(path, &fallback_session, agent_id, &mut summary, progress).await?);
    }

    let links = ChildLinks::from_parent(&parent.entries);
    let mut streams = vec![(None, parent.entries)];
    for child in children {
        let spawning_call = links.spawning_call(&child);
        streams.push((spawning_call, child.entries));
    }

    let mut capture = Capture::new(
        store,
        CaptureConfig {
            agent_execution_id: None,
            task_id: None,
            agent_command: None,
        },
    );
    // Entries are replayed into capture's queue and committed in groups, as transcript
    // import commits its chunks: one transaction per group, not one per write.
    let mut replay = Replay::default();
    while let Some((spawning_call, entry)) = next_in_time_order(&mut streams) {
        replay.apply(&mut capture, entry, spawning_call.as_deref());
        if capture.queued_writes() >= GROUP_WRITES {
            capture.commit_queued().await;
        }
    }
    replay.finish(&mut capture);
    capture.commit_queued().await;
    summary.capture = capture.stats();
    summary.counters = capture.counters().snapshot();
    Ok(summary)
}

/// Queued writes per group commit (about the size of a transcript-import chunk).
const GROUP_WRITES: usize = 512;

fn file_stem(path: &Path) -> Option<String> {
    path.file_stem().and_then(|s| s.to_str()).map(str::to_owned)
}

/// Pops the earliest head among the streams (ties: the earlier stream, the parent log
/// first). Each log keeps its own order.
fn next_in_time_order(
    streams: &mut [(Option<String>, VecDeque<Entry>)],
) -> Option<(Option<String>, Entry)> {
    let index = streams
        .iter()
        .enumerate()
        .filter_map(|(i, (_, entries))| entries.front().map(|e| (e.at, i)))
        .min()?
        .1;
    let (spawning_call, entries) = &mut streams[index];
    entries.pop_front().map(|e| (spawning_call.clone(), e))
}

async fn read_log(
    path: &Path,
    fallback_session: &str,
    agent_id: Option<String>,
    summary: &mut FileSummary,
    progress: &dyn ImportProgress,
) -> Result<LogEntries, ImportError> {
    let mut lines = NumberedLines::open(path).await?;
    let mut log = LogEntries {
        entries: VecDeque::new(),
        agent_id,
        first_prompt: None,
    };
    while let Some((number, consumed, line)) = lines.next_line().await? {
        progress.advanced(consumed);
        if line.trim_ascii().is_empty() {
            continue;
        }
        summary.frames += 1;
        match parse_entry(line, fallback_session, number) {
            Ok(Some(entry)) => {
                if let EntryKind::Prompt {
                    text: Some(text), ..
                } = &entry.kind
                    && log.first_prompt.is_none()
                {
                    log.first_prompt = Some(text.clone());
                }
                log.entries.push_back(entry);
            }
            Ok(None) => {}
            Err(reason) => {
                summary.bad_line(path, number, reason);
                if let Some(error) = summary.errors.last() {
                    progress.line_error(error);
                }
            }
        }
    }
    Ok(log)
}

/// Which parent call spawned which subagent log.
struct ChildLinks {
    by_agent_id: HashMap<String, String>,
    by_prompt: HashMap<String, String>,
}

impl ChildLinks {
    fn from_parent(entries: &VecDeque<Entry>) -> Self {
        let mut links = ChildLinks {
            by_agent_id: HashMap::new(),
            by_prompt: HashMap::new(),
        };
        for entry in entries {
            match &entry.kind {
                EntryKind::Assistant { uses, .. } => {
                    for tool in uses {
                        if let Some(task) = &tool.subagent
                            && !task.prompt.is_empty()
                        {
                            links
                                .by_prompt
                                .entry(task.prompt.clone())
                                .or_insert_with(|| tool.id.clone());
                        }
                    }
                }
                EntryKind::ToolResults {
                    results,
                    agent_result: Some(result),
                } => {
                    if let (Some(agent_id), Some(first)) =
                        (text(result.get("agentId")), results.first())
                    {
                        links
                            .by_agent_id
                            .entry(agent_id.clone())
                            .or_insert_with(|| first.tool_use_id.clone());
                    }
                }
                _ => {}
            }
        }
        links
    }

    fn spawning_call(&self, child: &LogEntries) -> Option<String> {
        child
            .agent_id
            .as_ref()
            .and_then(|id| self.by_agent_id.get(id))
            .or_else(|| {
                child
                    .first_prompt
                    .as_ref()
                    .and_then(|p| self.by_prompt.get(p))
            })
            .cloned()
    }
}

/// A tool call as known so far (the accumulator the ACP tracker keeps for the wire).
struct KnownTool {
    title: Option<String>,
    kind: Option<&'static str>,
    parent: Option<String>,
    subagent: Option<SubagentTask>,
    last_status: Option<String>,
}

impl KnownTool {
    /// Once terminal, the row's status stays terminal (as the ACP tracker keeps it).
    fn advance_status(&mut self, status: &str) {
        if !self
            .last_status
            .as_deref()
            .is_some_and(is_terminal_tool_status)
        {
            self.last_status = Some(status.to_owned());
        }
    }
}

#[derive(Default)]
struct SessionTurns {
    open_turn: Option<String>,
    last_activity: Option<Timestamp>,
    last_stop_reason: Option<String>,
}

/// Replays merged entries into a [`Capture`].
#[derive(Default)]
struct Replay {
    /// Sessions opened, and whether with a cwd (a later cwd re-opens the session).
    opened: HashMap<String, bool>,
    turns: HashMap<String, SessionTurns>,
    tools: HashMap<(String, String), KnownTool>,
    /// Sessions in first-seen order, for a deterministic finish.
    order: Vec<String>,
}

impl Replay {
    fn apply(&mut self, capture: &mut Capture, entry: Entry, spawning_call: Option<&str>) {
        let session = entry.session.clone();
        let had_cwd = self.opened.get(&session).copied();
        if had_cwd.is_none() {
            self.order.push(session.clone());
        }
        if had_cwd.is_none() || (had_cwd == Some(false) && entry.cwd.is_some()) {
            self.opened.insert(session.clone(), entry.cwd.is_some());
            capture.queue_open_session(&session, entry.cwd.clone(), entry.at);
        }
        match entry.kind {
            EntryKind::Prompt { key, .. } if !entry.sidechain => {
                self.close_turn(capture, &session);
                capture.queue_start_turn(&session, &key, entry.at);
                self.turns.entry(session.clone()).or_default().open_turn = Some(key);
            }
            EntryKind::Prompt { .. } => {}
            EntryKind::Assistant { uses, stop_reason } => {
                for tool in uses {
                    self.tool_use(capture, &session, tool, spawning_call, entry.at);
                }
                if !entry.sidechain && stop_reason.is_some() {
                    self.turns
                        .entry(session.clone())
                        .or_default()
                        .last_stop_reason = stop_reason;
                }
            }
            EntryKind::ToolResults {
                results,
                agent_result,
            } => {
                let mut agent_result = agent_result;
                for result in results {
                    self.tool_result(
                        capture,
                        &session,
                        result,
                        &mut agent_result,
                        spawning_call,
                        entry.at,
                    );
                }
            }
        }
        if !entry.sidechain {
            self.turns.entry(session).or_default().last_activity = Some(entry.at);
        }
    }

    /// Completes the session's open turn at its last activity.
    fn close_turn(&mut self, capture: &mut Capture, session: &str) {
        let Some(turns) = self.turns.get_mut(session) else {
            return;
        };
        let Some(key) = turns.open_turn.take() else {
            return;
        };
        let (Some(at), stop_reason) = (turns.last_activity, turns.last_stop_reason.take()) else {
            return;
        };
        capture.queue_end_turn(session, &key, stop_reason, at);
    }

    /// At the end of the folder, a last turn is completed only when its last stop reason
    /// says the model finished: a log still being written keeps its turn open, and
    /// completion is write-once.
    fn finish(&mut self, capture: &mut Capture) {
        for session in std::mem::take(&mut self.order) {
            let finished = self.turns.get(&session).is_some_and(|t| {
                t.last_stop_reason
                    .as_deref()
                    .is_some_and(|reason| reason != "tool_use")
            });
            if finished {
                self.close_turn(capture, &session);
            }
        }
    }

    /// The accumulator of a tool call, and whether this is its first frame. A call first
    /// seen in a subagent log is nested under the spawning call.
    fn known_tool(
        &mut self,
        session: &str,
        tool_call_id: &str,
        spawning_call: Option<&str>,
    ) -> (bool, &mut KnownTool) {
        let key = (session.to_owned(), tool_call_id.to_owned());
        let is_new = !self.tools.contains_key(&key);
        let known = self.tools.entry(key).or_insert_with(|| KnownTool {
            title: None,
            kind: None,
            parent: spawning_call.map(str::to_owned),
            subagent: None,
            last_status: None,
        });
        (is_new, known)
    }

    fn tool_use(
        &mut self,
        capture: &mut Capture,
        session: &str,
        tool: ToolUse,
        spawning_call: Option<&str>,
        at: Timestamp,
    ) {
        let (is_new, known) = self.known_tool(session, &tool.id, spawning_call);
        known.title = Some(tool.title);
        known.kind = Some(tool.kind);
        if known.subagent.is_none() {
            known.subagent = tool.subagent;
        }
        let status = "pending";
        known.advance_status(status);
        let frame = tool_frame(
            session,
            &tool.id,
            known,
            Some(status),
            is_new,
            FrameOrigin::ToolCall,
        );
        capture.queue_tool_frame(&frame, at);
    }

    fn tool_result(
        &mut self,
        capture: &mut Capture,
        session: &str,
        result: ToolResult,
        agent_result: &mut Option<Box<Map<String, Value>>>,
        spawning_call: Option<&str>,
        at: Timestamp,
    ) {
        let (is_new, known) = self.known_tool(session, &result.tool_use_id, spawning_call);
        let status = if result.is_error {
            "failed"
        } else {
            "completed"
        };
        if let Some(task) = known.subagent.as_mut() {
            // The entry's one `toolUseResult` belongs to its first subagent result.
            if let Some(agent) = agent_result.take() {
                task.merge_claude_result(&agent);
            }
            if task.result_text.as_deref().is_none_or(str::is_empty) {
                task.result_text = result.text;
            }
        }
        known.advance_status(status);
        let frame = tool_frame(
            session,
            &result.tool_use_id,
            known,
            Some(status),
            is_new,
            FrameOrigin::ToolCallUpdate,
        );
        capture.queue_tool_frame(&frame, at);
    }
}

fn tool_frame(
    session: &str,
    tool_call_id: &str,
    known: &KnownTool,
    tool_status: Option<&str>,
    is_new: bool,
    origin: FrameOrigin,
) -> ToolFrame {
    ToolFrame {
        acp_session_id: session.to_owned(),
        tool_call_id: tool_call_id.to_owned(),
        wire_tool_call_id: tool_call_id.to_owned(),
        wire_session_id: session.to_owned(),
        parent_tool_call_id: known.parent.clone(),
        title: known.title.clone(),
        kind: known.kind.map(str::to_owned),
        tool_status: tool_status.map(str::to_owned),
        last_tool_status: known.last_status.clone(),
        is_new,
        subagent: known.subagent.clone(),
        dialect: known.subagent.as_ref().map(|_| Dialect::Claude),
        origin,
    }
}

/// One log line -> an entry (`None`: an entry type or shape that records nothing).
fn parse_entry(line: &[u8], fallback_session: &str, number: u64) -> Result<Option<Entry>, String> {
    let value: Value = serde_json::from_slice(line).map_err(|e| format!("not JSON: {e}"))?;
    let Some(object) = value.as_object() else {
        return Err("not a JSON object".to_owned());
    };
    let entry_type = object
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if entry_type != "user" && entry_type != "assistant" {
        return Ok(None);
    }
    let at = object
        .get("timestamp")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{entry_type} entry without a \"timestamp\" string"))
        .and_then(|t| Timestamp::parse(t).map_err(|e| format!("bad \"timestamp\": {e}")))?;
    let message = object
        .get("message")
        .and_then(Value::as_object)
        .ok_or_else(|| format!("{entry_type} entry without a \"message\" object"))?;
    let session = text(object.get("sessionId")).unwrap_or_else(|| fallback_session.to_owned());
    let sidechain = object.get("isSidechain").and_then(Value::as_bool) == Some(true);
    let is_meta = object.get("isMeta").and_then(Value::as_bool) == Some(true);
    let content = message.get("content");
    let kind = if entry_type == "assistant" {
        let uses: Vec<ToolUse> = blocks(content)
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
            .filter_map(tool_use)
            .collect();
        let stop_reason = text(message.get("stop_reason"));
        if uses.is_empty() && stop_reason.is_none() {
            return Ok(None);
        }
        EntryKind::Assistant { uses, stop_reason }
    } else {
        let results: Vec<ToolResult> = blocks(content)
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
            .filter_map(tool_result)
            .collect();
        if !results.is_empty() {
            EntryKind::ToolResults {
                results,
                agent_result: object
                    .get("toolUseResult")
                    .and_then(Value::as_object)
                    .map(|result| Box::new(result.clone())),
            }
        } else if is_meta {
            return Ok(None);
        } else {
            let Some(prompt) = prompt_text(content) else {
                return Ok(None);
            };
            let key = text(object.get("uuid")).unwrap_or_else(|| format!("line-{number}"));
            EntryKind::Prompt {
                key,
                text: sidechain.then_some(prompt),
            }
        }
    };
    Ok(Some(Entry {
        at,
        session,
        cwd: text(object.get("cwd")),
        sidechain,
        kind,
    }))
}

/// A non-empty string.
fn text(value: Option<&Value>) -> Option<String> {
    value
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

fn blocks(content: Option<&Value>) -> impl Iterator<Item = &Map<String, Value>> {
    content
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
}

/// The text of a prompt: string content, or its text blocks joined.
fn prompt_text(content: Option<&Value>) -> Option<String> {
    if let Some(text) = content.and_then(Value::as_str) {
        return Some(text.to_owned());
    }
    joined_text(content)
}

fn joined_text(content: Option<&Value>) -> Option<String> {
    let parts: Vec<&str> = blocks(content)
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n"))
}

fn tool_use(block: &Map<String, Value>) -> Option<ToolUse> {
    let id = text(block.get("id"))?;
    let name = text(block.get("name")).unwrap_or_default();
    let input = block.get("input");
    let field = |key: &str| text(input.and_then(|i| i.get(key)));
    let is_subagent = SUBAGENT_TOOL_NAMES.contains(&name.as_str());
    let subagent = is_subagent.then(|| SubagentTask {
        description: field("description").unwrap_or_default(),
        prompt: field("prompt").unwrap_or_default(),
        subagent_type: field("subagent_type").unwrap_or_default(),
        ..SubagentTask::default()
    });
    let title = if is_subagent {
        field("description").unwrap_or_else(|| name.clone())
    } else {
        name.clone()
    };
    Some(ToolUse {
        id,
        title,
        kind: acp_kind(&name),
        subagent,
    })
}

/// The ACP tool kind claude-agent-acp reports for a Claude Code tool.
fn acp_kind(tool_name: &str) -> &'static str {
    match tool_name {
        "Read" | "NotebookRead" => "read",
        "Edit" | "MultiEdit" | "Write" | "NotebookEdit" => "edit",
        "Bash" | "BashOutput" | "KillShell" => "execute",
        "Grep" | "Glob" | "LS" => "search",
        "WebFetch" | "WebSearch" => "fetch",
        "Agent" | "Task" | "TodoWrite" | "ExitPlanMode" => "think",
        _ => "other",
    }
}

fn tool_result(block: &Map<String, Value>) -> Option<ToolResult> {
    Some(ToolResult {
        tool_use_id: text(block.get("tool_use_id"))?,
        is_error: block.get("is_error").and_then(Value::as_bool) == Some(true),
        text: block.get("content").and_then(|c| {
            c.as_str()
                .map(str::to_owned)
                .or_else(|| joined_text(Some(c)))
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_tool_use_becomes_a_subagent_launch() {
        let line = br#"{"type":"assistant","sessionId":"s","cwd":"/p","timestamp":"2026-08-03T15:32:21Z","message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Agent","input":{"description":"d","prompt":"p","subagent_type":"t"}}],"stop_reason":"tool_use"}}"#;
        let entry = parse_entry(line, "f", 1)
            .expect("parses")
            .expect("an entry");
        let EntryKind::Assistant { uses, stop_reason } = entry.kind else {
            panic!("assistant entry");
        };
        assert_eq!(stop_reason.as_deref(), Some("tool_use"));
        assert_eq!(uses[0].title, "d");
        assert_eq!(
            uses[0].subagent.as_ref().map(|t| t.subagent_type.as_str()),
            Some("t")
        );
    }

    #[test]
    fn bad_entries_say_why() {
        assert!(parse_entry(b"{", "f", 1).is_err_and(|e| e.contains("not JSON")));
        assert!(parse_entry(b"[1]", "f", 1).is_err_and(|e| e.contains("object")));
        assert!(
            parse_entry(br#"{"type":"user","message":{"content":"hi"}}"#, "f", 1)
                .is_err_and(|e| e.contains("timestamp"))
        );
        assert!(matches!(
            parse_entry(br#"{"type":"summary","summary":"x"}"#, "f", 1),
            Ok(None)
        ));
    }
}
