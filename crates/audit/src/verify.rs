//! `audit verify`: walks the chain of one file or a rotated series and names
//! the first record that breaks it. Without a key it checks the hash chain
//! and that every byte that is no record is accounted for by a `recovered`
//! record; with the operator's public key also every checkpoint's signature
//! and that each record is the one its checkpoint signed. What lies after the
//! last checkpoint, and a cut tail, need outside evidence: see [`super::against`].

use crate::audit_error::AuditError;
use std::collections::VecDeque;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

use ed25519_dalek::VerifyingKey;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::against::{Evidence, Shipped};
use super::checkpoint::{key_id, signature_holds, HASH_PREFIX};
use super::record::{CheckpointRecord, Kind, RecoveredRecord, RotationRecord};
use super::verdict::Broken;
pub use super::verdict::Verified;
use super::{record_hash, GENESIS};

/// A line longer than this is not parsed (no record is this large): it is
/// junk, hashed as it streams by. Files are read line by line, so memory
/// stays bounded whatever their size.
#[cfg(not(test))]
const MAX_LINE: u64 = 64 << 20;
#[cfg(test)]
const MAX_LINE: u64 = 64 << 10;
/// Hash prefixes kept since the last checkpoint (the bridge writes one at
/// least every `checkpoint_every` <= 100 000 records).
const WINDOW: usize = 1_000_000;

/// What to check besides the chain.
#[derive(Debug, Clone, Default)]
pub struct Check {
    pub key: Option<VerifyingKey>,
    /// `--expect-head SEQ:HASH`: the log must reach this record, unchanged.
    pub expect_head: Option<(u64, String)>,
    /// `--against FILE`: the records a syslog daemon received (JSON Lines).
    pub against: Option<PathBuf>,
    /// `--instance NAME`: only the records of this bridge in `against` (a
    /// collector's file holds a fleet's, interleaved).
    pub instance: Option<String>,
}

struct ChainWalk<'a> {
    key: Option<&'a VerifyingKey>,
    prev: String,
    cp_from: u64,
    /// (seq, the first 64 bits of its hash) since `cp_from`, with a key.
    window: VecDeque<(u64, u64)>,
    last_checkpoint: Option<u64>,
    pub(super) evidence: Evidence,
    out: Verified,
}

/// Bytes that are no record, from `start` (line `line`) on, hashed as read.
struct Junk {
    start: u64,
    line: usize,
    bytes: u64,
    sha: Sha256,
}

impl Junk {
    /// Junk that starts at byte `start`, line `line`; nothing counted yet.
    fn at(start: u64, line: usize) -> Self {
        Self {
            start,
            line,
            bytes: 0,
            sha: Sha256::new(),
        }
    }
}

fn prefix64(hex_hash: &str) -> Option<u64> {
    u64::from_str_radix(hex_hash.get(..HASH_PREFIX)?, 16).ok()
}

/// Verifies one log text, no key, no outside evidence.
pub fn verify_text(text: &str) -> Result<Verified, Broken> {
    let mut w = ChainWalk::new(None, Evidence::default());
    w.file("", text.as_bytes())?;
    w.finish()
}

/// Verifies one file, no key, no outside evidence.
pub fn verify_file(path: &Path) -> Result<Verified, AuditError> {
    Ok(verify_files(&[path.to_owned()], &Check::default())??)
}

/// Verifies a series of files, in the order given, with `check`. The outer
/// error is a file that cannot be read.
pub fn verify_files(
    files: &[PathBuf],
    check: &Check,
) -> Result<Result<Verified, Broken>, AuditError> {
    let shipped = check
        .against
        .as_deref()
        .map(|p| Shipped::load(p, check.instance.as_deref()))
        .transpose()?;
    let evidence = Evidence::new(check.expect_head.clone(), shipped);
    let mut w = ChainWalk::new(check.key.as_ref(), evidence);
    for f in files {
        let file = std::fs::File::open(f).map_err(|e| AuditError::read(f, e))?;
        let name = super::rotation::file_name(f);
        match w.file(&name, std::io::BufReader::new(file)) {
            Ok(()) => {}
            Err(b) if b.line == 0 => return Err(AuditError::read(f, b.reason)),
            Err(b) => return Ok(Err(b)),
        }
    }
    let evidence = std::mem::take(&mut w.evidence);
    Ok(w.finish().and_then(|v| evidence.judge(v)))
}

impl<'a> ChainWalk<'a> {
    fn new(key: Option<&'a VerifyingKey>, evidence: Evidence) -> Self {
        Self {
            key,
            prev: GENESIS.to_string(),
            cp_from: 1,
            window: VecDeque::new(),
            last_checkpoint: None,
            evidence,
            out: Verified::default(),
        }
    }

    fn last(&self) -> u64 {
        self.out.last_seq
    }

    /// The first 64 bits of record `seq`'s hash, if it is in the window.
    fn prefix_of(&self, seq: u64) -> Option<u64> {
        let first = self.window.front()?.0;
        let i = seq.checked_sub(first)?;
        self.window.get(i as usize).map(|(_, h)| *h)
    }

    /// The next line (into `buf`, at most `MAX_LINE` bytes): its length and
    /// whether it ends in a newline; a longer line is streamed into `junk`
    /// and comes back as None.
    fn read_line(
        r: &mut impl BufRead,
        buf: &mut Vec<u8>,
        junk: &mut Option<Junk>,
        at: (u64, usize),
    ) -> std::io::Result<(u64, bool, bool)> {
        buf.clear();
        let n = r.by_ref().take(MAX_LINE).read_until(b'\n', buf)? as u64;
        if buf.ends_with(b"\n") || n < MAX_LINE {
            return Ok((n, buf.ends_with(b"\n"), false));
        }
        let j = junk.get_or_insert_with(|| Junk::at(at.0, at.1));
        let mut total = n;
        j.sha.update(&buf[..]);
        loop {
            buf.clear();
            let k = r.by_ref().take(MAX_LINE).read_until(b'\n', buf)? as u64;
            j.sha.update(&buf[..]);
            total += k;
            if k == 0 || buf.ends_with(b"\n") {
                j.bytes += total;
                return Ok((total, k > 0, true));
            }
        }
    }

    /// Walks one file. A read error comes back with line 0.
    fn file(&mut self, name: &str, mut r: impl BufRead) -> Result<(), Broken> {
        let (mut offset, mut lines) = (0u64, 0usize);
        // Bytes that are no record, since the last record.
        let mut junk: Option<Junk> = None;
        let mut first_in_file = true;
        let mut buf = Vec::new();
        let brk = |seq: u64, line: usize, reason: String| Broken {
            seq,
            file: name.to_owned(),
            line,
            reason,
        };
        loop {
            let (line_no, start) = (lines + 1, offset);
            let (n, whole, oversize) =
                Self::read_line(&mut r, &mut buf, &mut junk, (start, line_no))
                    .map_err(|e| brk(self.last() + 1, 0, e.to_string()))?;
            if n == 0 {
                break;
            }
            (offset, lines) = (offset + n, line_no);
            if !whole {
                return Err(brk(self.last() + 1, line_no, "the last line is cut (no newline): the file was truncated, or a crash tore the last write and the bridge has not reopened the log since".into()));
            }
            if oversize {
                continue;
            }
            let parsed = serde_json::from_slice::<Value>(&buf[..buf.len() - 1])
                .ok()
                .filter(|v| v["seq"].as_u64().is_some());
            let Some(v) = parsed else {
                let j = junk.get_or_insert_with(|| Junk::at(start, line_no));
                j.sha.update(&buf[..]);
                j.bytes += n;
                continue;
            };
            let first = std::mem::replace(&mut first_in_file, false);
            self.record(v, junk.take(), first, name, line_no)
                .map_err(|(seq, line, reason)| brk(seq, line, reason))?;
        }
        if let Some(Junk { line, .. }) = junk {
            return Err(brk(self.last() + 1, line, format!("line {line} and on are no records, and no recovered record accounts for them: junk appended, or a torn write")));
        }
        self.out.last_file = name.to_owned();
        self.out.last_line = lines;
        Ok(())
    }

    /// One record, on line `line_no` of file `name`: the bytes before it
    /// accounted for, the start of a file, its place and hash in the chain,
    /// then counted. Errors: (the seq due, the line, why).
    fn record(
        &mut self,
        mut v: Value,
        junk: Option<Junk>,
        first_in_file: bool,
        name: &str,
        line_no: usize,
    ) -> Result<(), (u64, usize, String)> {
        let expected = self.last() + 1;
        let at = |reason: String| (expected, line_no, reason);
        let kind = Kind::of(&v).ok_or_else(|| at(format!("unknown kind {}", v["kind"])))?;
        self.account_for_junk(&v, kind, junk, line_no)
            .map_err(|(line, reason)| (expected, line, reason))?;
        if first_in_file {
            self.start_of_file(&v, kind, name)
                .map_err(|b| at(b.to_string()))?;
        } else if kind == Kind::Rotation {
            return Err(at("a rotation record is only ever the first of a file: records were moved between files".into()));
        }
        // A series walked from its middle starts its count where the file does.
        let expected = self.last() + 1;
        let seq = v["seq"].as_u64().unwrap_or_default();
        let hash = self
            .link(&mut v, seq, expected)
            .map_err(|reason| (expected, line_no, reason.to_string()))?;
        self.accept(&v, seq, kind, hash)
            .map_err(|(seq, reason)| (seq, line_no, reason))
    }

    /// Whether record `seq` (its `hash` taken out of `v`) is the one due
    /// and links to the one before: its hash, recomputed.
    fn link(&self, v: &mut Value, seq: u64, expected: u64) -> Result<String, ChainBreak> {
        if seq != expected {
            return Err(if seq > expected {
                ChainBreak::Missing {
                    expected,
                    found: seq,
                }
            } else {
                ChainBreak::Repeated {
                    expected,
                    found: seq,
                }
            });
        }
        if v["prev"].as_str() != Some(self.prev.as_str()) {
            return Err(ChainBreak::PrevMismatch);
        }
        let claimed = v
            .as_object_mut()
            .and_then(|o| o.remove("hash"))
            .ok_or(ChainBreak::NoHash)?;
        let actual = record_hash(&self.prev, v);
        if claimed.as_str() != Some(actual.as_str()) {
            return Err(ChainBreak::Altered);
        }
        Ok(actual)
    }

    /// Counts a record that holds, and checks a checkpoint against the
    /// records it signs (or keeps the record's hash for the next one).
    fn accept(
        &mut self,
        v: &Value,
        seq: u64,
        kind: Kind,
        hash: String,
    ) -> Result<(), (u64, String)> {
        if self.out.records == 0 {
            self.out.first_seq = seq;
        }
        self.evidence.record(seq, &hash);
        self.out.records += 1;
        self.out.last_seq = seq;
        self.out.head = hash.clone();
        if kind == Kind::Checkpoint {
            self.checkpoint(v, seq)?;
        } else if self.key.is_some() {
            if self.window.len() == WINDOW {
                self.window.pop_front();
            }
            self.window
                .push_back((seq, prefix64(&hash).unwrap_or_default()));
        }
        self.prev = hash;
        Ok(())
    }

    /// Bytes that are no record pass only when the next record is a
    /// `recovered` one that states exactly them. Errors: (line, reason).
    fn account_for_junk(
        &mut self,
        v: &Value,
        kind: Kind,
        junk: Option<Junk>,
        line_no: usize,
    ) -> Result<(), (usize, String)> {
        let recovered = || {
            serde_json::from_value::<RecoveredRecord>(v.clone())
                .map_err(|e| (line_no, format!("malformed recovered record: {e}")))
        };
        match junk {
            Some(Junk {
                start,
                line,
                bytes,
                sha,
            }) => {
                if kind != Kind::Recovered {
                    return Err((line, format!("line {line} is no record, and no recovered record accounts for it: junk inserted, or a torn write")));
                }
                let r = recovered()?;
                if r.cut_offset != start
                    || r.cut_bytes != bytes
                    || r.cut_sha256 != hex::encode(sha.finalize())
                {
                    return Err((line, format!("lines {line} to {} are no records, and the recovered record after them does not account for them (it states {} bytes at offset {}; there are {bytes} at {start})", line_no - 1, r.cut_bytes, r.cut_offset)));
                }
                self.out.notes.push(format!(
                    "line {line}: {} bytes that are no record, accounted for by the recovered record on line {line_no} ({}; {} records not written)",
                    r.cut_bytes, r.reason, r.lost_records
                ));
            }
            None if kind == Kind::Recovered => {
                let r = recovered()?;
                if r.cut_bytes != 0 {
                    return Err((line_no, format!("the recovered record states {} cut bytes that are not there: the bytes it accounted for were removed", r.cut_bytes)));
                }
                self.out.notes.push(format!(
                    "line {line_no}: {} records could not be written before it ({})",
                    r.lost_records, r.reason
                ));
            }
            None => {}
        }
        Ok(())
    }

    /// The first record of a file: a later file of a series must begin with
    /// the rotation record naming the file before it; a lone rotated file is
    /// walked from where it starts.
    fn start_of_file(&mut self, v: &Value, kind: Kind, name: &str) -> Result<(), ChainBreak> {
        let seq = v["seq"].as_u64().unwrap_or_default();
        let link = || {
            serde_json::from_value::<RotationRecord>(v.clone())
                .map_err(ChainBreak::MalformedRotation)
        };
        if self.out.records > 0 {
            if kind != Kind::Rotation {
                return Err(ChainBreak::NoRotation(name.to_owned()));
            }
            let l = link()?;
            if l.previous_file != self.out.last_file {
                return Err(ChainBreak::WrongPredecessor {
                    name: name.to_owned(),
                    follows: l.previous_file,
                    walked: self.out.last_file.clone(),
                });
            }
        } else if seq != 1 && kind == Kind::Rotation {
            let l = link()?;
            self.out.last_seq = seq - 1;
            self.prev = v["prev"].as_str().unwrap_or_default().to_owned();
            self.cp_from = seq;
            self.out.notes.push(format!("{name} continues {} from record {}: verify the whole series (its directory) to check what came before", l.previous_file, seq - 1));
        }
        Ok(())
    }

    /// A checkpoint, with a key: signed by it, and listing exactly the
    /// records since the previous one. Errors: (first bad seq, reason).
    fn checkpoint(&mut self, v: &Value, seq: u64) -> Result<(), (u64, String)> {
        let Some(key) = self.key else {
            self.out.unchecked_checkpoints += 1;
            return Ok(());
        };
        let cp: CheckpointRecord = serde_json::from_value(v.clone())
            .map_err(|e| (seq, format!("malformed checkpoint: {e}")))?;
        if cp.key_id != key_id(key) {
            return Err((
                seq,
                format!(
                    "checkpoint signed by key {}, not by the given key {}",
                    cp.key_id,
                    key_id(key)
                ),
            ));
        }
        // The first record that differs from what the checkpoint lists.
        let mut first_bad = None;
        for (i, listed) in cp.hashes.iter().enumerate() {
            let s = cp.from_seq + i as u64;
            let ours = self.prefix_of(s).filter(|_| s < seq);
            if ours.is_none() || ours != prefix64(listed).filter(|_| listed.len() == HASH_PREFIX) {
                first_bad = Some(s);
                break;
            }
        }
        let covered_to = cp.from_seq + cp.hashes.len() as u64;
        if first_bad.is_none() && covered_to != seq {
            first_bad = Some(covered_to.min(seq));
        }
        if cp.from_seq > self.cp_from {
            // The checkpoint before this one stood at `from_seq - 1`.
            let gap = cp.from_seq - 1;
            first_bad = Some(first_bad.map_or(gap, |b| b.min(gap)));
        }
        if first_bad.is_none() && cp.head != self.prev {
            first_bad = Some(seq - 1);
        }
        if !signature_holds(key, v) {
            return Err(match first_bad {
                Some(b) => (b, format!("checkpoint {seq}'s signature does not verify (altered or forged), and record {b} is not the one its list names")),
                None => (seq, format!("checkpoint {seq}'s signature does not verify: the checkpoint was altered or forged")),
            });
        }
        if let Some(b) = first_bad {
            let reason = if b < cp.from_seq {
                format!(
                    "checkpoint {seq} covers records from {}, but the last checkpoint before it ended at record {}: a checkpoint was removed",
                    cp.from_seq,
                    self.cp_from.saturating_sub(1)
                )
            } else {
                format!("record {b} is not the one checkpoint {seq} signed: altered, removed or reordered, and the chain recomputed")
            };
            return Err((b, reason));
        }
        self.out.checkpoints += 1;
        self.last_checkpoint = Some(seq);
        self.cp_from = seq + 1;
        self.window.clear();
        Ok(())
    }

    fn finish(mut self) -> Result<Verified, Broken> {
        if self.key.is_some() && self.out.records > 0 {
            let Some(last_cp) = self.last_checkpoint else {
                return Err(Broken {
                    seq: self.out.first_seq,
                    file: self.out.last_file.clone(),
                    line: 1,
                    reason: "no signed checkpoint: nothing in this log is vouched for by the key (a chain recomputed without its checkpoints looks like this)".into(),
                });
            };
            self.out.unsigned_tail = self.out.last_seq - last_cp;
        }
        Ok(self.out)
    }
}

/// Why the chain breaks at a record or a file's start (a verdict's reason).
#[derive(Debug, thiserror::Error)]
enum ChainBreak {
    #[error("record {expected} is missing (found {found} in its place): removed, or the records are out of order")]
    Missing { expected: u64, found: u64 },
    #[error("found record {found} where {expected} was due: reordered or duplicated")]
    Repeated { expected: u64, found: u64 },
    #[error("prev does not match the previous record's hash: a record before it was removed, reordered or altered")]
    PrevMismatch,
    #[error("no hash")]
    NoHash,
    #[error("hash does not match the content: the record was altered")]
    Altered,
    #[error("malformed rotation record: {0}")]
    MalformedRotation(#[source] serde_json::Error),
    #[error("{0} does not start with a rotation record: a file of the series is missing or out of order")]
    NoRotation(String),
    #[error("{name} follows {follows:?}, but the series walked has {walked:?} before it")]
    WrongPredecessor {
        name: String,
        follows: String,
        walked: String,
    },
}

#[cfg(test)]
#[path = "verify_tests.rs"]
mod tests;
