//! Why a runtime could not be started, reached or greeted: each says what
//! to do about it where there is something to do (install the CLI, the
//! pinned version).

use std::path::PathBuf;
use std::time::Duration;

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
    /// Reading a spawned runtime's output or setting up its socket.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
