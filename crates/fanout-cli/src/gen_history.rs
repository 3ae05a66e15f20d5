//! `fanout gen-claude-history` (hidden): writes a synthetic Claude Code history folder
//! shaped like real 2.1.3xx logs, for the history-import bench against ccusage
//! (`benches/import_vs_ccusage.rs`, DESIGN 6) and the kill-and-resume import test.
//!
//! The shapes follow the recorded fixtures (`fanout-capture/tests/fixtures/history/
//! claude`): one assistant record per content block, each repeating its response's
//! `usage` (a subagent's first record of a response carrying a partial
//! `output_tokens`); `attachment`, `queue-operation` and `ai-title` records; tool
//! results with a `toolUseResult`; `Agent` launches, foreground and background
//! (`async_launched`), into `<id>/subagents/agent-<agentId>.jsonl` with a `meta.json`
//! (`toolUseId`, `spawnDepth`, …; some without one, linked by `toolUseResult.agentId`),
//! nested children (`parentAgentId`, `spawnDepth` 2) in the same flat folder, workflow
//! agents under `subagents/workflows/<wf>/`, side-question logs that replay parent
//! responses, and failed requests (`<synthetic>`, all-zero usage). Every figure is
//! consistent the way real logs are (the `cache_creation` breakdown sums to
//! `cache_creation_input_tokens`; later records of a response never report less), so
//! any correct reader finds the same totals. Deterministic for a seed.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use fanout_types::Timestamp;
use serde_json::{Value, json};

/// Arguments of `fanout gen-claude-history`.
#[derive(Debug, Args)]
pub struct GenHistoryArgs {
    /// The folder to write (`<out>/projects/…`, a `$CLAUDE_CONFIG_DIR`); must not exist.
    #[arg(long)]
    pub out: PathBuf,
    /// Stop once at least this many bytes are written.
    #[arg(long, default_value_t = 256 << 20)]
    pub bytes: u64,
    /// The seed of the pseudo-random shapes.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Writes the history and prints `{sessions, files, bytes}` as JSON.
pub fn run(args: &GenHistoryArgs) -> Result<()> {
    anyhow::ensure!(
        !args.out.exists(),
        "{} exists: the generator writes a new folder",
        args.out.display()
    );
    let mut generator = Generator::new(args.seed);
    let mut written = Written::default();
    let mut index = 0u64;
    while written.bytes < args.bytes {
        generator.session(&args.out, index, &mut written)?;
        index += 1;
    }
    println!(
        "{}",
        json!({"sessions": index, "files": written.files, "bytes": written.bytes})
    );
    Ok(())
}

#[derive(Default)]
struct Written {
    files: u64,
    bytes: u64,
}

/// One JSONL file being written, counting its bytes.
struct Log {
    out: BufWriter<File>,
    bytes: u64,
}

impl Log {
    fn create(path: &Path) -> Result<Log> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Log {
            out: BufWriter::with_capacity(1 << 16, file),
            bytes: 0,
        })
    }

    fn record(&mut self, value: &Value) -> Result<()> {
        let line = serde_json::to_vec(value)?;
        self.out.write_all(&line)?;
        self.out.write_all(b"\n")?;
        self.bytes += line.len() as u64 + 1;
        Ok(())
    }

    fn finish(mut self, written: &mut Written) -> Result<()> {
        self.out.flush()?;
        written.files += 1;
        written.bytes += self.bytes;
        Ok(())
    }
}

/// The token figures of one response.
#[derive(Clone, Copy)]
struct Usage {
    input: u64,
    cache_creation: u64,
    cache_read: u64,
    output: u64,
}

impl Usage {
    fn json(self, output: u64) -> Value {
        json!({
            "input_tokens": self.input,
            "cache_creation_input_tokens": self.cache_creation,
            "cache_read_input_tokens": self.cache_read,
            "output_tokens": output,
            "output_tokens_details": {"thinking_tokens": 0},
            "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
            "service_tier": "standard",
            "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": self.cache_creation},
            "inference_geo": "", "iterations": [], "speed": "standard",
        })
    }
}

/// Where records of one log go and what they share.
struct LogContext<'a> {
    session: &'a str,
    cwd: &'a str,
    sidechain: bool,
    agent_id: Option<&'a str>,
}

/// A response of a log, remembered so a side-question log can replay it.
#[derive(Clone)]
struct Response {
    message_id: String,
    request_id: String,
    usage: Usage,
    model: &'static str,
}

/// A launch to write after its parent's log: (tool_use id, agent id, prompt, depth,
/// parent agent, background, workflow).
struct Launch {
    tool_use_id: String,
    agent_id: String,
    prompt: String,
    depth: u32,
    parent_agent: Option<String>,
    background: bool,
    workflow: Option<String>,
    at: i64,
}

struct Generator {
    state: u64,
    counter: u64,
    filler: String,
}

const MODELS: [&str; 3] = [
    "claude-opus-4-5",
    "claude-sonnet-4-5-20250929",
    "claude-haiku-4-5-20251001",
];
const TOOLS: [&str; 5] = ["Read", "Bash", "Grep", "Edit", "Glob"];
const WORDS: [&str; 24] = [
    "the", "agent", "reads", "file", "and", "writes", "a", "patch", "for", "tests", "module",
    "function", "returns", "error", "when", "input", "is", "empty", "fanout", "subagent", "store",
    "import", "line", "offset",
];

impl Generator {
    fn new(seed: u64) -> Generator {
        let mut generator = Generator {
            state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            counter: 0,
            filler: String::new(),
        };
        let mut filler = String::with_capacity(1 << 17);
        while filler.len() < 1 << 17 {
            filler.push_str(WORDS[generator.below(WORDS.len() as u64) as usize]);
            filler.push(if generator.below(12) == 0 { '\n' } else { ' ' });
        }
        generator.filler = filler;
        generator
    }

    /// xorshift64*: deterministic, no dependency.
    fn next(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.below(high - low + 1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn hex(&mut self, len: usize) -> String {
        let mut out = String::with_capacity(len);
        while out.len() < len {
            out.push_str(&format!("{:016x}", self.next()));
        }
        out.truncate(len);
        out
    }

    fn uuid(&mut self) -> String {
        let h = self.hex(32);
        format!(
            "{}-{}-4{}-8{}-{}",
            &h[..8],
            &h[8..12],
            &h[13..16],
            &h[17..20],
            &h[20..]
        )
    }

    /// A unique id with a prefix (`msg_01…`, `req_01…`, `toolu_01…`).
    fn id(&mut self, prefix: &str) -> String {
        self.counter += 1;
        let counter = self.counter;
        format!("{prefix}{counter:08x}{}", self.hex(14))
    }

    fn text(&mut self, low: u64, high: u64) -> String {
        let len = self.between(low, high) as usize;
        let start = self.below((self.filler.len() - len) as u64) as usize;
        self.filler[start..start + len].to_owned()
    }

    fn session(&mut self, out: &Path, index: u64, written: &mut Written) -> Result<()> {
        let session = self.uuid();
        let project = format!("-home-dev-proj-{}", index % 12);
        let cwd = format!("/home/dev/proj-{}", index % 12);
        let dir = out.join("projects").join(&project);
        let mut at = 1_790_000_000_000 + i64::try_from(index).unwrap_or(0) * 2_400_000;
        let mut log = Log::create(&dir.join(format!("{session}.jsonl")))?;
        let context = LogContext {
            session: &session,
            cwd: &cwd,
            sidechain: false,
            agent_id: None,
        };
        log.record(&json!({"type": "queue-operation", "operation": "enqueue", "timestamp": stamp(at), "sessionId": session}))?;
        log.record(
            &json!({"type": "ai-title", "aiTitle": self.text(20, 60), "sessionId": session}),
        )?;
        let mut responses = Vec::new();
        let mut launches = Vec::new();
        for _ in 0..self.between(3, 7) {
            self.prompt(&mut log, &context, &mut at, None)?;
            let count = self.between(2, 6);
            for r in 0..count {
                let last = r + 1 == count;
                self.response(
                    &mut log,
                    &context,
                    &mut at,
                    last,
                    1,
                    None,
                    &mut responses,
                    &mut launches,
                )?;
            }
        }
        log.finish(written)?;
        let subagents = dir.join(&session).join("subagents");
        while let Some(launch) = launches.pop() {
            self.subagent(&subagents, &context, launch, &mut launches, written)?;
        }
        if self.chance(15) && !responses.is_empty() {
            self.side_question(&subagents, &context, &responses, at, written)?;
        }
        Ok(())
    }

    fn base(&mut self, context: &LogContext<'_>, kind: &str, at: i64) -> Value {
        let mut value = json!({
            "parentUuid": null, "isSidechain": context.sidechain, "type": kind,
            "uuid": self.uuid(), "timestamp": stamp(at), "userType": "external",
            "entrypoint": "sdk-ts", "cwd": context.cwd, "sessionId": context.session,
            "version": "2.1.318", "gitBranch": "main",
        });
        if let Some(agent) = context.agent_id {
            value["agentId"] = json!(agent);
        }
        value
    }

    fn prompt(
        &mut self,
        log: &mut Log,
        context: &LogContext<'_>,
        at: &mut i64,
        text: Option<&str>,
    ) -> Result<()> {
        *at += i64::try_from(self.between(2_000, 60_000)).unwrap_or(0);
        let mut prompt = self.base(context, "user", *at);
        let text = text.map_or_else(|| self.text(100, 900), str::to_owned);
        prompt["message"] = json!({"role": "user", "content": if context.sidechain { json!(text) } else { json!([{"type": "text", "text": text}]) }});
        prompt["promptId"] = json!(self.uuid());
        log.record(&prompt)?;
        for _ in 0..self.between(1, 4) {
            let mut attachment = self.base(context, "attachment", *at);
            attachment["attachment"] = json!({"type": "file", "filename": format!("{}/src/lib.rs", context.cwd), "content": self.text(800, 6_000)});
            log.record(&attachment)?;
        }
        Ok(())
    }

    /// One response: a failed request now and then, else one record per content block,
    /// then the results of its tool calls.
    #[allow(clippy::too_many_arguments)]
    fn response(
        &mut self,
        log: &mut Log,
        context: &LogContext<'_>,
        at: &mut i64,
        last: bool,
        depth: u32,
        workflow: Option<&str>,
        responses: &mut Vec<Response>,
        launches: &mut Vec<Launch>,
    ) -> Result<()> {
        *at += i64::try_from(self.between(500, 20_000)).unwrap_or(0);
        if self.chance(3) {
            let mut failed = self.base(context, "assistant", *at);
            failed["isApiErrorMessage"] = json!(true);
            failed["message"] = json!({"id": self.uuid(), "type": "message", "role": "assistant", "model": "<synthetic>",
                "content": [{"type": "text", "text": "API Error: 529 overloaded"}], "stop_reason": "stop_sequence",
                "usage": {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}});
            log.record(&failed)?;
        }
        let response = Response {
            message_id: self.id("msg_01"),
            request_id: self.id("req_01"),
            usage: Usage {
                input: self.between(1, 400),
                cache_creation: self.between(0, 6_000),
                cache_read: self.between(4_000, 160_000),
                output: self.between(20, 2_500),
            },
            model: MODELS[self.below(if context.sidechain { 3 } else { 2 }) as usize],
        };
        let mut blocks = Vec::new();
        if self.chance(50) {
            blocks.push(json!({"type": "thinking", "thinking": self.text(400, 5_000), "signature": self.hex(120)}));
        }
        if last || self.chance(60) {
            blocks.push(json!({"type": "text", "text": self.text(80, 1_500)}));
        }
        let mut calls = Vec::new();
        if !last {
            for _ in 0..self.between(1, 3) {
                let id = self.id("toolu_01");
                let spawn = depth < 3 && self.chance(if depth == 1 { 22 } else { 8 });
                if spawn {
                    let background = self.chance(35);
                    let prompt = self.text(120, 500);
                    blocks.push(
                        json!({"type": "tool_use", "id": id, "name": "Agent", "input": {
                        "description": self.text(10, 40), "prompt": prompt,
                        "subagent_type": "general-purpose", "run_in_background": background}}),
                    );
                    let agent_id = format!("a{}", self.hex(16));
                    let workflow = workflow.map(str::to_owned).or_else(|| {
                        (depth == 1 && self.chance(10)).then(|| format!("wf-{}", self.hex(8)))
                    });
                    calls.push((id.clone(), Some((agent_id.clone(), background))));
                    launches.push(Launch {
                        tool_use_id: id,
                        agent_id,
                        prompt,
                        depth,
                        parent_agent: context.agent_id.map(str::to_owned),
                        background,
                        workflow,
                        at: *at,
                    });
                } else {
                    let tool = TOOLS[self.below(TOOLS.len() as u64) as usize];
                    blocks.push(json!({"type": "tool_use", "id": id, "name": tool, "input": {"file_path": format!("{}/src/{}.rs", context.cwd, self.hex(6)), "command": self.text(10, 80)}}));
                    calls.push((id, None));
                }
            }
        }
        let count = blocks.len();
        for (i, block) in blocks.into_iter().enumerate() {
            // A subagent's first record of a response may carry a partial output count.
            let output = if context.sidechain && i == 0 && count > 1 {
                response.usage.output / 3 + 1
            } else {
                response.usage.output
            };
            let mut record = self.base(context, "assistant", *at);
            record["requestId"] = json!(response.request_id);
            record["apiBlockIndex"] = json!(i);
            record["message"] = json!({"id": response.message_id, "type": "message", "role": "assistant",
                "model": response.model, "content": [block], "stop_reason": if i + 1 == count { json!(if calls.is_empty() { "end_turn" } else { "tool_use" }) } else { Value::Null },
                "stop_sequence": null, "usage": response.usage.json(output)});
            log.record(&record)?;
        }
        responses.push(response.clone());
        for (id, spawn) in calls {
            *at += i64::try_from(self.between(50, 4_000)).unwrap_or(0);
            let mut result = self.base(context, "user", *at);
            let (content, tool_use_result) = match spawn {
                Some((agent_id, true)) => (
                    format!("Async agent launched successfully.\nagentId: {agent_id}"),
                    json!({"status": "async_launched", "agentId": agent_id, "description": "background work",
                           "outputFile": format!("/tmp/claude/tasks/{agent_id}.output"), "canReadOutputFile": true}),
                ),
                Some((agent_id, false)) => (
                    format!("{}\nagentId: {agent_id}", self.text(100, 800)),
                    json!({"status": "completed", "agentId": agent_id, "agentType": "general-purpose",
                           "totalDurationMs": self.between(1_000, 90_000), "totalTokens": self.between(1_000, 90_000),
                           "totalToolUseCount": self.between(1, 20)}),
                ),
                None => {
                    let text = self.text(200, 9_000);
                    (
                        text.clone(),
                        json!({"type": "text", "file": {"filePath": format!("{}/src/x.rs", context.cwd), "content": text}}),
                    )
                }
            };
            result["message"] = json!({"role": "user", "content": [{"tool_use_id": id, "type": "tool_result", "content": content}]});
            result["toolUseResult"] = tool_use_result;
            log.record(&result)?;
        }
        Ok(())
    }

    fn subagent(
        &mut self,
        subagents: &Path,
        parent: &LogContext<'_>,
        launch: Launch,
        launches: &mut Vec<Launch>,
        written: &mut Written,
    ) -> Result<()> {
        let dir = match &launch.workflow {
            Some(wf) => subagents.join("workflows").join(wf),
            None => subagents.to_owned(),
        };
        let name = format!("agent-{}", launch.agent_id);
        // Most launches have a meta file; the others link by toolUseResult.agentId.
        if self.chance(85) {
            let mut meta = json!({"agentType": "general-purpose", "isBuiltIn": true, "description": "delegated work",
                "toolUseId": launch.tool_use_id, "spawnDepth": launch.depth,
                "requestShape": if launch.background { "background" } else { "foreground" }, "finished": true});
            if let Some(parent_agent) = &launch.parent_agent {
                meta["parentAgentId"] = json!(parent_agent);
            }
            std::fs::create_dir_all(&dir)?;
            std::fs::write(
                dir.join(format!("{name}.meta.json")),
                serde_json::to_vec(&meta)?,
            )?;
        }
        let mut log = Log::create(&dir.join(format!("{name}.jsonl")))?;
        let context = LogContext {
            session: parent.session,
            cwd: parent.cwd,
            sidechain: true,
            agent_id: Some(&launch.agent_id),
        };
        let mut at = launch.at;
        self.prompt(&mut log, &context, &mut at, Some(&launch.prompt))?;
        let mut responses = Vec::new();
        let count = self.between(2, 8);
        for r in 0..count {
            self.response(
                &mut log,
                &context,
                &mut at,
                r + 1 == count,
                launch.depth + 1,
                launch.workflow.as_deref(),
                &mut responses,
                launches,
            )?;
        }
        log.finish(written)
    }

    /// A side-question log: replays a few of the session's responses (same ids, same
    /// final figures); it adds no usage.
    fn side_question(
        &mut self,
        subagents: &Path,
        parent: &LogContext<'_>,
        responses: &[Response],
        mut at: i64,
        written: &mut Written,
    ) -> Result<()> {
        let agent_id = format!("aside_question-{}", self.hex(16));
        let mut log = Log::create(&subagents.join(format!("agent-{agent_id}.jsonl")))?;
        let context = LogContext {
            session: parent.session,
            cwd: parent.cwd,
            sidechain: true,
            agent_id: Some(&agent_id),
        };
        for _ in 0..self.between(1, 3) {
            let response = &responses[self.below(responses.len() as u64) as usize];
            at += 1_000;
            let mut record = self.base(&context, "assistant", at);
            record["requestId"] = json!(response.request_id);
            record["message"] = json!({"id": response.message_id, "type": "message", "role": "assistant",
                "model": response.model, "content": [{"type": "text", "text": self.text(50, 400)}],
                "stop_reason": "end_turn", "usage": response.usage.json(response.usage.output)});
            log.record(&record)?;
        }
        log.finish(written)
    }
}

/// Milliseconds since the epoch as Claude writes them (`…T09:42:54.971Z`).
fn stamp(millis: i64) -> String {
    let canonical = Timestamp::from_micros(millis * 1_000)
        .map(|t| t.canonical())
        .unwrap_or_default();
    // canonical is `YYYY-MM-DDTHH:MM:SS.ffffffZ`; Claude writes milliseconds.
    match canonical.len() {
        27 => format!("{}Z", &canonical[..23]),
        _ => canonical,
    }
}
