//! Every example transcript of `acp-examples/` produces exactly the rows its README lists.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fanout_acp::{Direction, SubagentTask, ToolFrame, Tracker, TrackerEvent};
use serde_json::Value;

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp-examples")
}

/// Feeds one transcript (header line, then `{ts, dir, line}`) through a fresh tracker.
fn replay(name: &str) -> Vec<TrackerEvent> {
    replay_file(&examples_dir().join(name))
}

fn replay_file(path: &Path) -> Vec<TrackerEvent> {
    let name = path.display();
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(header["type"], "fanout-transcript");
    let mut tracker = Tracker::new();
    let mut events = Vec::new();
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let record: Value = serde_json::from_str(line).unwrap();
        let direction = Direction::from_tag(record["dir"].as_str().unwrap()).unwrap();
        events.extend(tracker.observe(direction, record["line"].as_str().unwrap()));
    }
    let stats = tracker.stats();
    assert_eq!(stats.not_understood, 0, "{name}");
    assert_eq!(stats.unmatched_responses, 0, "{name}");
    events
}

fn tool_frames(events: &[TrackerEvent]) -> Vec<&ToolFrame> {
    events
        .iter()
        .filter_map(|event| match event {
            TrackerEvent::Tool(frame) => Some(&**frame),
            _ => None,
        })
        .collect()
}

/// What the store would end up with per subagent row: the final cumulative payload and
/// the settled (first terminal, else last) tool status.
#[derive(Debug, PartialEq)]
struct Row {
    acp_session_id: String,
    parent_tool_call_id: Option<String>,
    tool_status: Option<String>,
    task: SubagentTask,
}

fn subagent_rows(events: &[TrackerEvent]) -> BTreeMap<String, Row> {
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    for frame in tool_frames(events) {
        let Some(task) = &frame.subagent else {
            continue;
        };
        let row = rows
            .entry(frame.tool_call_id.clone())
            .or_insert_with(|| Row {
                acp_session_id: frame.acp_session_id.clone(),
                parent_tool_call_id: None,
                tool_status: None,
                task: SubagentTask::default(),
            });
        assert_eq!(row.acp_session_id, frame.acp_session_id);
        row.task = task.clone();
        if row.parent_tool_call_id.is_none() {
            row.parent_tool_call_id = frame.parent_tool_call_id.clone();
        }
        let settled = row
            .tool_status
            .as_deref()
            .is_some_and(fanout_acp::is_terminal_tool_status);
        if !settled && let Some(status) = &frame.tool_status {
            row.tool_status = Some(status.clone());
        }
        assert_eq!(
            frame.last_tool_status, row.tool_status,
            "{}",
            frame.tool_call_id
        );
    }
    rows
}

fn ids(rows: &BTreeMap<String, Row>) -> Vec<&str> {
    rows.keys().map(String::as_str).collect()
}

fn session_and_turn(events: &[TrackerEvent], session: &str) {
    assert!(events.contains(&TrackerEvent::SessionOpened {
        acp_session_id: session.into(),
        cwd: Some("/home/dev/proj".into()),
        method: fanout_acp::SessionOpenMethod::New,
    }));
    assert!(events.contains(&TrackerEvent::PromptStarted {
        acp_session_id: session.into(),
        request_id: "2".into(),
    }));
    assert!(events.contains(&TrackerEvent::PromptEnded {
        acp_session_id: session.into(),
        request_id: "2".into(),
        stop_reason: Some("end_turn".into()),
        error: None,
    }));
}

#[test]
fn claude_three_reviewers() {
    let events = replay("claude.transcript.jsonl");
    let session = "c1a2b3c4-0000-4000-8000-000000000001";
    session_and_turn(&events, session);
    let rows = subagent_rows(&events);
    assert_eq!(
        ids(&rows),
        ["toolu_01REVIEW01", "toolu_01REVIEW02", "toolu_01REVIEW03"]
    );

    let review01 = &rows["toolu_01REVIEW01"];
    assert_eq!(review01.acp_session_id, session);
    assert_eq!(review01.tool_status.as_deref(), Some("completed"));
    assert_eq!(review01.parent_tool_call_id, None);
    assert_eq!(
        review01.task,
        SubagentTask {
            description: "security-reviewer pass".into(),
            prompt: "Review the diff as security-reviewer".into(),
            subagent_type: "security-reviewer".into(),
            status: Some("completed".into()),
            agent_id: Some("a9f3c2d1e0b4a5c6".into()),
            model: Some("claude-opus-4-8[1m]".into()),
            duration_ms: Some(48213),
            total_tokens: Some(275_717),
            tool_use_count: Some(11),
            result_text: Some("VERDICT: APPROVE".into()),
            ..SubagentTask::default()
        }
    );

    let review02 = &rows["toolu_01REVIEW02"];
    assert_eq!(review02.tool_status.as_deref(), Some("completed"));
    assert_eq!(
        review02.task,
        SubagentTask {
            description: "perf-reviewer pass".into(),
            prompt: "Review the diff as perf-reviewer".into(),
            subagent_type: "perf-reviewer".into(),
            status: Some("completed".into()),
            agent_id: Some("b1b2b3b4b5b6b7b8".into()),
            duration_ms: Some(900),
            total_tokens: Some(1200),
            tool_use_count: Some(0),
            result_text: Some("no findings".into()),
            ..SubagentTask::default()
        }
    );

    let review03 = &rows["toolu_01REVIEW03"];
    assert_eq!(review03.tool_status.as_deref(), Some("completed"));
    assert_eq!(
        review03.task,
        SubagentTask {
            description: "style-reviewer pass".into(),
            prompt: "Review the diff as style-reviewer".into(),
            subagent_type: "style-reviewer".into(),
            status: Some("async_launched".into()),
            agent_id: Some("c7c7c7c7c7c7c7c7".into()),
            is_async: true,
            output_file: Some("/tmp/tasks/c7c7.output".into()),
            can_read_output_file: true,
            ..SubagentTask::default()
        }
    );
    let metadata = tool_frames(&events)
        .into_iter()
        .rfind(|frame| frame.tool_call_id == "toolu_01REVIEW03")
        .unwrap()
        .message_metadata();
    let task = &metadata["normalized"]["subagent_task"];
    assert_eq!(metadata["status"], "completed");
    assert_eq!(metadata["normalized"]["kind"], "subagent_task");
    assert_eq!(task["is_async"], true);
    for metric in ["duration_ms", "total_tokens", "tool_use_count"] {
        assert!(task.get(metric).is_none(), "{metric}");
    }

    // The nested Bash call is a plain tool call carrying its parent.
    let bash: Vec<&ToolFrame> = tool_frames(&events)
        .into_iter()
        .filter(|frame| frame.tool_call_id == "toolu_01CHILDBASH")
        .collect();
    assert_eq!(bash.len(), 2);
    for frame in &bash {
        assert!(frame.subagent.is_none());
        assert_eq!(
            frame.parent_tool_call_id.as_deref(),
            Some("toolu_01REVIEW01")
        );
        assert_eq!(
            frame.message_metadata()["parent_tool_call_id"],
            "toolu_01REVIEW01"
        );
    }
    assert_eq!(bash[1].tool_status.as_deref(), Some("completed"));
    assert_eq!(
        bash[0].message_metadata()["normalized"]["kind"],
        "shell_exec"
    );
}

#[test]
fn opencode_task() {
    let events = replay("opencode.transcript.jsonl");
    session_and_turn(&events, "ses_parent_opencode");
    let rows = subagent_rows(&events);
    assert_eq!(ids(&rows), ["call_7"]);
    let row = &rows["call_7"];
    assert_eq!(row.tool_status.as_deref(), Some("completed"));
    assert_eq!(
        row.task,
        SubagentTask {
            description: "Investigate".into(),
            prompt: "Find why test_login fails".into(),
            subagent_type: "general".into(),
            child_session_id: Some("ses_child_1".into()),
            model: Some("opencode/big-pickle".into()),
            ..SubagentTask::default()
        }
    );
}

#[test]
fn cursor_task_side_request() {
    let events = replay("cursor.transcript.jsonl");
    session_and_turn(&events, "cur-1");
    let rows = subagent_rows(&events);
    assert_eq!(ids(&rows), ["tool_2494c23d"]);
    let row = &rows["tool_2494c23d"];
    assert_eq!(row.tool_status.as_deref(), Some("completed"));
    assert_eq!(
        row.task,
        SubagentTask {
            description: "Summarize src JS files".into(),
            prompt: "Summarize src JS files".into(),
            agent_id: Some("eaa12f70-60506ebd5c78".into()),
            model: Some("composer-2.5-fast".into()),
            duration_ms: Some(4200),
            ..SubagentTask::default()
        }
    );
    let side = tool_frames(&events)
        .into_iter()
        .find(|frame| frame.origin == fanout_acp::FrameOrigin::CursorTask)
        .unwrap();
    assert_eq!(side.tool_status.as_deref(), Some("in_progress"));
    assert_eq!(
        side.subagent.as_ref().unwrap().agent_id.as_deref(),
        Some("eaa12f70-60506ebd5c78")
    );
}

#[test]
fn auggie_title_only() {
    let events = replay("auggie.transcript.jsonl");
    session_and_turn(&events, "aug-1");
    let rows = subagent_rows(&events);
    assert_eq!(ids(&rows), ["t-9"]);
    let row = &rows["t-9"];
    assert_eq!(row.tool_status.as_deref(), Some("completed"));
    assert_eq!(
        row.task,
        SubagentTask {
            description: "find the bug in the parser".into(),
            subagent_type: "explore".into(),
            result_text: Some("Bug is at parser.rs:42.".into()),
            ..SubagentTask::default()
        }
    );
}

#[test]
fn codex_spawn_and_foreign_lifecycle() {
    let events = replay("codex.transcript.jsonl");
    session_and_turn(&events, "cx-1");
    let rows = subagent_rows(&events);
    assert_eq!(ids(&rows), ["call-spawn"]);
    let row = &rows["call-spawn"];
    assert_eq!(row.tool_status.as_deref(), Some("completed"));
    assert_eq!(row.parent_tool_call_id, None);
    assert_eq!(
        row.task,
        SubagentTask {
            description: "Audit the ACP adapter".into(),
            prompt: "Audit the ACP adapter".into(),
            subagent_type: "review_agent".into(),
            status: Some("completed".into()),
            model: Some("gpt-5.2-codex".into()),
            child_session_id: Some("thread-child".into()),
            ..SubagentTask::default()
        }
    );
    assert!(
        tool_frames(&events)
            .iter()
            .all(|frame| frame.tool_call_id != "call-term"),
        "no row or message for the lifecycle wire id"
    );
}

#[test]
fn acp_native_subagent_update() {
    let events = replay("acp-native.transcript.jsonl");
    session_and_turn(&events, "parent-native");
    let rows = subagent_rows(&events);
    assert_eq!(ids(&rows), ["child-native-1"]);
    let row = &rows["child-native-1"];
    assert_eq!(row.acp_session_id, "parent-native");
    assert_eq!(row.tool_status.as_deref(), Some("completed"));
    assert_eq!(
        row.task,
        SubagentTask {
            description: "Reviews the diff".into(),
            status: Some("idle".into()),
            child_session_id: Some("child-native-1".into()),
            ..SubagentTask::default()
        }
    );
    let spawn: Vec<&ToolFrame> = tool_frames(&events)
        .into_iter()
        .filter(|frame| frame.tool_call_id == "spawn-1")
        .collect();
    assert_eq!(spawn.len(), 3);
    assert!(spawn.iter().all(|frame| frame.subagent.is_none()));
    assert!(events.contains(&TrackerEvent::SessionUpdate {
        acp_session_id: "parent-native".into(),
        wire_session_id: "child-native-1".into(),
        update_kind: "agent_message_chunk".into(),
        parent_tool_call_id: Some("child-native-1".into()),
        usage: None,
    }));
}

/// Transcripts recorded from real agents run offline give, at the tracker, the rows their
/// hand-written `<name>.expected.json` derives from DESIGN 3.3/3.6 (placeholders resolved
/// from the transcript). The fixtures live with the capture crate, which imports them end
/// to end into both engines.
#[test]
fn real_agent_transcripts_give_their_expected_rows() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fanout-capture/tests/fixtures/real");
    let files = fanout_acp::fixtures::expected_files(&dir).unwrap();
    assert!(!files.is_empty(), "{}: no fixtures", dir.display());
    for path in files {
        let expected = fanout_acp::fixtures::Expected::load(&path).unwrap();
        let transcript = expected.transcript_path().unwrap();
        let resolved = expected
            .resolve(
                &fanout_acp::fixtures::Transcript::read(&transcript).unwrap(),
                None,
            )
            .unwrap();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let rows = subagent_rows(&replay_file(&transcript));
        assert_eq!(rows.len(), resolved.rows.len(), "{file}: {:?}", ids(&rows));
        for want in &resolved.rows {
            let id = want["tool_call_id"].as_str().unwrap();
            let row = rows
                .get(id)
                .unwrap_or_else(|| panic!("{file}: no row {id}: {:?}", ids(&rows)));
            let text = |v: &str| (!v.is_empty()).then(|| v.to_owned());
            let got = serde_json::json!({
                "acp_session_id": row.acp_session_id,
                "parent_tool_call_id": row.parent_tool_call_id,
                "subagent_type": text(&row.task.subagent_type),
                "description": text(&row.task.description),
                "agent_id": row.task.agent_id,
                "child_session_id": row.task.child_session_id,
                "model": row.task.model,
                "agent_status": row.task.status,
                "tool_status": row.tool_status,
                "settled": row.tool_status.as_deref().is_some_and(fanout_acp::is_terminal_tool_status),
                "is_async": i64::from(row.task.is_async),
                "total_tokens": row.task.total_tokens.filter(|n| *n > 0),
                "tool_use_count": row.task.tool_use_count,
                "duration_ms": row.task.duration_ms.filter(|n| *n > 0),
            });
            for (column, value) in got.as_object().unwrap() {
                assert_eq!(value, &want[column], "{file} {id}: {column}");
            }
        }
    }
}

/// No recording goes unchecked: every transcript of the real-agent folder is named by
/// exactly one expected file, was recorded from an agent a registered dialect knows by its
/// `agentInfo.name`, and has its row in the folder README's table of fixtures, whose agent
/// column gives the version the agent reported; every row of that table is a fixture here
/// (so no agent version's recordings go missing while the README still lists them).
#[test]
fn every_real_transcript_has_its_expected_rows() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fanout-capture/tests/fixtures/real");
    let mut named = BTreeMap::new();
    for path in fanout_acp::fixtures::expected_files(&dir).unwrap() {
        let transcript = fanout_acp::fixtures::Expected::load(&path)
            .unwrap()
            .transcript_path()
            .unwrap();
        let previous = named.insert(transcript.canonicalize().unwrap(), path.clone());
        assert!(
            previous.is_none(),
            "{} is named twice",
            transcript.display()
        );
    }
    let table = fixture_table(&dir.join("README.md"));
    let mut transcripts = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(fixture) = file.strip_suffix(".transcript.jsonl") else {
            continue;
        };
        transcripts += 1;
        assert!(
            named.contains_key(&path.canonicalize().unwrap()),
            "{} has no expected file",
            path.display()
        );
        let (name, version) = fanout_acp::fixtures::Transcript::read(&path)
            .unwrap()
            .agent_info()
            .unwrap_or_else(|| panic!("{}: no initialize response", path.display()));
        assert!(
            fanout_acp::Dialect::for_agent_name(&name).is_some(),
            "{file}: agent {name:?} is no registered dialect's"
        );
        let agent = table
            .get(fixture)
            .unwrap_or_else(|| panic!("{fixture} has no row in the README's table"));
        assert!(
            !version.is_empty() && agent.contains(&version),
            "{fixture}: the README's agent {agent:?} is not the recorded {name} {version}"
        );
    }
    assert_eq!(named.len(), transcripts);
    for fixture in table.keys() {
        assert!(
            dir.join(format!("{fixture}.transcript.jsonl")).exists(),
            "the README lists {fixture}, which is not here"
        );
    }
}

/// The README's table of fixtures: fixture name -> the agent (exact version) column.
fn fixture_table(readme: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(readme).unwrap();
    let table = text
        .split("| fixture | agent (exact version) |")
        .nth(1)
        .expect("the README's table of fixtures");
    table
        .lines()
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            (cells[1].trim_matches('`').to_owned(), cells[2].to_owned())
        })
        .collect()
}

#[test]
fn qwen_foreground_and_background() {
    let events = replay("qwen.transcript.jsonl");
    session_and_turn(&events, "qw-1");
    let rows = subagent_rows(&events);
    assert_eq!(
        ids(&rows),
        ["call_bg", "call_fg"],
        "the child's read is no row"
    );
    assert_eq!(
        rows["call_fg"].task,
        SubagentTask {
            description: "Review the parser".into(),
            prompt: "Review src/parser.rs".into(),
            subagent_type: "reviewer".into(),
            status: Some("completed".into()),
            duration_ms: Some(1813),
            total_tokens: Some(230),
            tool_use_count: Some(1),
            ..SubagentTask::default()
        }
    );
    let background = &rows["call_bg"];
    assert_eq!(background.tool_status.as_deref(), Some("completed"));
    assert_eq!(
        background.task.status.as_deref(),
        Some("completed"),
        "the backgroundTask end"
    );
    assert!(background.task.is_async);
    let read = tool_frames(&events)
        .into_iter()
        .rfind(|frame| frame.tool_call_id == "call_child_read")
        .unwrap();
    assert_eq!(read.parent_tool_call_id.as_deref(), Some("call_fg"));
}

#[test]
fn gemini_launch_and_lone_denial() {
    let events = replay("gemini.transcript.jsonl");
    session_and_turn(&events, "gm-1");
    let rows = subagent_rows(&events);
    assert_eq!(ids(&rows), ["invoke_agent__call_1", "invoke_agent__call_2"]);
    assert_eq!(
        rows["invoke_agent__call_1"].task.subagent_type,
        "codebase_investigator"
    );
    assert_eq!(
        rows["invoke_agent__call_1"].tool_status.as_deref(),
        Some("completed")
    );
    assert_eq!(rows["invoke_agent__call_2"].task, SubagentTask::default());
    assert_eq!(
        rows["invoke_agent__call_2"].tool_status.as_deref(),
        Some("failed")
    );
}

#[test]
fn copilot_tasks_titled_task_background_and_unsettled() {
    let events = replay("copilot.transcript.jsonl");
    session_and_turn(&events, "cp-1");
    let rows = subagent_rows(&events);
    assert_eq!(ids(&rows), ["call_task_1", "call_task_2", "call_task_3"]);
    let first = &rows["call_task_1"];
    assert_eq!(first.tool_status.as_deref(), Some("completed"));
    assert_eq!(
        first.task,
        SubagentTask {
            description: "Check the tests".into(),
            prompt: "Run the tests and report".into(),
            subagent_type: "general-purpose".into(),
            result_text: Some("All tests pass.".into()),
            ..SubagentTask::default()
        }
    );
    assert!(rows["call_task_2"].task.is_async);
    assert_eq!(rows["call_task_3"].tool_status.as_deref(), Some("pending"));
}

#[test]
fn claude_subagent_sessions_cycles_nesting_and_hand_backs() {
    let events = replay("claude-subagents.transcript.jsonl");
    session_and_turn(&events, "cl-1");
    let rows = subagent_rows(&events);
    let (a, nested) = ("a7f3c2d1e0b4a5c6", "b1b2b3b4b5b6b7b8");
    let second = format!("{a}#2");
    assert_eq!(ids(&rows), [a, second.as_str(), nested]);
    let first = &rows[a];
    assert_eq!(first.tool_status.as_deref(), Some("completed"));
    assert_eq!(first.parent_tool_call_id, None);
    assert_eq!(
        first.task,
        SubagentTask {
            description: "Review the diff".into(),
            subagent_type: "code-reviewer".into(),
            status: Some("idle".into()),
            agent_id: Some(a.into()),
            child_session_id: Some(a.into()),
            result_text: Some("VERDICT: APPROVE".into()),
            ..SubagentTask::default()
        }
    );
    let again = &rows[&second];
    assert_eq!(again.tool_status.as_deref(), Some("cancelled"));
    assert_eq!(again.task.child_session_id.as_deref(), Some(a));
    assert_eq!(again.task.status.as_deref(), Some("idle"));
    assert_eq!(again.task.result_text, None);
    let inner = &rows[nested];
    assert_eq!(inner.parent_tool_call_id.as_deref(), Some(a));
    assert_eq!(inner.acp_session_id, "cl-1");
    assert_eq!(inner.task.result_text.as_deref(), Some("tests pass"));
    let bash = tool_frames(&events)
        .into_iter()
        .rfind(|frame| frame.tool_call_id == "toolu_BASH")
        .unwrap();
    assert_eq!(
        bash.parent_tool_call_id.as_deref(),
        Some(a),
        "under the child's row"
    );
}

#[test]
fn fanout_reference_agent_owns_its_child() {
    let events = replay("fanout.transcript.jsonl");
    session_and_turn(&events, "fa-1");
    let rows = subagent_rows(&events);
    assert_eq!(
        ids(&rows),
        ["toolu_sub_1"],
        "the announced child is no second row"
    );
    let row = &rows["toolu_sub_1"];
    assert_eq!(row.tool_status.as_deref(), Some("completed"));
    assert_eq!(
        row.task,
        SubagentTask {
            description: "List the crates".into(),
            prompt: "List every crate".into(),
            subagent_type: "explorer".into(),
            status: Some("completed".into()),
            model: Some("fixture-model".into()),
            child_session_id: Some("019a0000-0000-7000-8000-00000000c0de".into()),
            duration_ms: Some(900),
            total_tokens: Some(1346),
            tool_use_count: Some(1),
            ..SubagentTask::default()
        }
    );
    let listed = tool_frames(&events)
        .into_iter()
        .rfind(|frame| frame.tool_call_id == "toolu_ls")
        .unwrap();
    assert_eq!(listed.parent_tool_call_id.as_deref(), Some("toolu_sub_1"));
}
