//! What can go wrong upstream, in words an operator can act on. No variant
//! holds the host's URL (its connection token rides in the query) or any
//! token: the host's own message is passed on as it said it.

/// An upstream failure.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The host's `initialize` or root state lacks what authenticating
    /// needs ("no x25519-sealedbox key for auth-token").
    #[error("the agent host announced no usable authentication: {0}")]
    Announcement(String),
    /// Sealing the token failed (a malformed public key).
    #[error("could not seal the GitHub token to the agent host's key: {0}")]
    Seal(String),
    /// The host could not be reached (the URL here never carries the token).
    #[error("cannot reach the agent host at {url}: {reason}")]
    Connect { url: String, reason: String },
    /// A request failed or the connection ended under it.
    #[error("the agent host's {method} failed: {reason}")]
    Rpc {
        method: &'static str,
        reason: String,
    },
    /// The host does not have what a request named (a session it lost:
    /// stopped before it stored it, or its state gone), in its own words.
    #[error("the agent host's {method} found nothing: {message}")]
    NotFound {
        method: &'static str,
        message: String,
    },
    /// The host refused a command, in its own words.
    #[error("the agent host refused {method}: {message}")]
    Refused {
        method: &'static str,
        message: String,
    },
    /// The host refused `authenticate`, in its own words.
    #[error("the agent host refused the GitHub token: {0}")]
    Auth(String),
}
