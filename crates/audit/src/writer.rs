//! One audit file being written: whole lines or nothing. A write that fails
//! part-way (ENOSPC, EFBIG) is cut back to the last whole record; if even that
//! fails, the bytes left are remembered as junk, and the next record starts on
//! a fresh line after a `recovered` record that accounts for them.

use crate::audit_error::AuditError;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;
use tracing::error;

use super::record::{now_rfc3339, Kind, RecoveredRecord, RotationRecord};
use super::scan::{is_next_record, Scanned};
use super::sha256_hex;

/// The owner of the hash chain's head (`seq`, `prev`) and of the file it is
/// written to: every change goes through its methods, under `AuditLog`'s lock.
pub(super) struct Writer {
    file: File,
    path: PathBuf,
    /// The last record written (in this file or an earlier one of the series).
    seq: u64,
    prev: String,
    /// Bytes of the file up to the end of the last whole record.
    len: u64,
    /// Lines in those bytes.
    lines: u64,
    /// What the file holds after `len` that is no record: a torn write that
    /// could not be cut back, or a crash's torn tail found at open.
    junk: Vec<u8>,
    junk_reason: &'static str,
    /// Records that could not be written since the last one that was.
    lost: u64,
    /// The first record no checkpoint covers yet, and the hashes since it.
    cp_from: u64,
    cp_hashes: Vec<String>,
    /// The first record of this file, and when it was written (for `max_age`).
    file_first_seq: Option<u64>,
    file_started: Option<jiff::Timestamp>,
    /// A rotation record not yet written: it must be the new file's first.
    pending_link: Option<RotationRecord>,
}

impl Writer {
    /// The writer of the file at `path`, as `scan` found it. A last record
    /// cut exactly before its newline is still whole: its line is ended.
    pub(crate) fn open(path: &Path, s: Scanned) -> Result<Self, AuditError> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| AuditError::Open {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
        let mut w = Writer {
            file,
            path: path.to_owned(),
            seq: s.seq,
            prev: s.prev,
            len: s.len,
            lines: s.lines,
            junk: s.junk,
            junk_reason: "a torn tail found at open (a crash mid-write?)",
            lost: 0,
            cp_from: s.cp_from,
            cp_hashes: s.cp_hashes,
            file_first_seq: s.file_first_seq,
            file_started: s.file_started,
            pending_link: None,
        };
        if !w.junk.contains(&b'\n') {
            if let Some((v, hash)) = is_next_record(&w.junk, w.seq, &w.prev) {
                w.file.write_all(b"\n")?;
                w.len += w.junk.len() as u64 + 1;
                w.lines += 1;
                w.junk.clear();
                w.advance(&v, &hash, Kind::of(&v) == Some(Kind::Checkpoint));
            }
        }
        Ok(w)
    }

    /// The chain's head: the last record's `seq` and hash.
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    pub(crate) fn prev(&self) -> &str {
        &self.prev
    }

    /// The torn bytes found at open, if any.
    pub(crate) fn torn(&self) -> Option<usize> {
        (!self.junk.is_empty()).then_some(self.junk.len())
    }

    /// Records lost since the last one written.
    pub(crate) fn lost(&self) -> u64 {
        self.lost
    }

    /// One more record could not be written; returns how many now.
    pub(crate) fn count_lost(&mut self) -> u64 {
        self.lost += 1;
        self.lost
    }

    /// The `recovered` record was written: the loss is accounted for.
    pub(crate) fn recovered(&mut self) {
        self.lost = 0;
    }

    /// Records written since the last checkpoint.
    pub(crate) fn uncheckpointed(&self) -> u64 {
        self.cp_hashes.len() as u64
    }

    /// The first record no checkpoint covers, and the hashes since.
    pub(crate) fn since_checkpoint(&self) -> (u64, &[String]) {
        (self.cp_from, &self.cp_hashes)
    }

    /// The rotation record the new file must start with, not yet written.
    pub(crate) fn pending_link(&self) -> Option<&RotationRecord> {
        self.pending_link.as_ref()
    }

    pub(crate) fn link_written(&mut self) {
        self.pending_link = None;
    }

    /// The current file's size in whole records, its first record, and when
    /// that was written (what rotation is decided on).
    pub(crate) fn file_len(&self) -> u64 {
        self.len
    }

    pub(crate) fn file_first_seq(&self) -> Option<u64> {
        self.file_first_seq
    }

    pub(crate) fn file_started(&self) -> Option<jiff::Timestamp> {
        self.file_started
    }

    pub(crate) fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// A handle of the file's own, to sync outside the lock.
    pub(crate) fn file_handle(&self) -> io::Result<File> {
        self.file.try_clone()
    }

    /// What a write that failed part-way, and a failed cut back, leave:
    /// `bytes` in the file past the last record, and `lost` records.
    #[cfg(test)]
    pub(crate) fn leave_torn_for_test(&mut self, bytes: &[u8], lost: u64) {
        self.file.write_all(bytes).unwrap();
        self.junk = bytes.to_vec();
        self.junk_reason = "a write failed part-way and could not be cut back";
        self.lost = lost;
    }

    /// Every write fails (a read-only handle) until called with `false`.
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn fail_writes_for_test(&mut self, fail: bool) {
        let mut o = OpenOptions::new();
        if fail {
            o.read(true);
        } else {
            o.append(true);
        }
        self.file = o.open(&self.path).unwrap();
    }

    /// The log goes on in `file`, a new one, which must start with `link`.
    pub(crate) fn rotated(&mut self, file: File, link: RotationRecord) {
        self.file = file;
        self.len = 0;
        self.lines = 0;
        self.file_first_seq = None;
        self.file_started = None;
        self.pending_link = Some(link);
    }

    /// Whether a `recovered` record is due before the next record.
    pub(crate) fn needs_recovery(&self) -> bool {
        !self.junk.is_empty() || self.lost > 0
    }

    /// The bytes a `recovered` record accounts for: the junk, ended by the
    /// newline that starts the record on a line of its own.
    fn region(&self) -> Vec<u8> {
        let mut r = self.junk.clone();
        if !r.is_empty() && !r.ends_with(b"\n") {
            r.push(b'\n');
        }
        r
    }

    /// The `recovered` record due now.
    pub(crate) fn recovered_record(&self) -> RecoveredRecord {
        let region = self.region();
        let reason = if self.junk.is_empty() {
            "records could not be written (see lostRecords)"
        } else {
            self.junk_reason
        };
        RecoveredRecord {
            time: now_rfc3339(),
            reason: reason.into(),
            cut_offset: self.len,
            cut_line: self.lines + 1,
            cut_bytes: region.len() as u64,
            cut_sha256: sha256_hex(&region),
            lost_records: self.lost,
        }
    }

    /// Writes one record line (after the junk region, if any); on success the
    /// junk is part of the file's accounted bytes.
    pub(crate) fn write_line(&mut self, line: &str) -> io::Result<()> {
        let mut buf = Vec::with_capacity(line.len() + 2);
        if !self.junk.is_empty() && !self.junk.ends_with(b"\n") {
            buf.push(b'\n');
        }
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        let mut n = 0;
        let result = loop {
            if n == buf.len() {
                break Ok(());
            }
            match self.file.write(&buf[n..]) {
                Ok(0) => break Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        match result {
            Ok(()) => {
                let newlines = |b: &[u8]| b.iter().filter(|c| **c == b'\n').count() as u64;
                self.lines += newlines(&self.junk) + newlines(&buf);
                self.len += (self.junk.len() + buf.len()) as u64;
                self.junk.clear();
                Ok(())
            }
            Err(e) => {
                if n > 0 {
                    self.roll_back(&buf[..n]);
                }
                Err(e)
            }
        }
    }

    /// Cuts the file back to its last whole record (and known junk); when
    /// that fails too, the partial bytes join the junk.
    fn roll_back(&mut self, partial: &[u8]) {
        let keep = self.len + self.junk.len() as u64;
        if let Err(e) = self.file.set_len(keep) {
            error!(path = %self.path.display(), bytes = partial.len(), "audit write failed part-way and could not be cut back ({e}); the next record accounts for the bytes");
            self.junk.extend_from_slice(partial);
            self.junk_reason = "a write failed part-way and could not be cut back";
        }
    }

    /// Book-keeping after a record is written.
    pub(crate) fn advance(&mut self, record: &Value, hash: &str, is_checkpoint: bool) {
        self.seq = record["seq"].as_u64().unwrap_or(self.seq + 1);
        self.prev = hash.to_owned();
        if is_checkpoint {
            self.cp_from = self.seq + 1;
            self.cp_hashes.clear();
        } else {
            self.cp_hashes.push(hash.to_owned());
        }
        if self.file_first_seq.is_none() {
            self.file_first_seq = Some(self.seq);
            self.file_started = Some(jiff::Timestamp::now());
        }
    }
}
