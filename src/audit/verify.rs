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

/// Verifies a whole log text; returns the number of records.
pub fn verify_text(text: &str) -> Result<u64, Broken> {
    let (mut prev, mut count) = (GENESIS.to_string(), 0u64);
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
            return Err(broken("not a whole JSON record (torn or altered)"));
        };
        let seq = v["seq"].as_u64();
        if seq != Some(expected) {
            return Err(Broken {
                seq: seq.unwrap_or(expected),
                line: i + 1,
                reason: format!("sequence number {} where {expected} was due: a record was removed or reordered", seq.map_or("missing".into(), |s| s.to_string())),
            });
        }
        if v["prev"].as_str() != Some(prev.as_str()) {
            return Err(broken(
                "prev does not match the previous record's hash: removed or reordered",
            ));
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
        prev = actual;
        count = expected;
    }
    Ok(count)
}

pub fn verify_file(path: &Path) -> anyhow::Result<u64> {
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
            log.append(json!({"n": i, "text": "abc"})).unwrap();
        }
        drop(log);
        std::fs::read_to_string(&p).unwrap()
    }

    #[test]
    fn intact_chain_verifies() {
        assert_eq!(verify_text(&sample()), Ok(4));
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
}
