//! regorus writes some findings straight to the process's stderr while it
//! parses and prepares modules (a warning about a keyword, "could not
//! schedule all statements"): on a bridge that is the operator's log,
//! and the text has no timestamp or level. [`captured`] runs a load with
//! file descriptor 2 pointed at a file of its own, restores it, and hands
//! back what regorus wrote; anything else written to stderr meanwhile (a
//! log line of another thread) is written to the real stderr after it, so
//! nothing is lost. Loads are rare (start, a reload, `config check`), and
//! one at a time.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::sync::Mutex;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// What regorus writes to stderr starts with one of these.
const REGORUS: &[&str] = &[
    "could not schedule all statements",
    "-->",
    "Warning: Target specifications",
    "         ",
];

/// Runs `f` with stderr captured; its value and regorus's lines.
pub(super) fn captured<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let Some(mut sink) = tempfile() else {
        return (f(), vec![]);
    };
    // SAFETY: dup/dup2 on descriptors this function owns or 2; the saved
    // descriptor is restored and closed before returning.
    let saved = unsafe { libc::dup(2) };
    if saved < 0 || unsafe { libc::dup2(sink.as_raw_fd(), 2) } < 0 {
        if saved >= 0 {
            unsafe { libc::close(saved) };
        }
        return (f(), vec![]);
    }
    let value = f();
    unsafe {
        libc::dup2(saved, 2);
        libc::close(saved);
    }
    let mut text = String::new();
    let _ = sink.seek(SeekFrom::Start(0));
    let _ = sink.read_to_string(&mut text);
    let (ours, others) = split(&text);
    if !others.is_empty() {
        let _ = std::io::stderr().write_all(others.as_bytes());
    }
    (value, ours)
}

/// regorus's messages (each may span lines: a source excerpt) and the rest.
fn split(text: &str) -> (Vec<String>, String) {
    let mut ours: Vec<String> = Vec::new();
    let mut others = String::new();
    let mut in_excerpt = false;
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end_matches('\n');
        let excerpt_line = in_excerpt
            && (bare.trim_start().starts_with('|')
                || bare
                    .split('|')
                    .next()
                    .is_some_and(|n| n.trim().parse::<u32>().is_ok())
                || bare.starts_with("warning:")
                || bare.starts_with("error:"));
        if excerpt_line {
            if let Some(last) = ours.last_mut() {
                last.push('\n');
                last.push_str(bare);
            }
            in_excerpt = !(bare.starts_with("warning:") || bare.starts_with("error:"));
        } else if bare.is_empty() && !in_excerpt {
            // regorus's excerpts start with a blank line.
            in_excerpt = true;
            ours.push(String::new());
        } else if REGORUS.iter().any(|p| bare.starts_with(p)) {
            ours.push(bare.to_owned());
            in_excerpt = bare.starts_with("-->");
        } else {
            in_excerpt = false;
            others.push_str(line);
        }
    }
    ours.retain(|m| !m.trim().is_empty());
    (ours, others)
}

fn tempfile() -> Option<File> {
    let dir = std::env::temp_dir();
    for n in 0..16u32 {
        let path = dir.join(format!(
            "ahp-bridge-rego-{}-{}-{n}.stderr",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
        ));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path);
        if let Ok(f) = file {
            // Unlinked at once: the descriptor keeps it while it is used.
            let _ = std::fs::remove_file(&path);
            return Some(f);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regorus_lines_are_taken_and_the_rest_passes_through() {
        let text = "could not schedule all statements [0]\nlog line of another thread\n\n--> a.rego:2:3\n  |\n2 | x\n  |   ^\nwarning: redundant import\nafter\n";
        let (ours, others) = split(text);
        assert_eq!(ours.len(), 2, "{ours:?}");
        assert!(ours[0].starts_with("could not schedule"));
        assert!(
            ours[1].contains("a.rego:2:3") && ours[1].contains("warning: redundant"),
            "{:?}",
            ours[1]
        );
        assert_eq!(others, "log line of another thread\nafter\n");
    }
}
