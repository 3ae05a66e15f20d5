//! fanout's own agent speaks ACP exactly: every message the real `fanout agent` binary
//! writes over its stdout pipe, with and without `clientCapabilities.subagents`, validates
//! against the official ACP v1 JSON schema, each against the definition of its own
//! method (a notification's params, a request's params, a response's result or error).
//!
//! The schemas (tests/acp-schema/README.md says where each comes from):
//! - `sdk-2.4.0-v1.schema.json`: `schema/v1/schema.json` of the npm package
//!   `@agentclientprotocol/sdk` 2.4.0, verbatim. It predates ACP's subagent sessions: it
//!   has no `subagent_update` and no `{"type":"session"}` tool-call content, so a client
//!   without the capability must see neither, which this schema proves;
//! - `crate-1.20.0-v1.schema.json`: generated from the official
//!   `agent-client-protocol-schema` crate 1.20.0 (`tools/acp-schema`), which has both as
//!   stable v1 protocol; every message of both runs must validate against it.

mod agent_support;

use std::collections::HashMap;
use std::path::Path;

use agent_support::{Agent, concat, setup, stop, text, tool_use};
use serde_json::{Value, json};

fn schema(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/acp-schema")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).expect("schema file"))
        .expect("schema JSON")
}

/// Validators of one schema document, one per definition, compiled on first use.
struct Schema {
    name: &'static str,
    document: Value,
    validators: HashMap<String, jsonschema::Validator>,
}

impl Schema {
    fn load(name: &'static str) -> Self {
        Self {
            name,
            document: schema(name),
            validators: HashMap::new(),
        }
    }

    /// The problems of `instance` as an instance of `$defs[definition]`.
    fn check(&mut self, definition: &str, instance: &Value) -> Vec<String> {
        let defs = &self.document["$defs"];
        assert!(
            defs.get(definition).is_some(),
            "{}: no definition {definition}",
            self.name
        );
        let validator = self
            .validators
            .entry(definition.to_owned())
            .or_insert_with(|| {
                let root = json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "$defs": defs,
                    "$ref": format!("#/$defs/{definition}"),
                });
                jsonschema::draft202012::new(&root).expect("the schema compiles")
            });
        validator
            .iter_errors(instance)
            .map(|error| format!("{definition} at {}: {error}", error.instance_path()))
            .collect()
    }
}

/// The definition a request's params and its result have, per method (ACP v1).
fn definitions(method: &str) -> Option<(&'static str, &'static str)> {
    Some(match method {
        "initialize" => ("InitializeRequest", "InitializeResponse"),
        "session/new" => ("NewSessionRequest", "NewSessionResponse"),
        "session/prompt" => ("PromptRequest", "PromptResponse"),
        "session/request_permission" => ("RequestPermissionRequest", "RequestPermissionResponse"),
        "fs/read_text_file" => ("ReadTextFileRequest", "ReadTextFileResponse"),
        "fs/write_text_file" => ("WriteTextFileRequest", "WriteTextFileResponse"),
        _ => return None,
    })
}

/// Every problem of one message the agent wrote; `sent` maps the ids of the client's
/// requests to their methods.
fn problems(schema: &mut Schema, message: &Value, sent: &HashMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    if message["jsonrpc"] != "2.0" {
        out.push("jsonrpc is not \"2.0\"".to_owned());
    }
    match (
        message.get("method").and_then(Value::as_str),
        message.get("id"),
    ) {
        (Some("session/update"), None) => {
            out.extend(schema.check("SessionNotification", &message["params"]));
        }
        (Some(method), Some(_)) => match definitions(method) {
            Some((params, _)) => out.extend(schema.check(params, &message["params"])),
            None => out.push(format!("an agent request ACP does not define: {method}")),
        },
        (Some(method), None) => out.push(format!(
            "an agent notification ACP does not define: {method}"
        )),
        (None, Some(id)) => {
            let method = sent.get(&id.to_string()).map(String::as_str);
            match (
                message.get("result"),
                message.get("error"),
                method.and_then(definitions),
            ) {
                (Some(result), None, Some((_, definition))) => {
                    out.extend(schema.check(definition, result));
                }
                (None, Some(error), _) => out.extend(schema.check("Error", error)),
                (Some(_), None, None) => {
                    out.push(format!("a result for {method:?}, which has none"));
                }
                _ => out.push("a response needs exactly one of result and error".to_owned()),
            }
        }
        (None, None) => out.push("neither a request, a notification nor a response".to_owned()),
    }
    out
}

/// Parent: spawn a child (which lists the workspace), fork one, then a subagent call
/// with arguments it cannot read (refused), then the answer.
fn script() -> Value {
    json!({"version": 1, "sessions": [
        {"label": "parent", "responses": [
            concat(vec![
                vec![text("Delegating.")],
                tool_use("call_spawn", "subagent", json!({"description": "Survey files",
                    "prompt": "List the workspace", "subagent_type": "explorer", "mode": "spawn"})),
                vec![stop("tool_use", 100, 20)],
            ]),
            concat(vec![
                tool_use("call_fork", "subagent", json!({"description": "Second opinion",
                    "prompt": "Review what we found", "mode": "fork"})),
                vec![stop("tool_use", 150, 15)],
            ]),
            concat(vec![
                tool_use("call_bad", "subagent", json!({"description": 5})),
                vec![stop("tool_use", 160, 5)],
            ]),
            concat(vec![vec![text("All done."), stop("end_turn", 200, 5)]]),
        ]},
        {"label": "spawn child", "responses": [
            concat(vec![tool_use("call_ls", "list_dir", json!({"path": "."})), vec![stop("tool_use", 30, 10)]]),
            concat(vec![vec![text("Found a.txt."), stop("end_turn", 40, 4)]]),
        ]},
        {"label": "fork child", "responses": [
            concat(vec![vec![text("Fork sees the conversation."), stop("end_turn", 300, 6)]]),
        ]},
    ]})
}

/// Drives one session through the script and a few requests that fail; returns every
/// message the agent wrote and the method of each request id the client sent.
fn run(subagents: bool) -> (Vec<Value>, HashMap<String, String>) {
    let s = setup(&script());
    let mut agent = Agent::start(&s.script, &s.trace, &s.root);
    let mut messages = Vec::new();
    let mut sent = HashMap::new();
    let mut request = |agent: &mut Agent, method: &str, params: Value| {
        sent.insert((agent.next_id + 1).to_string(), method.to_owned());
        let (notes, response) = agent.request(method, params);
        messages.extend(notes);
        messages.push(response.clone());
        response
    };
    let capabilities = if subagents {
        json!({"fs": {"readTextFile": false, "writeTextFile": false}, "subagents": {}})
    } else {
        json!({"fs": {"readTextFile": false, "writeTextFile": false}})
    };
    request(
        &mut agent,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": capabilities}),
    );
    let opened = request(
        &mut agent,
        "session/new",
        json!({"cwd": s.cwd, "mcpServers": []}),
    );
    let session = opened["result"]["sessionId"]
        .as_str()
        .expect("a session id")
        .to_owned();
    let done = request(
        &mut agent,
        "session/prompt",
        json!({"sessionId": session,
        "prompt": [{"type": "text", "text": "Survey, then get a second opinion."}]}),
    );
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    request(
        &mut agent,
        "session/prompt",
        json!({"sessionId": "no-such-session", "prompt": []}),
    );
    request(
        &mut agent,
        "session/set_mode",
        json!({"sessionId": session, "modeId": "x"}),
    );
    request(&mut agent, "session/new", json!({"cwd": 5}));
    agent.send_raw(
        &json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}})
            .to_string(),
    );
    agent.finish();
    (messages, sent)
}

fn validate(schema: &mut Schema, messages: &[Value], sent: &HashMap<String, String>) {
    let failures: Vec<String> = messages
        .iter()
        .flat_map(|message| {
            problems(schema, message, sent)
                .into_iter()
                .map(move |problem| format!("{problem}\n    in {message}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} messages break {}:\n{}",
        failures.len(),
        messages.len(),
        schema.name,
        failures.join("\n")
    );
}

fn has_session_content(message: &Value) -> bool {
    message["params"]["update"]["content"]
        .as_array()
        .is_some_and(|content| content.iter().any(|c| c["type"] == "session"))
}

#[test]
fn every_message_validates_without_the_subagents_capability() {
    let (messages, sent) = run(false);
    assert!(
        messages.len() >= 15,
        "the run covers the tool, subagent and error paths: {}",
        messages.len()
    );
    assert!(
        !messages.iter().any(has_session_content),
        "session content needs the capability"
    );
    assert!(
        !messages
            .iter()
            .any(|m| m["params"]["update"]["sessionUpdate"] == "subagent_update")
    );
    validate(
        &mut Schema::load("sdk-2.4.0-v1.schema.json"),
        &messages,
        &sent,
    );
    validate(
        &mut Schema::load("crate-1.20.0-v1.schema.json"),
        &messages,
        &sent,
    );
}

#[test]
fn every_message_validates_with_the_subagents_capability() {
    let (messages, sent) = run(true);
    assert!(
        messages.iter().any(has_session_content),
        "children are linked"
    );
    assert!(
        messages
            .iter()
            .any(|m| m["params"]["update"]["sessionUpdate"] == "subagent_update")
    );
    validate(
        &mut Schema::load("crate-1.20.0-v1.schema.json"),
        &messages,
        &sent,
    );
    // Without the subagent messages, the rest is also valid for the older SDK schema.
    let plain: Vec<Value> = messages
        .into_iter()
        .filter(|m| {
            !has_session_content(m) && m["params"]["update"]["sessionUpdate"] != "subagent_update"
        })
        .collect();
    validate(&mut Schema::load("sdk-2.4.0-v1.schema.json"), &plain, &sent);
}
