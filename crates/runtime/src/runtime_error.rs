//! Why a runtime could not be started, reached or greeted: each says what
//! to do about it where there is something to do (install the CLI, the
//! pinned version).

use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use ahp_bridge_telemetry::Escaped;

use crate::stderr_tail::StderrTail;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("cannot start the runtime {}: {reason} (run scripts/install-runtime.sh, or set [runtime] command)", program.display())]
    Spawn { program: PathBuf, reason: String },
    #[error("runtime {} did not answer the handshake within {after:?}", program.display())]
    HandshakeTimeout { program: PathBuf, after: Duration },
    #[error("no randomness for a token: {0}")]
    NoRandomness(String),
    /// A spawned runtime's first lines did not say where it listens.
    #[error("the runtime said {0:?}")]
    UnexpectedLine(String),
    #[error("the runtime exited before it listened")]
    ExitedBeforeListening,
    #[error("runtime {} did not listen within {after:?}", program.display())]
    ListenTimeout { program: PathBuf, after: Duration },
    #[error("cannot connect to the runtime at {addr}: {reason}")]
    Connect { addr: String, reason: String },
    #[error("the runtime's connect answer is not as its schema says: {0}")]
    ConnectAnswer(String),
    #[error("runtime ping failed: {0}")]
    Ping(String),
    #[error("runtime connect failed: {0}")]
    ConnectCall(String),
    #[error("runtime speaks protocol version {found}, this bridge speaks only {speaks}; install the pinned CLI (scripts/install-runtime.sh)")]
    Protocol { found: u64, speaks: u64 },
    /// A runtime this bridge spawned failed to start (`cause`): how it
    /// ended, and its stderr's last lines (bounded, secrets redacted),
    /// which say why far better than "connection closed".
    #[error("{cause}; {}", how_it_ended(status.as_ref(), stderr))]
    Ended {
        cause: Box<RuntimeError>,
        /// None when it had not exited within the wait (a grandchild may
        /// hold on).
        status: Option<ExitStatus>,
        stderr: StderrTail,
    },
    /// Reading a spawned runtime's output or setting up its socket.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// How a runtime that failed to start ended and what it said, on one line:
/// each stderr line escaped as a client's strings are in the log, so a
/// control character or an ANSI sequence cannot forge or hide a line.
fn how_it_ended(status: Option<&ExitStatus>, stderr: &StderrTail) -> String {
    let ended = match status {
        Some(s) => format!("the runtime ended ({s})"),
        None => "the runtime had not ended".to_owned(),
    };
    if stderr.lines.is_empty() {
        return format!("{ended}, saying nothing on stderr");
    }
    let lines: Vec<String> = stderr
        .lines
        .iter()
        .map(|l| format!("\"{}\"", Escaped(l)))
        .collect();
    let cut = if stderr.cut { "... " } else { "" };
    format!(
        "{ended}; its last words on stderr: {cut}{}",
        lines.join(" | ")
    )
}
