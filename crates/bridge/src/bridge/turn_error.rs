//! Why a turn could not start, or a runtime session not be bound: the
//! runtime not reached, a runtime call that failed (which, and why), or the
//! session or the host gone meanwhile. Shown to the client as the turn's
//! `chat/error` (or the session's creation failure), with its causes.

use super::pool::ReachError;
use crate::jsonrpc::CallError;

#[derive(Debug, thiserror::Error)]
pub(super) enum TurnError {
    #[error(transparent)]
    Reach(#[from] ReachError),
    /// The runtime call `method` failed; its cause is the call's error.
    #[error("{method}")]
    Call {
        method: &'static str,
        #[source]
        source: CallError,
    },
    #[error("session {0} is gone")]
    SessionGone(String),
    #[error("host gone")]
    HostGone,
}

impl TurnError {
    /// A failed runtime call, named by its method.
    pub(super) fn call(method: &'static str) -> impl FnOnce(CallError) -> Self {
        move |source| Self::Call { method, source }
    }
}
