//! Claude Code's native session folders (DESIGN 3.7): `<id>.jsonl`, its subagent logs
//! `<id>/subagents/agent-<agentId>.jsonl` (nested children in the same flat folder) and
//! workflow agents `<id>/subagents/workflows/<wf>/agent-<agentId>.jsonl`, each with an
//! optional `agent-<agentId>.meta.json` (`toolUseId`, `agentType`, `parentAgentId`,
//! `spawnDepth`, …, every key optional).
//!
//! A child log links to its spawning call by its meta's `toolUseId`, else by the
//! `toolUseResult.agentId` of a result in any log of the session (a nested child's is in
//! its parent agent's log), else by its first prompt being a call's `input.prompt`. Links
//! are made within one session folder, so agent ids that repeat across sessions never
//! meet: a child is keyed by (parent session, agentId).
//!
//! Usage: Claude writes one record per content block, each repeating its response's
//! `usage`, and a subagent's first record of a response may carry a partial
//! `output_tokens`: each log's records of one `message.id` become one response with the
//! largest figure per field. The session's own log is read before its subagent logs, and
//! a subagent log's records of a response the session's own log has (a side-question log
//! replaying the parent) add nothing. Failed requests (`<synthetic>`, `isApiErrorMessage`)
//! are no responses. Entries of all logs are then replayed in time order (`replay`).
//!
//! Incremental: a file that grew is read whole, but only the lines from its offset on are
//! written; the earlier ones give their context (open turns, calls in flight, links).

mod parse;
mod replay;

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fanout_store::{ImportFileRecord, Source, Store};
use serde::Deserialize;

use super::discover::subagent_log_agent_id;
use super::lenient::Text;
use super::source::{KnownFiles, read_source_lines};
use super::{FileSummary, ImportError, ImportProgress, SourceKind};
use crate::capture::{Capture, CaptureConfig};
use parse::{Entry, EntryKind, LogState, parse_line};
use replay::Replay;

/// Queued writes per group commit.
const GROUP_WRITES: usize = 4096;

/// A log's stream key: its spawning call and its agent id (`None`, `None` for the
/// session's own log).
type LogKey = (Option<String>, Option<String>);

/// A Claude session folder, read and linked, ready to be written.
pub(super) struct ReadSession {
    summary: FileSummary,
    /// Each log's entries in file order, with its spawning call; the session's own log
    /// first.
    streams: Vec<(LogKey, VecDeque<Entry>)>,
    /// The `import_files` state of every file read, written with the session's last rows.
    files: Vec<ImportFileRecord>,
}

/// One log's entries and what links it.
struct LogEntries {
    entries: VecDeque<Entry>,
    /// Subagent logs: the agent id from the file name (`agent-<id>.jsonl`).
    agent_id: Option<String>,
    /// Subagent logs: the meta file's `toolUseId`.
    meta_tool_use_id: Option<String>,
    /// Subagent logs: the first sidechain prompt, to link by prompt when no id matches.
    first_prompt: Option<String>,
}

/// `agent-<id>.meta.json`: the keys read (all optional).
#[derive(Deserialize, Default)]
struct Meta<'a> {
    #[serde(rename = "toolUseId", default, borrow)]
    tool_use_id: Text<'a>,
}

/// Reads a session's logs (the session's own first) and links its children.
pub(super) fn read_claude_session(
    log: &Path,
    subagent_logs: &[PathBuf],
    known: &KnownFiles,
    progress: &dyn ImportProgress,
) -> Result<ReadSession, ImportError> {
    let mut summary = FileSummary::new(log, SourceKind::ClaudeNative);
    summary.subagent_logs = subagent_logs.to_vec();
    let fallback_session = log
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default()
        .to_owned();
    let mut files = Vec::new();
    // Everything is read before anything is written: an unreadable log fails the whole
    // session without leaving half of it recorded.
    let parent = read_log(
        log,
        &fallback_session,
        None,
        known,
        &mut summary,
        &mut files,
        progress,
    )?;
    let own_responses: HashSet<String> = responses(&parent.entries).collect();
    let own_calls: HashSet<String> = tool_use_ids(&parent.entries).collect();
    let mut children = Vec::new();
    for path in subagent_logs {
        let agent_id = subagent_log_agent_id(path).map(str::to_owned);
        let mut child = read_log(
            path,
            &fallback_session,
            agent_id,
            known,
            &mut summary,
            &mut files,
            progress,
        )?;
        child.meta_tool_use_id = read_meta(path, &mut summary);
        drop_replays_of_the_session(&mut child.entries, &own_responses, &own_calls);
        children.push(child);
    }
    let links = ChildLinks::from_logs(std::iter::once(&parent).chain(&children));
    let mut streams = vec![((None, None), parent.entries)];
    for child in children {
        let spawning_call = links.spawning_call(&child);
        streams.push(((spawning_call, child.agent_id), child.entries));
    }
    Ok(ReadSession {
        summary,
        streams,
        files,
    })
}

/// Replays a read session: entries of all logs in time order through one [`Capture`]
/// (a session of more than `GROUP_WRITES` writes commits as it goes); the rest, the
/// files' import state last, stays queued for the unit's group commit.
pub(super) async fn replay_claude_session(
    store: Arc<dyn Store>,
    read: ReadSession,
) -> super::QueuedUnit {
    let ReadSession {
        summary,
        mut streams,
        files,
    } = read;
    let mut capture = Capture::new(store, CaptureConfig::default());
    capture.set_source(Source::Import);
    let mut replay = Replay::default();
    while let Some(((spawning_call, agent_id), entry)) =
        super::next_in_time_order(&mut streams, |e: &Entry| e.at)
    {
        replay.apply(
            &mut capture,
            entry,
            spawning_call.as_deref(),
            agent_id.as_deref(),
        );
        if capture.queued_writes() >= GROUP_WRITES {
            capture.commit_queued().await;
        }
    }
    replay.finish(&mut capture);
    super::queue_unit(capture, files, summary)
}

/// Reads one log: its entries, its bad lines and notes, its import state. An unchanged
/// file of a session that changed elsewhere is read for its context only.
#[allow(clippy::too_many_arguments)]
fn read_log(
    path: &Path,
    fallback_session: &str,
    agent_id: Option<String>,
    known: &KnownFiles,
    summary: &mut FileSummary,
    files: &mut Vec<ImportFileRecord>,
    progress: &dyn ImportProgress,
) -> Result<LogEntries, ImportError> {
    let mut log = LogEntries {
        entries: VecDeque::new(),
        agent_id,
        meta_tool_use_id: None,
        first_prompt: None,
    };
    let mut state = LogState::default();
    // The first record of each response in this log, by response id.
    let mut first_record: HashMap<String, usize> = HashMap::new();
    read_source_lines(
        path,
        "log",
        known,
        summary,
        files,
        progress,
        |line, writes| {
            let parsed = parse_line(line.bytes, fallback_session, line.number, &mut state)?;
            if let Some(mut entry) = parsed.entry {
                entry.writes = writes;
                if let EntryKind::Prompt {
                    text: Some(text), ..
                } = &entry.kind
                    && log.first_prompt.is_none()
                {
                    log.first_prompt = Some(text.clone());
                }
                fold_response(&mut log.entries, &mut first_record, &mut entry);
                log.entries.push_back(entry);
            }
            Ok(parsed.note)
        },
    )?;
    Ok(log)
}

/// One response, however many records repeat it: a later record's usage is folded into
/// the first record's (the largest figure per field, the first model) and written if any
/// record of it is new.
fn fold_response(
    entries: &mut VecDeque<Entry>,
    first_record: &mut HashMap<String, usize>,
    entry: &mut Entry,
) {
    let EntryKind::Assistant { response, .. } = &mut entry.kind else {
        return;
    };
    let Some(later) = response.take() else {
        return;
    };
    let Some(&index) = first_record.get(&later.id) else {
        first_record.insert(later.id.clone(), entries.len());
        *response = Some(later);
        if let EntryKind::Assistant {
            response: Some(first),
            ..
        } = &mut entry.kind
        {
            first.writes = entry.writes;
        }
        return;
    };
    if let Some(Entry {
        kind: EntryKind::Assistant {
            response: Some(first),
            ..
        },
        ..
    }) = entries.get_mut(index)
    {
        first.absorb(&later, entry.writes);
    }
}

/// The response ids of a log's entries.
fn responses(entries: &VecDeque<Entry>) -> impl Iterator<Item = String> + '_ {
    entries.iter().filter_map(|e| match &e.kind {
        EntryKind::Assistant {
            response: Some(r), ..
        } => Some(r.id.clone()),
        _ => None,
    })
}

/// The tool-use ids of a log's entries.
fn tool_use_ids(entries: &VecDeque<Entry>) -> impl Iterator<Item = String> + '_ {
    entries.iter().flat_map(|e| match &e.kind {
        EntryKind::Assistant { uses, .. } => uses.iter().map(|u| u.id.clone()).collect(),
        _ => Vec::new(),
    })
}

/// A side-question log under `subagents/` replays responses of the session's own log
/// (same `message.id`) and the results of its calls: those records add nothing.
fn drop_replays_of_the_session(
    entries: &mut VecDeque<Entry>,
    own_responses: &HashSet<String>,
    own_calls: &HashSet<String>,
) {
    entries.retain(|e| match &e.kind {
        EntryKind::Assistant { response, uses, .. } => {
            let replayed_response = response
                .as_ref()
                .is_some_and(|r| own_responses.contains(&r.id));
            let replayed_calls = !uses.is_empty() && uses.iter().all(|u| own_calls.contains(&u.id));
            !(replayed_response || replayed_calls)
        }
        EntryKind::ToolResults { results, .. } => {
            !results.iter().all(|r| own_calls.contains(&r.tool_use_id))
        }
        EntryKind::Prompt { .. } => true,
    });
}

/// `agent-<id>.meta.json` beside a subagent log: its `toolUseId`. A missing meta is
/// silent (it is optional); one that is not JSON is named and ignored.
fn read_meta(log: &Path, summary: &mut FileSummary) -> Option<String> {
    let name = log.file_name()?.to_str()?.strip_suffix(".jsonl")?;
    let path = log.with_file_name(format!("{name}.meta.json"));
    let bytes = std::fs::read(&path).ok()?;
    match serde_json::from_slice::<super::lenient::Object<Meta<'_>>>(&bytes) {
        Ok(meta) => meta.0.tool_use_id.owned(),
        Err(e) => {
            summary.note(
                &path,
                1,
                format!("not JSON ({e}): ignored, the log is linked by its results instead"),
            );
            None
        }
    }
}

/// Which call spawned which subagent log.
struct ChildLinks {
    by_agent_id: HashMap<String, String>,
    by_prompt: HashMap<String, String>,
}

impl ChildLinks {
    /// The results naming an agent, and the subagent calls by prompt, of every log of
    /// the session (a nested child is spawned in its parent agent's log).
    fn from_logs<'a>(logs: impl Iterator<Item = &'a LogEntries>) -> Self {
        let mut links = ChildLinks {
            by_agent_id: HashMap::new(),
            by_prompt: HashMap::new(),
        };
        for entry in logs.flat_map(|log| &log.entries) {
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
                    if let (Some(agent_id), Some(first)) = (
                        result.get("agentId").and_then(|v| v.as_str()),
                        results.first(),
                    ) {
                        links
                            .by_agent_id
                            .entry(agent_id.to_owned())
                            .or_insert_with(|| first.tool_use_id.clone());
                    }
                }
                _ => {}
            }
        }
        links
    }

    /// The meta's `toolUseId` first, then a result naming the agent, then the prompt.
    fn spawning_call(&self, child: &LogEntries) -> Option<String> {
        child
            .meta_tool_use_id
            .clone()
            .or_else(|| {
                child
                    .agent_id
                    .as_ref()
                    .and_then(|id| self.by_agent_id.get(id))
                    .cloned()
            })
            .or_else(|| {
                child
                    .first_prompt
                    .as_ref()
                    .and_then(|p| self.by_prompt.get(p))
                    .cloned()
            })
    }
}
