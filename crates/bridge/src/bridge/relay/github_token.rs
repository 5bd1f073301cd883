//! Where the relay reads the GitHub token it seals to the host: a file or
//! an environment variable, read anew at each connection (a rotated token
//! is used from the next link on).

use std::path::PathBuf;

use super::relay_error::RelayError;
use crate::config::Secret;

/// `[runtime.ahp] github_token_file` or `github_token_env`.
#[derive(Debug, Clone)]
pub(crate) enum GithubToken {
    File(PathBuf),
    Env(String),
}

impl GithubToken {
    /// The token now (a rotated file is read anew at each connection).
    pub(super) fn read(&self) -> Result<Secret, RelayError> {
        let (what, value) = match self {
            Self::File(p) => (
                format!("runtime.ahp.github_token_file {}", p.display()),
                std::fs::read_to_string(p).map_err(|e| e.to_string()),
            ),
            Self::Env(v) => (
                format!("runtime.ahp.github_token_env {v}"),
                std::env::var(v).map_err(|e| e.to_string()),
            ),
        };
        match value {
            Ok(t) if !t.trim().is_empty() => Ok(Secret(t.trim().to_owned())),
            Ok(_) => Err(RelayError::Token(format!("{what}: empty"))),
            Err(e) => Err(RelayError::Token(format!("{what}: {e}"))),
        }
    }
}
