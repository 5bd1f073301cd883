//! Why the relay could not start, link, or create a session.

use crate::runtime::RuntimeError;
use crate::upstream::UpstreamError;

/// Why the relay could not start or link.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    #[error("the agent host did not start: {0}")]
    Start(#[from] RuntimeError),
    #[error("cannot read the GitHub token: {0}")]
    Token(String),
    #[error("the agent host is not linked (the bridge is linking again)")]
    NotLinked,
    #[error("the bridge is stopping")]
    Stopping,
    #[error("config runtime.ahp: no GitHub token source")]
    NoGithubTokenSource,
    #[error("config runtime.ahp.connection_token_file {}", path.display())]
    ConnectionTokenFile {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}
