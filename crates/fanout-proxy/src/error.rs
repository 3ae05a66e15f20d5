//! Typed errors of the proxy. Each names what failed and why, in one line, because the
//! CLI prints them verbatim; [`ProxyError::exit_code`] says which status a shell expects.

use std::io;
use std::path::PathBuf;

/// Why a proxy run could not start or finish. Store trouble is never one of them: the
/// store is retried in the background while forwarding goes on.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// Nothing to run.
    #[error("no agent command: give one after `--`, e.g. `fanout proxy -- my-agent --acp`")]
    NoAgentCommand,

    /// The agent process could not be started.
    #[error("cannot start the agent {program:?}: {cause}")]
    AgentSpawn {
        /// The program, as given.
        program: String,
        /// The OS error (not found, not executable, …).
        cause: io::Error,
    },

    /// The proxy's own stdin or stdout could not be duplicated for the pumps.
    #[error("cannot take over the client's stdin/stdout: {0}")]
    ClientStdio(io::Error),

    /// A pipe, a forwarding thread, the process group or the signal handlers could not
    /// be set up.
    #[error("cannot start the proxy's {what}: {cause}")]
    Setup {
        /// Which part.
        what: &'static str,
        /// The OS error.
        cause: io::Error,
    },

    /// The transcript could not be created ([`crate::TranscriptWriter::create`]; a run
    /// logs it and goes on without one).
    #[error("cannot create a transcript in {}: {cause}", dir.display())]
    Transcript {
        /// The transcript directory.
        dir: PathBuf,
        /// The OS error.
        cause: io::Error,
    },

    /// Waiting for the agent's exit failed.
    #[error("cannot wait for the agent: {0}")]
    Wait(io::Error),
}

impl ProxyError {
    /// The process exit status for this error, following the shell's conventions:
    /// 127 the command was not found (or could not start at all), 126 it was found but
    /// is not executable, 64 a usage error (EX_USAGE, as for every fanout command), 1
    /// anything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            ProxyError::NoAgentCommand => 64,
            ProxyError::AgentSpawn { cause, .. } => match cause.kind() {
                io::ErrorKind::PermissionDenied => 126,
                _ => 127,
            },
            _ => 1,
        }
    }
}
