//! Why the SDK gate cannot listen, and why an app's connection gets no
//! runtime: each with its cause kept, for the operator's log and the
//! app's `connect` error.

use std::net::SocketAddr;
use std::time::Duration;

use crate::ahp::tls::TlsLoadError;
use crate::bridge::ReachError;
use crate::runtime::FrameError;

/// Why `[sdk] listen` is not served.
#[derive(Debug, thiserror::Error)]
pub enum SdkListenError {
    #[error("cannot listen for SDK apps on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the SDK listener's address")]
    LocalAddr(#[source] std::io::Error),
    #[error(transparent)]
    Tls(#[from] TlsLoadError),
}

/// Why the bridge has no runtime for an app's connection.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OpenRuntimeError {
    #[error(transparent)]
    Reach(#[from] ReachError),
    #[error("the runtime at {addr} did not accept within {after:?}")]
    AcceptTimeout { addr: String, after: Duration },
    #[error("cannot connect to the runtime at {addr}")]
    Connect {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the runtime's connection")]
    Frame(#[from] FrameError),
    #[error("the runtime's answer to connect is not JSON-RPC")]
    Answer(#[from] serde_json::Error),
    #[error("the runtime refused the bridge's connect: {0}")]
    Refused(String),
    #[error("connect answered without a result")]
    NoResult,
    #[error("the runtime closed the connection")]
    Closed,
    #[error("the runtime did not answer connect within {0:?}")]
    AnswerTimeout(Duration),
}
