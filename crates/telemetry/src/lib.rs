//! What an operator sees of the bridge: its metrics ([`metrics`], served
//! at `/metrics`), its log lines ([`logs`]), its traces ([`traces`], sent
//! to an OTLP collector), and client strings made safe to log
//! ([`Escaped`]), and an error with its causes ([`Causes`]). At the bottom of the layers: anything may count.

mod exposition;
mod logs;
mod metrics;
mod process_metrics;
mod traces;
pub use exposition::{wants_openmetrics, OPENMETRICS, TEXT_004};
pub use logs::init_logs;
pub use traces::{build_traces, set_remote_parent, Traces};

pub use metrics::{metrics, Refusal, TurnOutcome};

/// A string from a client, for a log line: control characters and
/// non-ASCII escaped as Rust writes them (`\n`, `\u{1b}`), without the
/// quotes `?` would add, so no line can be forged in either log format.
pub struct Escaped<'a>(pub &'a str);

impl std::fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for c in self.0.chars() {
            if c.is_control() || c == '\\' {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

/// An error with its causes, for a log line or the message a client is
/// shown where the error ends its way (it is not passed on): each cause
/// after the error, joined by `: `, as the binary prints a chain. Errors
/// keep their cause as `#[source]`, never in their own text, so nothing is
/// said twice.
pub struct Causes<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for Causes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(c) = cause {
            write!(f, ": {c}")?;
            cause = c.source();
        }
        Ok(())
    }
}

/// Why a readiness check fails, said for an operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CheckFailed(pub String);

/// Whether this process may write `path` (or create it, if it does not
/// exist yet, in its directory): for readiness checks.
pub fn writable(path: &std::path::Path) -> Result<(), CheckFailed> {
    use std::os::unix::ffi::OsStrExt;
    let target = if path.exists() {
        path
    } else {
        path.parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."))
    };
    let c = std::ffi::CString::new(target.as_os_str().as_bytes())
        .map_err(|e| CheckFailed(e.to_string()))?;
    // SAFETY: access(2) reads the NUL-terminated path it is given.
    match unsafe { libc::access(c.as_ptr(), libc::W_OK) } {
        0 => Ok(()),
        _ => Err(CheckFailed(format!(
            "{} is not writable: {}",
            target.display(),
            std::io::Error::last_os_error()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::{Causes, Escaped};

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn causes_follow_the_error() {
        let e = Outer(std::io::Error::other("inner"));
        assert_eq!(Causes(&e).to_string(), "outer: inner");
    }

    #[test]
    fn control_characters_are_escaped_and_nothing_else() {
        let shown = Escaped("evil\nINFO forged \u{1b}[31m é \\").to_string();
        assert_eq!(shown, r"evil\nINFO forged \u{1b}[31m é \\");
    }
}
