//! A minimal ACP client that drives an agent process over stdio: `initialize`,
//! `session/new`, then each prompt as `session/prompt`, recording every line
//! both ways. Requests the agent makes of the client are refused with
//! method-not-found (a snapshot client offers no capabilities). After the
//! prompts it keeps reading until the caller's settle condition holds (a
//! third-party agent's subagents and side calls may still be running), then
//! closes stdin; the agent runs in its own process group, which is ended
//! with it.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use fanout_acp::{Message, RequestId, ResponseOutcome, classify};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How much of the agent's stderr is kept for error messages.
const STDERR_TAIL_BYTES: usize = 8 * 1024;
/// How long the agent may take to exit once its stdin is closed.
const EXIT_GRACE: Duration = Duration::from_secs(15);

/// The agent could not be driven through the prompts.
#[derive(Debug, thiserror::Error)]
pub enum DriveError {
    /// The program could not be started.
    #[error("cannot start the agent {program}: {error}")]
    Spawn {
        /// The program.
        program: String,
        /// The underlying error.
        error: std::io::Error,
    },
    /// Writing to or reading from the agent failed.
    #[error("ACP channel to the agent failed: {0}")]
    Io(std::io::Error),
    /// The agent closed stdout (exited) before answering.
    #[error("the agent exited before answering {method}{}", stderr_note(stderr))]
    Exited {
        /// The pending request.
        method: String,
        /// The end of the agent's stderr.
        stderr: String,
    },
    /// No message arrived in time.
    #[error("the agent sent nothing for {secs}s while {method} was pending")]
    Timeout {
        /// The pending request.
        method: String,
        /// The timeout.
        secs: u64,
    },
    /// The agent answered with something the client cannot proceed from.
    #[error("the agent answered {method} with {answer}")]
    Refused {
        /// The request.
        method: String,
        /// The response line.
        answer: String,
    },
    /// The agent exited unsuccessfully after the prompts.
    #[error("the agent exited with {status}{}", stderr_note(stderr))]
    Failed {
        /// Its exit status.
        status: String,
        /// The end of its stderr.
        stderr: String,
    },
}

// The cause is in the message; no `source()`, so `{:#}` chains print it once.
impl From<std::io::Error> for DriveError {
    fn from(error: std::io::Error) -> Self {
        DriveError::Io(error)
    }
}

fn stderr_note(stderr: &str) -> String {
    let trimmed = stderr.trim();
    if trimmed.is_empty() {
        String::new()
    } else {
        format!("; its stderr ends with:\n{trimmed}")
    }
}

/// A program and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentCommand {
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables removed for the agent (e.g. API keys in replay).
    pub env_remove: Vec<String>,
    /// Environment variables set for the agent: for values that must not show
    /// on its command line (`ps`), such as a database URL with a password.
    pub env: Vec<(String, String)>,
    /// Start from an empty environment (then `env` only).
    pub env_clear: bool,
}

impl AgentCommand {
    /// From an argv; `None` when it is empty.
    pub fn from_argv(argv: &[String]) -> Option<Self> {
        let (program, args) = argv.split_first()?;
        Some(Self {
            program: PathBuf::from(program),
            args: args.to_vec(),
            env_remove: Vec::new(),
            env: Vec::new(),
            env_clear: false,
        })
    }
}

/// What to do in the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrivePlan {
    /// The session cwd (absolute).
    pub cwd: PathBuf,
    /// Prompts, in order.
    pub prompts: Vec<String>,
    /// Advertise `clientCapabilities.subagents`.
    pub client_subagents: bool,
    /// How long to wait for any one message.
    pub timeout: Duration,
    /// How the agent must end once its stdin is closed.
    pub exit: ExitPolicy,
}

/// What is expected of the agent after the prompts, once its stdin is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitPolicy {
    /// It exits by itself, successfully, within a grace period (fanout's own
    /// agent: anything else is a failure).
    Clean,
    /// It is given a moment, then its process group is ended; its exit status
    /// says nothing (third-party agents often wait for more input).
    Ended,
}

/// Which way a transcript line went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client to agent (stdin).
    Sent,
    /// Agent to client (stdout).
    Received,
}

/// One line of the ACP conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptLine {
    /// Which way it went.
    pub direction: Direction,
    /// The raw line, without its newline.
    pub text: String,
}

/// A finished session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriveOutcome {
    /// Every line both ways, in order.
    pub transcript: Vec<TranscriptLine>,
    /// The live ACP session id.
    pub session_id: String,
    /// Each prompt's `stopReason`, or the JSON-RPC error message.
    pub stop_reasons: Vec<Result<String, String>>,
    /// The end of the agent's stderr.
    pub stderr_tail: String,
}

struct Connection {
    stdin: Option<ChildStdin>,
    stdout: tokio::io::Lines<BufReader<ChildStdout>>,
    transcript: Vec<TranscriptLine>,
    next_id: u64,
    timeout: Duration,
    stderr: tokio::task::JoinHandle<String>,
}

/// How long a third-party agent gets to exit once its stdin is closed.
const ENDED_GRACE: Duration = Duration::from_secs(3);

/// Starts `command`, runs the plan over ACP, closes stdin and waits for the
/// agent to exit (successfully, or it is an error).
pub async fn drive(command: &AgentCommand, plan: &DrivePlan) -> Result<DriveOutcome, DriveError> {
    drive_until(command, plan, std::future::ready(())).await
}

/// [`drive`], reading on after the prompts until `settled` resolves.
pub async fn drive_until(
    command: &AgentCommand,
    plan: &DrivePlan,
    settled: impl Future<Output = ()>,
) -> Result<DriveOutcome, DriveError> {
    let mut process = Command::new(&command.program);
    process
        .args(&command.args)
        .current_dir(&plan.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    process.process_group(0);
    if command.env_clear {
        process.env_clear();
    }
    for var in &command.env_remove {
        process.env_remove(var);
    }
    process.envs(command.env.iter().map(|(k, v)| (k, v)));
    let mut child = process.spawn().map_err(|error| DriveError::Spawn {
        program: command.program.display().to_string(),
        error,
    })?;
    let group = child.id();
    let mut conn = Connection::attach(&mut child, plan.timeout)?;
    let mut result = conn.run(plan).await;
    if result.is_ok()
        && let Err(err) = conn.read_until(settled).await
    {
        result = Err(err);
    }
    let (session_id, stop_reasons) = match result {
        Ok(done) => done,
        Err(err) => {
            // The agent is stuck or gone: stop it, and surface its stderr.
            end_group(group);
            let _ = child.start_kill();
            let _ = child.wait().await;
            let stderr = conn.stderr.await.unwrap_or_default();
            return Err(match err {
                DriveError::Exited { method, .. } => DriveError::Exited { method, stderr },
                other => other,
            });
        }
    };
    drop(conn.stdin.take());
    if plan.exit == ExitPolicy::Ended {
        // Lines written while it winds down are kept; then the group ends.
        let _ = tokio::time::timeout(ENDED_GRACE, async {
            while let Ok(Some(line)) = conn.stdout.next_line().await {
                conn.transcript.push(TranscriptLine {
                    direction: Direction::Received,
                    text: line,
                });
            }
        })
        .await;
        end_group(group);
        let _ = child.start_kill();
        let _ = child.wait().await;
        let stderr_tail = tokio::time::timeout(ENDED_GRACE, conn.stderr)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        return Ok(DriveOutcome {
            transcript: conn.transcript,
            session_id,
            stop_reasons,
            stderr_tail,
        });
    }
    // The agent must not say anything after its stdin closes; if it does, the
    // lines belong in the transcript.
    let exited = tokio::time::timeout(EXIT_GRACE, async {
        while let Ok(Some(line)) = conn.stdout.next_line().await {
            conn.transcript.push(TranscriptLine {
                direction: Direction::Received,
                text: line,
            });
        }
        child.wait().await
    })
    .await;
    let status = match exited {
        Ok(status) => status?,
        Err(_) => {
            end_group(group);
            let _ = child.start_kill();
            let _ = child.wait().await;
            let stderr = conn.stderr.await.unwrap_or_default();
            return Err(DriveError::Failed {
                status: format!(
                    "no exit within {}s of its stdin closing",
                    EXIT_GRACE.as_secs()
                ),
                stderr,
            });
        }
    };
    let stderr_tail = conn.stderr.await.unwrap_or_default();
    if !status.success() {
        return Err(DriveError::Failed {
            status: status.to_string(),
            stderr: stderr_tail,
        });
    }
    Ok(DriveOutcome {
        transcript: conn.transcript,
        session_id,
        stop_reasons,
        stderr_tail,
    })
}

/// Ends the agent's process group (it was made the leader of its own), so no
/// helper process it started outlives it or holds its pipes open.
// The standard library has no killpg.
#[allow(unsafe_code)]
fn end_group(group: Option<u32>) {
    #[cfg(unix)]
    if let Some(group) = group.and_then(|pid| i32::try_from(pid).ok()) {
        // SAFETY: killpg has no memory-safety preconditions; a group that is
        // already gone is an ESRCH error, ignored.
        unsafe {
            libc::killpg(group, libc::SIGKILL);
        }
    }
    #[cfg(not(unix))]
    let _ = group;
}

impl Connection {
    fn attach(child: &mut Child, timeout: Duration) -> Result<Self, DriveError> {
        let missing = |what: &str| DriveError::Io(std::io::Error::other(format!("no {what} pipe")));
        let stdin = child.stdin.take().ok_or_else(|| missing("stdin"))?;
        let stdout = child.stdout.take().ok_or_else(|| missing("stdout"))?;
        let mut stderr = child.stderr.take().ok_or_else(|| missing("stderr"))?;
        // Drain stderr continuously so a chatty agent never blocks on it.
        let stderr = tokio::spawn(async move {
            let mut tail: Vec<u8> = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > STDERR_TAIL_BYTES * 2 {
                    tail.drain(..tail.len() - STDERR_TAIL_BYTES);
                }
            }
            let start = tail.len().saturating_sub(STDERR_TAIL_BYTES);
            String::from_utf8_lossy(&tail[start..]).into_owned()
        });
        Ok(Self {
            stdin: Some(stdin),
            stdout: BufReader::new(stdout).lines(),
            transcript: Vec::new(),
            next_id: 0,
            timeout,
            stderr,
        })
    }

    async fn run(
        &mut self,
        plan: &DrivePlan,
    ) -> Result<(String, Vec<Result<String, String>>), DriveError> {
        let mut capabilities = json!({"fs": {"readTextFile": false, "writeTextFile": false}});
        if plan.client_subagents {
            capabilities["subagents"] = json!({});
        }
        let (init, line) = self
            .request(
                "initialize",
                json!({"protocolVersion": 1, "clientCapabilities": capabilities}),
            )
            .await?;
        if !matches!(init, ResponseOutcome::Result(_)) {
            return Err(refused("initialize", line));
        }
        let (new, line) = self
            .request("session/new", json!({"cwd": plan.cwd, "mcpServers": []}))
            .await?;
        let ResponseOutcome::Result(new) = new else {
            return Err(refused("session/new", line));
        };
        let Some(session_id) = new.get("sessionId").and_then(Value::as_str) else {
            return Err(refused("session/new", line));
        };
        let session_id = session_id.to_string();
        let mut stop_reasons = Vec::new();
        for prompt in &plan.prompts {
            let (answer, _) = self
                .request(
                    "session/prompt",
                    json!({"sessionId": session_id, "prompt": [{"type": "text", "text": prompt}]}),
                )
                .await?;
            let outcome = match answer {
                ResponseOutcome::Result(result) => result
                    .get("stopReason")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .ok_or_else(|| "no stopReason".to_string()),
                ResponseOutcome::Error(error) => {
                    Err(error.message.unwrap_or_else(|| "no stopReason".into()))
                }
            };
            stop_reasons.push(outcome);
        }
        Ok((session_id, stop_reasons))
    }

    /// Reads (recording, refusing the agent's requests) until `settled` resolves.
    async fn read_until(&mut self, settled: impl Future<Output = ()>) -> Result<(), DriveError> {
        tokio::pin!(settled);
        loop {
            let line = tokio::select! {
                () = &mut settled => return Ok(()),
                line = self.stdout.next_line() => line,
            };
            match line {
                Ok(Some(line)) => {
                    self.transcript.push(TranscriptLine {
                        direction: Direction::Received,
                        text: line.clone(),
                    });
                    if let Ok(Message::Request { id, method, .. }) = classify(&line) {
                        self.refuse(id, method, "settling").await?;
                    }
                }
                // The agent exited by itself: nothing more will come.
                Ok(None) => return Ok(()),
                Err(err) => return Err(err.into()),
            }
        }
    }

    /// Answers a request of the agent with method-not-found.
    async fn refuse(
        &mut self,
        id: RequestId,
        method: String,
        pending: &str,
    ) -> Result<(), DriveError> {
        let id = match id {
            RequestId::Number(n) => Value::Number(n),
            RequestId::String(s) => Value::String(s),
        };
        // The method as JSON text, quoted, as transcripts have always shown it.
        let refusal = json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": -32601, "message": format!("method not found: {}", Value::String(method))}});
        self.send_for(pending, &refusal).await
    }

    async fn send(&mut self, message: &Value) -> Result<(), DriveError> {
        let text = message.to_string();
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| std::io::Error::other("stdin already closed"))?;
        let mut line = text.clone().into_bytes();
        line.push(b'\n');
        stdin.write_all(&line).await?;
        stdin.flush().await?;
        self.transcript.push(TranscriptLine {
            direction: Direction::Sent,
            text,
        });
        Ok(())
    }

    /// Sends a request and reads until its response (returned with its line),
    /// recording notifications and refusing the agent's own requests on the way.
    async fn request(
        &mut self,
        method: &str,
        params: Value,
    ) -> Result<(ResponseOutcome, String), DriveError> {
        self.next_id += 1;
        let id = RequestId::Number(self.next_id.into());
        let request =
            json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        self.send_for(method, &request).await?;
        loop {
            let line = match tokio::time::timeout(self.timeout, self.stdout.next_line()).await {
                Err(_) => {
                    return Err(DriveError::Timeout {
                        method: method.to_string(),
                        secs: self.timeout.as_secs(),
                    });
                }
                Ok(Ok(Some(line))) => line,
                Ok(Ok(None)) => return Err(exited(method)),
                Ok(Err(err)) => return Err(err.into()),
            };
            self.transcript.push(TranscriptLine {
                direction: Direction::Received,
                text: line.clone(),
            });
            match classify(&line) {
                Ok(Message::Response {
                    id: Some(answered),
                    outcome,
                }) if answered == id => return Ok((outcome, line)),
                Ok(Message::Request {
                    id: asked_id,
                    method: asked,
                    ..
                }) => self.refuse(asked_id, asked, method).await?,
                // A malformed answer to this request (neither result nor error) is a
                // refusal now, not a timeout later.
                Err(_) if answers(&line, self.next_id) => return Err(refused(method, line)),
                // Notifications, other responses and lines that are not JSON-RPC
                // are only recorded.
                _ => {}
            }
        }
    }

    /// [`Self::send`] while `method` is pending: a closed stdin means the agent
    /// is gone, which is reported like a closed stdout, so its stderr is shown.
    async fn send_for(&mut self, method: &str, message: &Value) -> Result<(), DriveError> {
        match self.send(message).await {
            Err(DriveError::Io(err)) if err.kind() == std::io::ErrorKind::BrokenPipe => {
                Err(exited(method))
            }
            other => other,
        }
    }
}

/// Whether `line` is an object without a method carrying request id `id`.
fn answers(line: &str, id: u64) -> bool {
    serde_json::from_str::<Value>(line).is_ok_and(|message| {
        message.get("method").is_none() && message.get("id") == Some(&json!(id))
    })
}

/// The agent went away while `method` was pending; [`drive`] adds its stderr.
fn exited(method: &str) -> DriveError {
    DriveError::Exited {
        method: method.to_string(),
        stderr: String::new(),
    }
}

fn refused(method: &str, answer: String) -> DriveError {
    DriveError::Refused {
        method: method.to_string(),
        answer,
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn plan() -> DrivePlan {
        DrivePlan {
            cwd: PathBuf::from("/"),
            prompts: vec!["hi".into()],
            client_subagents: false,
            timeout: Duration::from_secs(10),
            exit: ExitPolicy::Clean,
        }
    }

    fn shell(script: &str) -> AgentCommand {
        AgentCommand {
            program: PathBuf::from("sh"),
            args: vec!["-c".into(), script.into()],
            env_remove: Vec::new(),
            env: vec![("FANOUT_TEST_REASON".into(), "no model".into())],
            env_clear: false,
        }
    }

    #[tokio::test]
    async fn an_agent_that_dies_before_reading_is_reported_with_its_stderr() {
        // Stdin closed first, so the first write fails (EPIPE) rather than the read.
        let command = shell("exec 0<&-; echo \"cannot start: $FANOUT_TEST_REASON\" >&2; sleep 1");
        let err = drive(&command, &plan()).await.unwrap_err().to_string();
        assert!(
            err.starts_with("the agent exited before answering initialize")
                && err.ends_with("its stderr ends with:\ncannot start: no model"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_closed_stdin_is_the_agent_gone_not_an_io_error() {
        // "ready" comes after stdin is closed, so the write below must hit EPIPE.
        let mut child = Command::new("sh")
            .args(["-c", "exec 0<&-; echo ready; sleep 5"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut conn = Connection::attach(&mut child, Duration::from_secs(10)).unwrap();
        assert_eq!(
            conn.stdout.next_line().await.unwrap().as_deref(),
            Some("ready")
        );
        let err = conn.request("initialize", json!({})).await.unwrap_err();
        assert!(
            matches!(&err, DriveError::Exited { method, .. } if method == "initialize"),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_malformed_answer_is_a_refusal_not_a_timeout() {
        let command = shell(r#"read line; echo '{"jsonrpc":"2.0","id":1}'; exec sleep 30"#);
        // A timeout would be DriveError::Timeout; the answer must be read as a refusal.
        let err = drive(&command, &plan()).await.unwrap_err();
        assert!(
            matches!(&err, DriveError::Refused { method, .. } if method == "initialize"),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn an_agent_that_exits_before_answering_is_reported_with_its_stderr() {
        let command = shell("read line; echo gone >&2");
        let err = drive(&command, &plan()).await.unwrap_err().to_string();
        assert!(
            err.starts_with("the agent exited before answering initialize")
                && err.ends_with("its stderr ends with:\ngone"),
            "{err}"
        );
    }
}
