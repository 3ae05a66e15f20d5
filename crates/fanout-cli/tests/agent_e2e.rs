//! End to end: the real `fanout` binary as `fanout agent --provider scripted`
//! over real pipes. The parent spawns one child and forks another; the test
//! checks the ACP frames, the three session logs, and that every model call
//! carried its own session id.

mod agent_support;

use agent_support::{Agent, concat, setup, stop, text, tool_use};
use fanout_sessionlog::{Backend, Event, SessionLog, list_logs, read_log};
use serde_json::{Value, json};

/// Parent: spawn a child, then fork one, then answer. Spawn child: list the
/// workspace, then answer. Fork child: answer.
fn nested_script() -> Value {
    json!({"version": 1, "sessions": [
        {"label": "parent", "responses": [
            concat(vec![
                vec![text("Delegating.")],
                tool_use("call_spawn", "subagent", json!({"description":"Survey files","prompt":"List the workspace","subagent_type":"explorer","mode":"spawn"})),
                vec![stop("tool_use", 100, 20)],
            ]),
            concat(vec![
                tool_use("call_fork", "subagent", json!({"description":"Second opinion","prompt":"Review what we found","mode":"fork"})),
                vec![stop("tool_use", 150, 15)],
            ]),
            concat(vec![vec![text("All "), text("done."), stop("end_turn", 200, 5)]]),
        ]},
        {"label": "spawn child", "responses": [
            concat(vec![tool_use("call_ls", "list_dir", json!({"path":"."})), vec![stop("tool_use", 30, 10)]]),
            concat(vec![vec![text("Found a.txt."), stop("end_turn", 40, 4)]]),
        ]},
        {"label": "fork child", "responses": [
            concat(vec![vec![text("Fork sees the conversation."), stop("end_turn", 300, 6)]]),
        ]},
    ]})
}

fn update(note: &Value) -> &Value {
    &note["params"]["update"]
}

fn sid(note: &Value) -> &str {
    note["params"]["sessionId"].as_str().unwrap()
}

fn position(notes: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    notes
        .iter()
        .position(pred)
        .unwrap_or_else(|| panic!("no matching frame in {notes:#?}"))
}

fn chunks_json(log: &SessionLog) -> Vec<Value> {
    log.recorded_responses()
        .into_iter()
        .map(|r| serde_json::to_value(&r.chunks).unwrap())
        .collect()
}

#[test]
fn parent_spawns_and_forks_children_over_real_pipes() {
    let script = nested_script();
    let s = setup(&script);
    let mut agent = Agent::start(&s.script, &s.trace, &s.root);

    let (_, init) = agent.request(
        "initialize",
        json!({"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":false},"subagents":{}}}),
    );
    assert_eq!(init["result"]["protocolVersion"], 1);
    let (_, new) = agent.request("session/new", json!({"cwd": s.cwd, "mcpServers": []}));
    let parent = new["result"]["sessionId"].as_str().unwrap().to_string();
    let (notes, resp) = agent.request(
        "session/prompt",
        json!({"sessionId": parent, "prompt": [{"type":"text","text":"Look at this project"}]}),
    );
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let stderr = agent.finish();
    assert!(!stderr.contains("ERROR"), "{stderr}");
    for note in &notes {
        assert_eq!(note["method"], "session/update");
    }

    // --- ACP frames -------------------------------------------------------
    let spawn_call = position(&notes, |n| {
        update(n)["sessionUpdate"] == "tool_call" && update(n)["toolCallId"] == "call_spawn"
    });
    let meta = &update(&notes[spawn_call])["_meta"]["fanout"]["subagent"];
    let c1 = meta["childSessionId"].as_str().unwrap().to_string();
    assert_eq!(meta["mode"], "spawn");
    assert_eq!(meta["subagentType"], "explorer");
    assert_eq!(meta["status"], "running");
    assert_eq!(meta["model"], "scripted");
    assert!(
        meta.get("totalTokens").is_none(),
        "metrics are absent until the child ends"
    );
    assert_eq!(
        update(&notes[spawn_call])["title"],
        "Subagent: Survey files"
    );
    assert_eq!(sid(&notes[spawn_call]), parent);

    let fork_call = position(&notes, |n| {
        update(n)["sessionUpdate"] == "tool_call" && update(n)["toolCallId"] == "call_fork"
    });
    let fork_meta = &update(&notes[fork_call])["_meta"]["fanout"]["subagent"];
    let c2 = fork_meta["childSessionId"].as_str().unwrap().to_string();
    assert_eq!(fork_meta["mode"], "fork");
    assert_eq!(fork_meta["subagentType"], Value::Null);
    assert!(spawn_call < fork_call);
    assert_ne!(c1, c2);

    let first_chunk = &notes[0];
    assert_eq!(sid(first_chunk), parent);
    assert_eq!(update(first_chunk)["sessionUpdate"], "agent_message_chunk");
    assert_eq!(update(first_chunk)["content"]["text"], "Delegating.");

    for (child, call_id, answer, tool_uses, tokens) in [
        (&c1, "call_spawn", "Found a.txt.", 1, 30 + 10 + 40 + 4),
        (&c2, "call_fork", "Fork sees the conversation.", 0, 300 + 6),
    ] {
        let running = position(&notes, |n| {
            update(n)["sessionUpdate"] == "subagent_update"
                && update(n)["sessionId"] == child.as_str()
                && update(n)["state"]["state"] == "running"
        });
        assert_eq!(sid(&notes[running]), parent, "announced on the parent");
        let idle = position(&notes, |n| {
            update(n)["sessionUpdate"] == "subagent_update"
                && update(n)["sessionId"] == child.as_str()
                && update(n)["state"]["state"] == "idle"
        });
        assert_eq!(update(&notes[idle])["state"]["stopReason"], "end_turn");
        let child_frames: Vec<usize> = notes
            .iter()
            .enumerate()
            .filter(|(_, n)| sid(n) == child.as_str())
            .map(|(i, _)| i)
            .collect();
        assert!(
            !child_frames.is_empty(),
            "the child's updates flow under its id"
        );
        assert!(
            running < child_frames[0],
            "announced before any child traffic"
        );
        assert!(*child_frames.last().unwrap() < idle);
        let answer_chunk = position(&notes, |n| {
            sid(n) == child.as_str() && update(n)["sessionUpdate"] == "agent_message_chunk"
        });
        assert_eq!(update(&notes[answer_chunk])["content"]["text"], answer);

        let link = position(&notes, |n| {
            update(n)["sessionUpdate"] == "tool_call_update"
                && update(n)["toolCallId"] == call_id
                && update(n)["status"] == "in_progress"
        });
        assert_eq!(
            update(&notes[link])["content"][0],
            json!({"type":"session","sessionId":child})
        );
        let done = position(&notes, |n| {
            update(n)["sessionUpdate"] == "tool_call_update"
                && update(n)["toolCallId"] == call_id
                && update(n)["status"] == "completed"
        });
        assert!(idle < done);
        let done = update(&notes[done]);
        assert_eq!(
            done["content"][0],
            json!({"type":"session","sessionId":child})
        );
        assert_eq!(done["content"][1]["content"]["text"], answer);
        let meta = &done["_meta"]["fanout"]["subagent"];
        assert_eq!(meta["childSessionId"], child.as_str());
        assert_eq!(meta["status"], "completed");
        assert_eq!(meta["toolUseCount"], tool_uses);
        assert_eq!(meta["totalTokens"], tokens);
        assert!(meta["durationMs"].is_u64());
    }
    // The spawn child's own tool call is reported under the child's id.
    let ls = position(&notes, |n| {
        update(n)["sessionUpdate"] == "tool_call" && update(n)["toolCallId"] == "call_ls"
    });
    assert_eq!(sid(&notes[ls]), c1);
    let last = notes.last().unwrap();
    assert_eq!(sid(last), parent);
    assert_eq!(update(last)["content"]["text"], "done.");

    // --- session logs -----------------------------------------------------
    let entries = list_logs(&s.root).unwrap();
    assert_eq!(entries.len(), 3, "{entries:#?}");
    let ids: Vec<&str> = entries.iter().map(|e| e.header.id.as_str()).collect();
    assert_eq!(
        ids,
        [parent.as_str(), c1.as_str(), c2.as_str()],
        "primary first, then by createdAt"
    );
    let dirs: Vec<_> = entries
        .iter()
        .map(|e| e.path.parent().unwrap().to_path_buf())
        .collect();
    assert!(
        dirs.iter().all(|d| *d == dirs[0]),
        "one cwd bucket: {dirs:?}"
    );
    for e in &entries {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&e.path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", e.path.display());
        assert_eq!(e.header.cwd, s.cwd.to_str().unwrap());
        assert_eq!(e.header.version, 1);
    }
    let logs: Vec<SessionLog> = entries.iter().map(|e| read_log(&e.path).unwrap()).collect();
    let (p, spawn, fork) = (&logs[0], &logs[1], &logs[2]);

    assert_eq!(p.header.backend, Backend::Root);
    assert_eq!(p.header.parent_session, None);
    assert_eq!(spawn.header.backend, Backend::Spawn);
    assert_eq!(
        spawn.header.parent_session.as_deref(),
        Some(parent.as_str())
    );
    assert_eq!(
        spawn.header.parent_tool_call_id.as_deref(),
        Some("call_spawn")
    );
    assert_eq!(spawn.header.seed_boundary, None);
    assert_eq!(fork.header.backend, Backend::Fork);
    assert_eq!(fork.header.parent_session.as_deref(), Some(parent.as_str()));
    assert_eq!(
        fork.header.parent_tool_call_id.as_deref(),
        Some("call_fork")
    );
    assert!(p.header.created_at < spawn.header.created_at);
    assert!(spawn.header.created_at < fork.header.created_at);

    // The fork's seed boundary points just past the copied prefix: the parent's
    // history up to the model call that asked for the fork.
    let boundary = fork.header.seed_boundary.expect("fork has a seedBoundary");
    assert!(boundary > 0);
    assert_eq!(
        &fork.events[..boundary],
        &p.events[..boundary],
        "copied prefix"
    );
    assert!(matches!(
        &p.events[boundary],
        Event::ModelRequest { ordinal: 1, .. }
    ));
    assert!(
        matches!(&fork.events[boundary], Event::UserMessage { text, .. } if text == "Review what we found")
    );
    assert!(fork.events[boundary].ts() > fork.header.created_at);
    assert!(
        matches!(&spawn.events[0], Event::UserMessage { text, .. } if text == "List the workspace")
    );

    // Each log's own assistant/chunk runs reproduce its script exactly.
    let sessions = script["sessions"].as_array().unwrap();
    for (log, scripted) in [
        (p, &sessions[0]),
        (spawn, &sessions[1]),
        (fork, &sessions[2]),
    ] {
        let want: Vec<Value> = scripted["responses"].as_array().unwrap().clone();
        assert_eq!(chunks_json(log), want, "{}", log.header.id);
    }
    let parent_kinds: Vec<&str> = p.events.iter().map(Event::type_name).collect();
    assert_eq!(
        parent_kinds
            .iter()
            .filter(|k| k.starts_with("subagent/"))
            .copied()
            .collect::<Vec<_>>(),
        [
            "subagent/start",
            "subagent/end",
            "subagent/start",
            "subagent/end"
        ]
    );
    assert!(
        matches!(p.events.last(), Some(Event::TurnEnd { stop_reason, .. }) if stop_reason == "end_turn")
    );
    let ends: Vec<(String, u64)> = p
        .events
        .iter()
        .filter_map(|e| match e {
            Event::SubagentEnd {
                child_session_id,
                tool_use_count,
                ..
            } => Some((child_session_id.clone(), *tool_use_count)),
            _ => None,
        })
        .collect();
    assert_eq!(ends, [(c1.clone(), 1), (c2.clone(), 0)]);

    // --- every model call carried its own session id ----------------------
    let trace: Vec<Value> = std::fs::read_to_string(&s.trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let calls: Vec<(String, u64, u64)> = trace
        .iter()
        .map(|c| {
            (
                c["sessionId"]
                    .as_str()
                    .expect("every call has a session id")
                    .to_string(),
                c["script"].as_u64().unwrap(),
                c["response"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            (parent.clone(), 0, 0),
            (c1.clone(), 1, 0),
            (c1.clone(), 1, 1),
            (parent.clone(), 0, 1),
            (c2.clone(), 2, 0),
            (parent.clone(), 0, 2),
        ]
    );
    for log in &logs {
        let own_requests = log
            .own_events()
            .iter()
            .filter(|e| matches!(e, Event::ModelRequest { .. }))
            .count();
        let traced = calls.iter().filter(|c| c.0 == log.header.id).count();
        assert_eq!(own_requests, traced, "{}", log.header.id);
    }
}

#[test]
fn bad_input_over_pipes_gets_errors_and_the_agent_keeps_serving() {
    let script = json!({"sessions": [
        {"responses": [
            concat(vec![tool_use("bad", "read_file", json!({"path": "a.txt"})).into_iter().take(2).collect(),
                vec![stop("tool_use", 1, 1)]]),
            concat(vec![vec![text("half"), json!({"kind":"error","message":"upstream hung up"})]]),
            concat(vec![vec![text("still here"), stop("end_turn", 1, 1)]]),
        ]},
    ]});
    let s = setup(&script);
    let mut agent = Agent::start(&s.script, &s.trace, &s.root);

    agent.send_raw("not json at all");
    let err = agent.recv();
    assert_eq!(err["error"]["code"], -32700);
    let (_, resp) = agent.request("fanout/unknown", json!({}));
    assert_eq!(resp["error"]["code"], -32601);
    let (_, resp) = agent.request(
        "session/prompt",
        json!({"sessionId":"nope","prompt":[{"type":"text","text":"hi"}]}),
    );
    assert_eq!(resp["error"]["code"], -32602);

    let (_, init) = agent.request(
        "initialize",
        json!({"protocolVersion":1,"clientCapabilities":{}}),
    );
    assert_eq!(init["result"]["protocolVersion"], 1);
    let (_, new) = agent.request("session/new", json!({"cwd": s.cwd, "mcpServers": []}));
    let session = new["result"]["sessionId"].as_str().unwrap().to_string();
    let prompt =
        |text: &str| json!({"sessionId": session, "prompt": [{"type":"text","text":text}]});

    // Truncated tool arguments -> tool error; the broken stream -> JSON-RPC error.
    let (notes, resp) = agent.request("session/prompt", prompt("one"));
    assert!(
        resp["error"]["message"]
            .as_str()
            .unwrap()
            .contains("upstream hung up"),
        "{resp}"
    );
    let failed = notes
        .iter()
        .find(|n| update(n)["status"] == "failed")
        .expect("a failed tool call");
    let message = update(failed)["content"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(
        message.contains("invalid JSON arguments for read_file"),
        "{message}"
    );

    let (_, resp) = agent.request("session/prompt", prompt("two"));
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    agent.finish();

    let entries = list_logs(&s.root).unwrap();
    assert_eq!(entries.len(), 1);
    let log = read_log(&entries[0].path).expect("the log stays valid JSONL");
    assert!(
        log.events
            .iter()
            .any(|e| matches!(e, Event::ModelError { .. }))
    );
}
