//! The audit log's records, as written, into the host's `x-audit://log`
//! channel (and on to the syslog shipper, when there is one). The log calls
//! [`Ship::ship`] under its lock and must not be held up, so a record is
//! handed over a channel to a task that publishes it, in order.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::{Arc, Weak};

use serde_json::Value;
use tokio::sync::mpsc;

use crate::ahp::Host;
use crate::ahp::WrittenRecord;
use crate::audit::Ship;
use crate::audit::Shipper;

/// Every written record to the channel and to `shipper`.
pub(crate) struct AuditChannel {
    records: mpsc::UnboundedSender<WrittenRecord>,
    shipper: Option<Arc<Shipper>>,
}

impl AuditChannel {
    /// Starts the publishing task on the current runtime; it ends when the
    /// log (and so this) is dropped, or the host is gone.
    pub(crate) fn start(host: Weak<Host>, shipper: Option<Arc<Shipper>>) -> Arc<Self> {
        let (records, mut rx) = mpsc::unbounded_channel::<WrittenRecord>();
        let gap_of = shipper.clone();
        tokio::spawn(async move {
            while let Some(record) = rx.recv().await {
                let Some(host) = host.upgrade() else { return };
                let gap = gap_of.as_ref().map_or(0, |s| s.stats().1);
                host.publish_audit_record(record, gap);
            }
        });
        Arc::new(Self { records, shipper })
    }
}

/// How much of the log's end is read at startup for the channel's tail.
const TAIL_BYTES: u64 = 2 * 1024 * 1024;

/// The records at the end of the log file at `path` (its last
/// [`TAIL_BYTES`] at most, whole lines only), oldest first: what the
/// channel shows before this run writes anything. Unreadable: none.
pub(crate) fn tail_of(path: &Path) -> Vec<WrittenRecord> {
    let read = || -> std::io::Result<String> {
        let mut f = std::fs::File::open(path)?;
        let len = f.metadata()?.len();
        f.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES)))?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf)?;
        Ok(String::from_utf8_lossy(&buf).into_owned())
    };
    let text = read().unwrap_or_default();
    let whole = text.len() as u64 >= TAIL_BYTES;
    text.lines()
        // Cut into the middle of the file: the first line is a part.
        .skip(usize::from(whole))
        .filter_map(WrittenRecord::parse)
        .collect()
}

impl Ship for AuditChannel {
    fn ship(&self, record: &Value, line: &str) {
        if let Some(s) = &self.shipper {
            s.ship(record, line);
        }
        // The line as written: no tree cloned, no second serialization.
        if let Some(r) = WrittenRecord::new(record, line) {
            let _ = self.records.send(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_whole_records_from_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        assert!(tail_of(&path).is_empty(), "no file: no tail");
        std::fs::write(&path, "{\"seq\":1}\n{\"seq\":2}\n").unwrap();
        let seqs: Vec<_> = tail_of(&path).iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [1, 2]);
        // Longer than the window: the first line read is a part, and dropped.
        let line = format!("{{\"seq\":0,\"pad\":\"{}\"}}\n", "x".repeat(1000));
        let mut big = line.repeat((TAIL_BYTES / 1000) as usize + 10);
        big.push_str("{\"seq\":9}\n");
        std::fs::write(&path, big).unwrap();
        let tail = tail_of(&path);
        assert_eq!(tail.last().unwrap().seq, 9);
        assert!(
            tail.iter().all(|r| r.line.get().starts_with("{\"seq\":")),
            "whole lines only"
        );
    }
}
