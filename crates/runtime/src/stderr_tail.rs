//! What a spawned runtime last said on stderr: every line goes to the log
//! (debug), and the last few are kept, so that a runtime that dies while
//! starting is reported with its own words instead of "connection closed".
//! Kept bounded (it runs for the runtime's whole life) and without the
//! secrets the runtime was given, which it might echo.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;
use tokio_util::sync::CancellationToken;
use tracing::debug;

/// The most lines, and bytes over all of them, the tail keeps.
pub(crate) const TAIL_LINES: usize = 20;
pub(crate) const TAIL_BYTES: usize = 4096;

/// How long a failed start waits for the runtime to exit and its stderr to
/// end: a dying process closes its pipe at once; one that hangs on is
/// killed first, and a grandchild holding the pipe open is not waited for.
const TAIL_WAIT: Duration = Duration::from_secs(2);

/// What replaces a secret in a kept line.
const REDACTED: &str = "[redacted]";

/// The last lines of a runtime's stderr, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StderrTail {
    pub lines: Vec<String>,
    /// Whether older lines were let go to keep within the bounds.
    pub cut: bool,
}

/// The reader of a spawned runtime's stderr: its kept lines, and whether
/// the pipe has ended.
pub(crate) struct StderrWatch {
    kept: Arc<Mutex<TailLines>>,
    ended: CancellationToken,
}

#[derive(Default)]
struct TailLines {
    lines: VecDeque<String>,
    bytes: usize,
    cut: bool,
}

impl TailLines {
    fn push(&mut self, line: String) {
        let line = clip(line, TAIL_BYTES);
        self.bytes += line.len();
        self.lines.push_back(line);
        while self.lines.len() > TAIL_LINES || self.bytes > TAIL_BYTES {
            let Some(old) = self.lines.pop_front() else {
                break;
            };
            self.bytes -= old.len();
            self.cut = true;
        }
    }
}

/// `line` cut to at most `max` bytes, on a character's boundary.
fn clip(mut line: String, max: usize) -> String {
    if line.len() > max {
        let mut end = max;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        line.truncate(end);
    }
    line
}

/// Every value of a variable whose name says it holds a secret (a token, a
/// key, a password), of `env` (what the runtime is given) and of this
/// process's environment (which it inherits), with `token` (its connection
/// token): what a kept line must not carry. Short values are left out:
/// replacing "1" everywhere would hide the message, not a secret.
pub(crate) fn secrets<'a>(
    env: impl IntoIterator<Item = (&'a String, &'a String)>,
    token: Option<&str>,
) -> Vec<String> {
    let secret_name = |k: &str| {
        let k = k.to_ascii_uppercase();
        ["TOKEN", "KEY", "SECRET", "PASSWORD"]
            .iter()
            .any(|w| k.contains(w))
    };
    let given = env
        .into_iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .chain(std::env::vars());
    let mut out: Vec<String> = given
        .filter(|(k, v)| secret_name(k) && v.len() >= 6)
        .map(|(_, v)| v)
        .chain(token.map(String::from))
        .collect();
    // The longest first: a secret that holds another is replaced whole.
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

fn redact(mut line: String, secrets: &[String]) -> String {
    for s in secrets {
        if line.contains(s.as_str()) {
            line = line.replace(s.as_str(), REDACTED);
        }
    }
    line
}

impl StderrWatch {
    /// Reads `child`'s stderr until it ends: each line logged (debug) and
    /// kept without `secrets`. None when its stderr is not piped.
    pub(crate) fn start(child: &mut Child, secrets: Vec<String>) -> Option<Self> {
        let stderr = child.stderr.take()?;
        let watch = Self {
            kept: Arc::default(),
            ended: CancellationToken::new(),
        };
        // Weak: once the start is over the watch is dropped, and the lines
        // of a runtime that runs for weeks are logged, not kept.
        let (kept, ended) = (Arc::downgrade(&watch.kept), watch.ended.clone());
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let line = redact(line, &secrets);
                debug!(target: "runtime", "{line}");
                if let Some(kept) = kept.upgrade() {
                    kept.lock().unwrap_or_else(|p| p.into_inner()).push(line);
                }
            }
            ended.cancel();
        });
        Some(watch)
    }

    /// The lines kept so far.
    pub(crate) fn tail(&self) -> StderrTail {
        let k = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        StderrTail {
            lines: k.lines.iter().cloned().collect(),
            cut: k.cut,
        }
    }
}

/// The end of a runtime that failed to start: it is killed if it still
/// runs, then its exit status and its stderr's last lines are taken, each
/// waited for at most [`TAIL_WAIT`].
pub(crate) async fn last_words(
    child: &mut Child,
    stderr: Option<&StderrWatch>,
) -> (Option<std::process::ExitStatus>, StderrTail) {
    if matches!(child.try_wait(), Ok(None)) {
        let _ = child.start_kill();
    }
    let status = tokio::time::timeout(TAIL_WAIT, child.wait())
        .await
        .ok()
        .and_then(Result::ok);
    let Some(watch) = stderr else {
        return (status, StderrTail::default());
    };
    let _ = tokio::time::timeout(TAIL_WAIT, watch.ended.cancelled()).await;
    (status, watch.tail())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_lines_within_its_bounds() {
        let mut k = TailLines::default();
        for i in 0..TAIL_LINES + 5 {
            k.push(format!("line {i}"));
        }
        assert_eq!(k.lines.len(), TAIL_LINES);
        assert_eq!(k.lines.front().unwrap(), "line 5");
        assert!(k.cut);
        let mut k = TailLines::default();
        k.push("first".into());
        k.push("é".repeat(TAIL_BYTES));
        assert_eq!(k.lines.len(), 1, "the long line pushed out the first");
        let kept = k.lines.front().unwrap();
        assert!(kept.len() <= TAIL_BYTES && kept.starts_with('é'));
        assert!(k.bytes <= TAIL_BYTES);
    }

    #[test]
    fn secrets_are_redacted_from_kept_lines() {
        let env = [
            ("GITHUB_TOKEN".to_string(), "ghp_abcdef123456".to_string()),
            ("COPILOT_MODEL".to_string(), "gpt-5-mini".to_string()),
            ("SHORT_KEY".to_string(), "1".to_string()),
        ];
        let s = secrets(env.iter().map(|(k, v)| (k, v)), Some("conn-token-0123"));
        let line = redact(
            "auth ghp_abcdef123456 failed on gpt-5-mini with conn-token-0123 x1".into(),
            &s,
        );
        assert_eq!(
            line,
            "auth [redacted] failed on gpt-5-mini with [redacted] x1"
        );
    }
}
