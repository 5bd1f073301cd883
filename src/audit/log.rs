//! Append-only, hash-chained JSON Lines. Each record carries its sequence
//! number, the previous record's hash and its own. Reopening continues the
//! chain from the last whole record; a torn last line is kept and reported.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tracing::{error, warn};

use super::{record_hash, GENESIS};
use crate::config::FsyncPolicy;

struct Head {
    file: File,
    seq: u64,
    prev: String,
}

pub struct AuditLog {
    path: PathBuf,
    head: Mutex<Head>,
    fsync: FsyncPolicy,
    dirty: AtomicBool,
}

/// What reopening found at the end of an existing log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    pub records: u64,
    /// Bytes of a torn last line that was left in place.
    pub torn_bytes: Option<usize>,
}

impl AuditLog {
    /// Opens (or creates) the log and finds the chain head.
    pub fn open(path: &Path, fsync: FsyncPolicy) -> anyhow::Result<(Arc<Self>, Recovery)> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let (seq, prev, torn) = scan(path)?;
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| anyhow::anyhow!("cannot open audit log {}: {e}", path.display()))?;
        if let Some(n) = torn {
            warn!(path = %path.display(), bytes = n, last_seq = seq, "audit log ends in a torn record (crash?); kept as is, chain continues after it");
            // Start the next record on a line of its own.
            file.write_all(b"\n")?;
        }
        let log = Arc::new(Self {
            path: path.to_owned(),
            head: Mutex::new(Head { file, seq, prev }),
            fsync,
            dirty: AtomicBool::new(false),
        });
        if fsync == FsyncPolicy::Batch {
            let weak = Arc::downgrade(&log);
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    loop {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        let Some(log) = weak.upgrade() else { return };
                        log.sync_if_dirty();
                    }
                });
            }
        }
        Ok((
            log,
            Recovery {
                records: seq,
                torn_bytes: torn,
            },
        ))
    }

    /// Appends one record: `seq`, `prev` and `hash` are filled in here.
    /// Returns the record as written.
    pub fn append<R: Serialize>(&self, record: &R) -> anyhow::Result<Value> {
        let mut record = serde_json::to_value(record)?;
        if !record.is_object() {
            anyhow::bail!("an audit record must be a JSON object");
        }
        let mut h = self.head.lock().unwrap_or_else(|e| e.into_inner());
        let seq = h.seq + 1;
        record["seq"] = Value::from(seq);
        record["prev"] = Value::from(h.prev.clone());
        if let Some(o) = record.as_object_mut() {
            o.remove("hash");
        }
        let hash = record_hash(&h.prev, &record);
        record["hash"] = Value::from(hash.clone());
        let mut line = record.to_string();
        line.push('\n');
        if let Err(e) = h.file.write_all(line.as_bytes()) {
            error!(path = %self.path.display(), "audit write failed: {e}");
            return Err(e.into());
        }
        h.seq = seq;
        h.prev = hash;
        match self.fsync {
            FsyncPolicy::Always => h.file.sync_data()?,
            FsyncPolicy::Batch => self.dirty.store(true, Ordering::Release),
            FsyncPolicy::Never => {}
        }
        Ok(record)
    }

    /// Makes what was written durable now (a shutdown calls it).
    pub fn sync_if_dirty(&self) {
        if self.dirty.swap(false, Ordering::AcqRel) {
            let h = self.head.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(e) = h.file.sync_data() {
                error!(path = %self.path.display(), "audit fsync failed: {e}");
            }
        }
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        if self.fsync != FsyncPolicy::Never {
            if let Ok(h) = self.head.lock() {
                let _ = h.file.sync_data();
            }
        }
    }
}

/// Finds the last whole record: (its seq, its hash, bytes of a torn tail).
fn scan(path: &Path) -> anyhow::Result<(u64, String, Option<usize>)> {
    let Ok(f) = File::open(path) else {
        return Ok((0, GENESIS.to_string(), None));
    };
    let mut reader = BufReader::new(f);
    let (mut seq, mut prev, mut torn) = (0, GENESIS.to_string(), None);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)?;
        if n == 0 {
            break;
        }
        let whole = line.ends_with(b"\n");
        let parsed = serde_json::from_slice::<Value>(&line).ok();
        match parsed {
            Some(v) if whole => {
                if let (Some(s), Some(h)) = (v["seq"].as_u64(), v["hash"].as_str()) {
                    seq = s;
                    prev = h.to_string();
                }
                torn = None;
            }
            _ if line.iter().all(u8::is_ascii_whitespace) => {}
            _ => torn = Some(n),
        }
    }
    Ok((seq, prev, torn))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn chain_continues_after_reopen_and_torn_tail_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.jsonl");
        {
            let (log, rec) = AuditLog::open(&p, FsyncPolicy::Always).unwrap();
            assert_eq!(rec.records, 0);
            log.append(&json!({"x": 1})).unwrap();
            log.append(&json!({"x": 2})).unwrap();
        }
        // A crash mid-write leaves half a line.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .unwrap()
            .write_all(b"{\"seq\":3,\"x\"")
            .unwrap();
        let (log, rec) = AuditLog::open(&p, FsyncPolicy::Never).unwrap();
        assert_eq!(
            rec,
            Recovery {
                records: 2,
                torn_bytes: Some(12)
            }
        );
        let r = log.append(&json!({"x": 3})).unwrap();
        assert_eq!(r["seq"], 3);
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains("{\"seq\":3,\"x\"\n"), "torn line kept");
        let lines: Vec<&str> = text.lines().collect();
        let second: Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(r["prev"], second["hash"]);
    }
}
