//! `audit verify`: walks the chain and names the first record that breaks it.

use std::path::Path;

use serde_json::Value;

use super::{record_hash, GENESIS};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("record {seq} (line {line}): {reason}")]
pub struct Broken {
    /// The sequence number the broken record has, or should have had.
    pub seq: u64,
    pub line: usize,
    pub reason: String,
}

/// A chain that holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub records: u64,
    /// Lines torn by a crash mid-write that never entered the chain: the next
    /// whole record links to the one before them. Kept in the file, reported.
    pub torn_lines: Vec<usize>,
}

/// Verifies a whole log text.
pub fn verify_text(text: &str) -> Result<Verified, Broken> {
    let (mut prev, mut count) = (GENESIS.to_string(), 0u64);
    let mut torn_lines = Vec::new();
    // A torn line is forgiven only if the next whole record skips it.
    let mut torn_before: Option<usize> = None;
    for (i, raw) in text.split_inclusive('\n').enumerate() {
        let expected = count + 1;
        let broken = |reason: &str| Broken {
            seq: expected,
            line: i + 1,
            reason: reason.to_string(),
        };
        if !raw.ends_with('\n') {
            return Err(broken("last line is cut (no newline): truncated"));
        }
        let line = raw.trim_end_matches(['\n', '\r']);
        if line.is_empty() {
            continue;
        }
        let Ok(mut v) = serde_json::from_str::<Value>(line) else {
            torn_before = Some(i + 1);
            continue;
        };
        let seq = v["seq"].as_u64();
        let after_torn = |reason: String| match torn_before {
            Some(t) => {
                format!("{reason} (after line {t}, which is not a whole record: torn or altered)")
            }
            None => reason,
        };
        if seq != Some(expected) {
            return Err(Broken {
                seq: seq.unwrap_or(expected),
                line: i + 1,
                reason: after_torn(format!("sequence number {} where {expected} was due: a record was removed or reordered", seq.map_or("missing".into(), |s| s.to_string()))),
            });
        }
        if v["prev"].as_str() != Some(prev.as_str()) {
            return Err(broken(&after_torn(
                "prev does not match the previous record's hash: removed or reordered".into(),
            )));
        }
        let Some(claimed) = v.as_object_mut().and_then(|o| o.remove("hash")) else {
            return Err(broken("no hash"));
        };
        let actual = record_hash(&prev, &v);
        if claimed.as_str() != Some(actual.as_str()) {
            return Err(broken(
                "hash does not match the content: the record was altered",
            ));
        }
        torn_lines.extend(torn_before.take());
        prev = actual;
        count = expected;
    }
    if let Some(t) = torn_before {
        return Err(Broken {
            seq: count + 1,
            line: t,
            reason: "the last record is not whole: truncated or altered".into(),
        });
    }
    Ok(Verified {
        records: count,
        torn_lines,
    })
}

pub fn verify_file(path: &Path) -> anyhow::Result<Verified> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    Ok(verify_text(&text)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::log::AuditLog;
    use crate::config::FsyncPolicy;
    use serde_json::json;

    fn sample() -> String {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.jsonl");
        let (log, _) = AuditLog::open(&p, FsyncPolicy::Never).unwrap();
        for i in 0..4 {
            log.append(&json!({"n": i, "text": "abc"})).unwrap();
        }
        drop(log);
        std::fs::read_to_string(&p).unwrap()
    }

    #[test]
    fn intact_chain_verifies() {
        assert_eq!(verify_text(&sample()).unwrap().records, 4);
    }

    #[test]
    fn tampering_is_caught_at_the_right_record() {
        let good = sample();
        let lines: Vec<&str> = good.lines().collect();
        let join = |v: Vec<&str>| v.iter().map(|l| format!("{l}\n")).collect::<String>();
        // One byte changed in record 2.
        let altered = good.replacen("\"n\":1", "\"n\":7", 1);
        assert_eq!(verify_text(&altered).unwrap_err().seq, 2);
        // Record 3 removed.
        let removed = join(vec![lines[0], lines[1], lines[3]]);
        let e = verify_text(&removed).unwrap_err();
        assert_eq!(e.seq, 4);
        assert!(e.reason.contains("removed or reordered"));
        // Records 2 and 3 swapped.
        let swapped = join(vec![lines[0], lines[2], lines[1], lines[3]]);
        assert_eq!(verify_text(&swapped).unwrap_err().seq, 3);
        // Last line cut.
        let cut = &good[..good.len() - 10];
        let e = verify_text(cut).unwrap_err();
        assert_eq!(e.seq, 4);
        assert!(e.reason.contains("cut"));
    }

    #[test]
    fn a_line_torn_by_a_crash_is_skipped_only_if_the_chain_skips_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.jsonl");
        let (log, _) = AuditLog::open(&p, FsyncPolicy::Never).unwrap();
        log.append(&json!({"n": 0})).unwrap();
        drop(log);
        // A crash in the middle of writing record 2.
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        std::io::Write::write_all(&mut f, b"{\"n\":1,\"se").unwrap();
        drop(f);
        assert!(verify_text(&std::fs::read_to_string(&p).unwrap()).is_err());
        // Reopened: the torn line stays, the chain continues after it.
        let (log, rec) = AuditLog::open(&p, FsyncPolicy::Never).unwrap();
        assert_eq!(rec.records, 1);
        assert!(rec.torn_bytes.is_some());
        log.append(&json!({"n": 1})).unwrap();
        drop(log);
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains("{\"n\":1,\"se\n"), "kept as is: {text}");
        let ok = verify_text(&text).unwrap();
        assert_eq!((ok.records, ok.torn_lines), (2, vec![2]));
        // A whole record garbled in the middle is not a torn line: the chain breaks.
        let good = sample();
        let lines: Vec<&str> = good.lines().collect();
        let garbled = format!("{}\n{}\n{{garbage\n{}\n", lines[0], lines[1], lines[3]);
        let e = verify_text(&garbled).unwrap_err();
        assert_eq!(e.seq, 4);
        assert!(e.reason.contains("torn or altered"), "{}", e.reason);
    }
}
