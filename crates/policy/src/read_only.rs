//! `[policy] auto_approve_read_only`: which permission requests of the
//! runtime's AHP host only read. The host itself approves what it judges
//! read-only inside the workspace and asks about the rest, marking every
//! command it asks about `readOnly: false` (a read outside the workspace
//! included), so the bridge judges by the command, conservatively: a shell
//! request whose every segment runs a reading command, with no file
//! redirection and nothing it cannot see run (`$(...)`, an interpreter).

use serde_json::Value;

/// Commands that only read, whatever their arguments (but `find`'s and
/// `git`'s, checked below).
/// Left out on purpose: those that can write or run something given an
/// option or a second operand (`sort -o`, `uniq IN OUT`, `tree -o`, `file
/// -C`, `rg --pre`, `less`'s `!`, `date -s`).
const READERS: &[&str] = &[
    "cat", "head", "tail", "ls", "wc", "stat", "grep", "egrep", "fgrep", "pwd", "which", "du",
    "df", "diff", "cmp", "basename", "dirname", "realpath", "readlink", "cut", "nl", "echo",
    "printf", "true", "whoami", "id", "uname", "find", "git",
];

/// `git` subcommands that only read.
const GIT_READERS: &[&str] = &[
    "status",
    "log",
    "diff",
    "show",
    "ls-files",
    "rev-parse",
    "blame",
    "grep",
    "describe",
];

/// `find` actions that write, delete or run something.
const FIND_WRITERS: &[&str] = &[
    "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls",
];

/// Whether `request` (a permission request as the host sends it in
/// `_meta.permissionRequest`) only reads.
pub fn only_reads(request: &Value) -> bool {
    if request["kind"] == "read" {
        return true;
    }
    if request["kind"] != "shell" || request["hasWriteFileRedirection"] != Value::Bool(false) {
        return false;
    }
    // The host leaves a redirection out of the segments, and its flag
    // reads false for `echo x > f` (observed): the whole text is read.
    match request["fullCommandText"].as_str() {
        Some(text) if !text.contains(['>', '<', '`', '$']) => {}
        _ => return false,
    }
    let Some(segments) = request["commandSegments"].as_array() else {
        return false;
    };
    !segments.is_empty() && segments.iter().all(segment_reads)
}

fn segment_reads(segment: &Value) -> bool {
    if segment["hasUnboundExecutableContent"] != Value::Bool(false) {
        return false;
    }
    let (Some(name), Some(text)) = (
        segment["identifier"].as_str(),
        segment["fullCommandText"].as_str(),
    ) else {
        return false;
    };
    // A redirection or substitution the host did not flag is not judged.
    if text.contains(['>', '<', '`', '$', ';', '&', '|']) {
        return false;
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.first() != Some(&name) || !READERS.contains(&name) {
        return false;
    }
    match name {
        "find" => !words.iter().any(|w| FIND_WRITERS.contains(w)),
        "git" => git_subcommand(&words[1..]).is_some_and(|sub| GIT_READERS.contains(&sub)),
        _ => true,
    }
}

/// The subcommand of `git` with `args`, past its global options (`-C
/// <dir>` takes a word); `None` when an option could make it write or run
/// something (`-c` sets any config, `core.fsmonitor` included; `--output`
/// writes a file; `--exec-path` and `--ext-diff` run programs).
fn git_subcommand<'a>(args: &[&'a str]) -> Option<&'a str> {
    let risky = [
        "-c",
        "--config-env",
        "--output",
        "--exec-path",
        "--ext-diff",
        "--textconv",
    ];
    if args.iter().any(|w| risky.iter().any(|r| w.starts_with(r))) {
        return None;
    }
    let mut words = args.iter();
    while let Some(w) = words.next() {
        match *w {
            "-C" => {
                words.next();
            }
            w if w.starts_with('-') => {}
            w => return Some(w),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shell(segments: &[&str]) -> Value {
        let segs: Vec<Value> = segments
            .iter()
            .map(|t| {
                json!({"identifier": t.split_whitespace().next().unwrap(), "fullCommandText": t,
                       "hasUnboundExecutableContent": false})
            })
            .collect();
        json!({"kind": "shell", "hasWriteFileRedirection": false, "commandSegments": segs,
               "fullCommandText": segments.join(" | "),
               "commands": [{"identifier": segments.join(" | "), "readOnly": false}]})
    }

    #[test]
    fn reading_commands_read_and_the_rest_do_not() {
        for reads in [
            &["cat /etc/hostname"][..],
            &["ls -la /etc"],
            &["grep -r x /src", "wc -l"],
            &["git -C /r status"],
            &["git log --oneline"],
            &["find / -name x"],
        ] {
            assert!(only_reads(&shell(reads)), "{reads:?}");
        }
        for writes in [
            &["rm -rf /"][..],
            &["echo x > f"],
            &["git push"],
            &["git -c core.fsmonitor=x status"],
            &["git diff --output=f"],
            &["sort -o f a"],
            &["uniq a b"],
            &["git -C /r commit -m x"],
            &["find / -delete"],
            &["find . -exec rm {} ;"],
            &["cat $(whoami)"],
            &["python3 -c 1"],
            &[],
        ] {
            assert!(!only_reads(&shell(writes)), "{writes:?}");
        }
        let mut redirected = shell(&["cat a"]);
        redirected["hasWriteFileRedirection"] = json!(true);
        assert!(!only_reads(&redirected));
        // As the host sends `echo x > f`: the segment without the
        // redirection, the flag false.
        let mut unflagged = shell(&["echo x"]);
        unflagged["fullCommandText"] = json!("echo x > f");
        assert!(!only_reads(&unflagged));
        let mut unbound = shell(&["cat a"]);
        unbound["commandSegments"][0]["hasUnboundExecutableContent"] = json!(true);
        assert!(!only_reads(&unbound));
        assert!(only_reads(
            &json!({"kind": "read", "path": "/etc/hostname"})
        ));
        assert!(!only_reads(&json!({"kind": "write", "fileName": "/x"})));
        assert!(!only_reads(&json!({"kind": "url", "url": "http://x"})));
    }
}
