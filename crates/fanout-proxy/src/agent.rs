//! Supervising the agent process: it runs in its own process group (so a terminal's
//! Ctrl-C reaches the proxy, which decides, and so the whole tree can be cleaned up),
//! signals sent to the proxy are forwarded to that group, and its exit status becomes
//! the proxy's.

use std::fs::File;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::oneshot;
use tokio::time::{Instant, sleep, sleep_until};

use crate::error::ProxyError;

/// How the agent ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentExit {
    /// It exited with this status.
    Code(i32),
    /// A signal killed it.
    Signal(i32),
}

impl AgentExit {
    fn of(status: ExitStatus) -> Self {
        match (status.code(), status.signal()) {
            (Some(code), _) => AgentExit::Code(code),
            (None, Some(signal)) => AgentExit::Signal(signal),
            // Neither (stopped/continued cannot be a final status): call it a failure.
            (None, None) => AgentExit::Code(1),
        }
    }

    /// The status a shell would report: the code, or 128 + the signal number.
    pub fn exit_code(self) -> u8 {
        match self {
            AgentExit::Code(code) => (code & 0xff) as u8,
            AgentExit::Signal(signal) => (128 + signal).clamp(0, 255) as u8,
        }
    }
}

/// A started agent: the process, its group, and our ends of its stdin and stdout as
/// blocking files for the pump threads.
pub(crate) struct SpawnedAgent {
    pub child: Child,
    pub process_group: i32,
    pub stdin: File,
    pub stdout: File,
}

/// Starts `argv` in a new process group with piped stdin/stdout and our stderr.
pub(crate) fn spawn_agent(
    argv: &[String],
    env: &[(&str, &str)],
) -> Result<SpawnedAgent, ProxyError> {
    let Some((program, args)) = argv.split_first() else {
        return Err(ProxyError::NoAgentCommand);
    };
    let spawn_error = |cause| ProxyError::AgentSpawn {
        program: program.clone(),
        cause,
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0);
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().map_err(spawn_error)?;
    let stdin = blocking_pipe(
        child
            .stdin
            .take()
            .map(tokio::process::ChildStdin::into_owned_fd),
        "agent stdin",
    )?;
    let stdout = blocking_pipe(
        child
            .stdout
            .take()
            .map(tokio::process::ChildStdout::into_owned_fd),
        "agent stdout",
    )?;
    // `process_group(0)` makes the child the leader of a group with its own pid.
    let process_group = child
        .id()
        .and_then(|pid| i32::try_from(pid).ok())
        .ok_or_else(|| ProxyError::Setup {
            what: "agent process group",
            cause: std::io::Error::other("the agent has no process id"),
        })?;
    Ok(SpawnedAgent {
        child,
        process_group,
        stdin,
        stdout,
    })
}

/// Our end of one of the agent's pipes, in blocking mode, as a file for a pump thread.
fn blocking_pipe(
    pipe: Option<std::io::Result<std::os::fd::OwnedFd>>,
    what: &'static str,
) -> Result<File, ProxyError> {
    let fd = pipe
        .unwrap_or_else(|| Err(std::io::Error::other("the pipe was not created")))
        .map_err(|cause| ProxyError::Setup { what, cause })?;
    Ok(File::from(fd))
}

/// Sends `signal` to every process of the group; false when the group is gone.
// An unsafe block: the standard library has no killpg.
#[allow(unsafe_code)]
pub(crate) fn signal_group(process_group: i32, signal: i32) -> bool {
    // SAFETY: killpg has no memory-safety preconditions; a bad group is an ESRCH error.
    unsafe { libc::killpg(process_group, signal) == 0 }
}

/// Ends what is left of the group after its leader exited: SIGTERM, then SIGKILL for
/// whatever still runs after `grace`.
pub(crate) async fn end_group(process_group: i32, grace: Duration) {
    if !signal_group(process_group, libc::SIGTERM) {
        return;
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        sleep(Duration::from_millis(20)).await;
        if !signal_group(process_group, 0) {
            return;
        }
    }
    signal_group(process_group, libc::SIGKILL);
}

/// Policy for [`supervise`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Supervision {
    /// After the client closed stdin, how long the agent may keep running before its
    /// group gets SIGTERM (`None`: as long as it likes).
    pub eof_grace: Option<Duration>,
    /// After a SIGTERM the proxy sent on its own, how long before SIGKILL.
    pub kill_grace: Duration,
}

/// Waits for the agent to exit, forwarding SIGINT, SIGTERM, SIGHUP and SIGQUIT to its
/// group. The same terminating signal twice means the user insists: SIGKILL.
pub(crate) async fn supervise(
    child: &mut Child,
    process_group: i32,
    mut client_closed: oneshot::Receiver<()>,
    policy: Supervision,
) -> Result<AgentExit, ProxyError> {
    let setup = |cause| ProxyError::Setup {
        what: "signal handlers",
        cause,
    };
    let mut interrupt = signal(SignalKind::interrupt()).map_err(setup)?;
    let mut terminate = signal(SignalKind::terminate()).map_err(setup)?;
    let mut hangup = signal(SignalKind::hangup()).map_err(setup)?;
    let mut quit = signal(SignalKind::quit()).map_err(setup)?;
    let mut client_open = true;
    let mut term_deadline: Option<Instant> = None;
    let mut kill_deadline: Option<Instant> = None;
    let mut received = [false; 2];
    let far = || Instant::now() + Duration::from_secs(86_400 * 365);
    loop {
        let forwarded = tokio::select! {
            status = child.wait() => return status.map(AgentExit::of).map_err(ProxyError::Wait),
            _ = interrupt.recv() => Some((libc::SIGINT, 0)),
            _ = terminate.recv() => Some((libc::SIGTERM, 1)),
            _ = hangup.recv() => { signal_group(process_group, libc::SIGHUP); None }
            _ = quit.recv() => { signal_group(process_group, libc::SIGQUIT); None }
            _ = &mut client_closed, if client_open => {
                client_open = false;
                term_deadline = policy.eof_grace.map(|grace| Instant::now() + grace);
                None
            }
            _ = sleep_until(term_deadline.unwrap_or_else(far)), if term_deadline.is_some() => {
                tracing::warn!(
                    "the client closed its input and the agent is still running: ending the agent's process group"
                );
                term_deadline = None;
                signal_group(process_group, libc::SIGTERM);
                kill_deadline = Some(Instant::now() + policy.kill_grace);
                None
            }
            _ = sleep_until(kill_deadline.unwrap_or_else(far)), if kill_deadline.is_some() => {
                kill_deadline = None;
                signal_group(process_group, libc::SIGKILL);
                None
            }
        };
        if let Some((signal, slot)) = forwarded {
            if received[slot] {
                tracing::warn!("signal received again: killing the agent's process group");
                signal_group(process_group, libc::SIGKILL);
            } else {
                received[slot] = true;
                signal_group(process_group, signal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell() {
        assert_eq!(AgentExit::Code(7).exit_code(), 7);
        assert_eq!(AgentExit::Code(256 + 3).exit_code(), 3);
        assert_eq!(AgentExit::Signal(libc::SIGTERM).exit_code(), 143);
        assert_eq!(AgentExit::Signal(libc::SIGKILL).exit_code(), 137);
    }

    #[tokio::test]
    async fn a_missing_program_is_a_spawn_error() {
        let Err(error) = spawn_agent(&["/nonexistent/fanout-agent".to_owned()], &[]) else {
            panic!("spawned a missing program");
        };
        assert_eq!(error.exit_code(), 127);
        assert!(
            error.to_string().contains("/nonexistent/fanout-agent"),
            "{error}"
        );
        assert!(matches!(
            spawn_agent(&[], &[]),
            Err(ProxyError::NoAgentCommand)
        ));
    }
}
