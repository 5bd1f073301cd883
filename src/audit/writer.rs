//! One audit file being written: whole lines or nothing. A write that fails
//! part-way (ENOSPC, EFBIG) is cut back to the last whole record; if even that
//! fails, the bytes left are remembered as junk, and the next record starts on
//! a fresh line after a `recovered` record that accounts for them.

use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;

use serde_json::Value;
use tracing::error;

use super::record::{now_rfc3339, RecoveredRecord, RotationRecord};
use super::sha256_hex;

pub(super) struct Writer {
    pub file: File,
    pub path: PathBuf,
    /// The last record written (in this file or an earlier one of the series).
    pub seq: u64,
    pub prev: String,
    /// Bytes of the file up to the end of the last whole record.
    pub len: u64,
    /// Lines in those bytes.
    pub lines: u64,
    /// What the file holds after `len` that is no record: a torn write that
    /// could not be cut back, or a crash's torn tail found at open.
    pub junk: Vec<u8>,
    pub junk_reason: &'static str,
    /// Records that could not be written since the last one that was.
    pub lost: u64,
    /// The first record no checkpoint covers yet, and the hashes since it.
    pub cp_from: u64,
    pub cp_hashes: Vec<String>,
    /// The first record of this file, and when it was written (for `max_age`).
    pub file_first_seq: Option<u64>,
    pub file_started: Option<jiff::Timestamp>,
    /// A rotation record not yet written: it must be the new file's first.
    pub pending_link: Option<RotationRecord>,
}

impl Writer {
    /// Whether a `recovered` record is due before the next record.
    pub fn needs_recovery(&self) -> bool {
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
    pub fn recovered_record(&self) -> RecoveredRecord {
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
    pub fn write_line(&mut self, line: &str) -> io::Result<()> {
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
    pub fn advance(&mut self, record: &Value, hash: &str, is_checkpoint: bool) {
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
