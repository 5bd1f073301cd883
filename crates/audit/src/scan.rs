//! Reopening a log: where the last whole record ends, what follows it, and
//! the state the writer continues from. Lenient on purpose: it finds the head,
//! `verify` judges the file.

use crate::audit_error::AuditError;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::Value;

use super::record::Kind;
use super::{record_hash, GENESIS};

/// A tail larger than this after the last record is not a torn write: the
/// bridge refuses to start rather than guess.
const MAX_JUNK: u64 = 16 * 1024 * 1024;

#[derive(Debug, Default)]
pub(super) struct Scanned {
    pub seq: u64,
    pub prev: String,
    pub len: u64,
    pub lines: u64,
    pub junk: Vec<u8>,
    pub cp_from: u64,
    pub cp_hashes: Vec<String>,
    pub file_first_seq: Option<u64>,
    pub file_started: Option<jiff::Timestamp>,
}

/// Whether `line` (no newline) is exactly the record due after `seq`/`prev`.
pub(super) fn is_next_record(line: &[u8], seq: u64, prev: &str) -> Option<(Value, String)> {
    let mut v: Value = serde_json::from_slice(line).ok()?;
    if v["seq"].as_u64() != Some(seq + 1) || v["prev"].as_str() != Some(prev) {
        return None;
    }
    let claimed = v.as_object_mut()?.remove("hash")?;
    let actual = record_hash(prev, &v);
    (claimed.as_str() == Some(actual.as_str())).then(|| {
        v["hash"] = Value::from(actual.clone());
        (v, actual)
    })
}

pub(super) fn scan(path: &Path) -> Result<Scanned, AuditError> {
    let mut s = Scanned {
        prev: GENESIS.to_string(),
        cp_from: 1,
        ..Default::default()
    };
    let Ok(f) = File::open(path) else {
        return Ok(s);
    };
    let mut reader = BufReader::new(f);
    let mut line = Vec::new();
    let (mut offset, mut lines) = (0u64, 0u64);
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)? as u64;
        if n == 0 {
            break;
        }
        offset += n;
        if !line.ends_with(b"\n") {
            break;
        }
        lines += 1;
        let Ok(v) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        let (Some(seq), Some(hash)) = (v["seq"].as_u64(), v["hash"].as_str()) else {
            continue;
        };
        if s.file_first_seq.is_none() {
            s.file_first_seq = Some(seq);
            s.file_started = v["time"].as_str().and_then(|t| t.parse().ok());
            s.cp_from = seq;
        }
        s.seq = seq;
        s.prev = hash.to_owned();
        s.len = offset;
        s.lines = lines;
        if Kind::of(&v) == Some(Kind::Checkpoint) {
            s.cp_from = seq + 1;
            s.cp_hashes.clear();
        } else {
            s.cp_hashes.push(hash.to_owned());
        }
    }
    let mut f = reader.into_inner();
    let end = f.seek(SeekFrom::End(0))?;
    if end - s.len > MAX_JUNK {
        return Err(AuditError::JunkTail {
            path: path.to_owned(),
            bytes: end - s.len,
        });
    }
    f.seek(SeekFrom::Start(s.len))?;
    f.take(end - s.len).read_to_end(&mut s.junk)?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_or_missing_file_starts_at_genesis() {
        let dir = tempfile::tempdir().unwrap();
        let s = scan(&dir.path().join("none")).unwrap();
        assert_eq!((s.seq, s.prev.as_str(), s.cp_from), (0, GENESIS, 1));
        std::fs::write(dir.path().join("empty"), "").unwrap();
        assert!(scan(&dir.path().join("empty")).unwrap().junk.is_empty());
    }

    #[test]
    fn the_tail_after_the_last_whole_record_is_junk() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a");
        let mut r = serde_json::json!({"seq": 1, "prev": GENESIS});
        let h = record_hash(GENESIS, &r);
        r["hash"] = h.clone().into();
        std::fs::write(&p, format!("{r}\n{{\"seq\":2,\"x")).unwrap();
        let s = scan(&p).unwrap();
        assert_eq!((s.seq, s.prev.as_str(), s.lines), (1, h.as_str(), 1));
        assert_eq!(s.junk, b"{\"seq\":2,\"x");
        assert_eq!(s.cp_hashes, vec![h]);
    }
}
