//! Typed errors of the proxy. Each names what failed and why, in one line, because the
//! CLI prints them verbatim; [`ProxyError::exit_code`] says which status a shell expects.

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("no agent command: give one after `--`, e.g. `fanout proxy -- my-agent --acp`")]
    NoAgentCommand,

    #[error("cannot start the agent {program:?}: {cause}")]
    AgentSpawn { program: String, cause: io::Error },

    #[error("cannot take over the client's stdin/stdout: {0}")]
    ClientStdio(io::Error),

    #[error("cannot start the proxy's {what}: {cause}")]
    Setup {
        what: &'static str,
        cause: io::Error,
    },

    #[error("cannot create a transcript in {}: {cause}", dir.display())]
    Transcript { dir: PathBuf, cause: io::Error },

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
