//! Evidence from outside the file: a chain that holds can still have lost its
//! tail (or everything). `--expect-head SEQ:HASH` (a head written down
//! elsewhere) and `--against SHIPPED` (the records a syslog daemon received)
//! catch that. Records are compared as the walk streams by: only the shipped
//! copy's sequence numbers and hashes are held.

use crate::audit_error::AuditError;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;

use serde_json::Value;

use super::verdict::{Broken, Verified};
use super::{record_hash, BadArgument};

/// `SEQ:HASH`, as `audit verify` prints it.
pub fn parse_head(s: &str) -> Result<(u64, String), BadArgument> {
    let bad = |why: String| BadArgument(why);
    let (seq, hash) = s
        .split_once(':')
        .ok_or_else(|| bad(format!("{s:?}: expected SEQ:HASH")))?;
    let seq = seq
        .parse()
        .map_err(|_| bad(format!("{seq:?} is not a sequence number")))?;
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad(format!("{hash:?} is not a SHA-256 in hex")));
    }
    Ok((seq, hash.to_ascii_lowercase()))
}

/// The shipped copy: each whole record's hash by sequence number.
#[derive(Debug, Default)]
pub(super) struct Shipped {
    hashes: BTreeMap<u64, [u8; 32]>,
    /// Records the shipper reported it could not queue (`shipping_gap`).
    gaps: u64,
    /// Lines that are no whole record (cut by the daemon's size limit?).
    damaged: u64,
}

impl Shipped {
    /// The records of `path`; with `instance`, only that bridge's (the
    /// others, and records that name no instance, are another chain's).
    pub(super) fn load(path: &Path, instance: Option<&str>) -> Result<Self, AuditError> {
        let f = std::fs::File::open(path).map_err(|e| AuditError::read(path, e))?;
        let mut s = Self::default();
        for line in std::io::BufReader::new(f).split(b'\n') {
            let line = line.map_err(|e| AuditError::read(path, e))?;
            if line.is_empty() {
                continue;
            }
            let Ok(mut r) = serde_json::from_slice::<Value>(&line) else {
                s.damaged += 1;
                continue;
            };
            if instance.is_some_and(|i| r["instance"].as_str() != Some(i)) {
                continue;
            }
            if r["kind"] == "shipping_gap" {
                s.gaps += r["dropped"].as_u64().unwrap_or_default();
                continue;
            }
            let (Some(seq), Some(prev)) = (r["seq"].as_u64(), r["prev"].as_str().map(String::from))
            else {
                s.damaged += 1;
                continue;
            };
            let claimed = r.as_object_mut().and_then(|o| o.remove("hash"));
            let hash = record_hash(&prev, &r);
            match hex::decode(&hash)
                .ok()
                .and_then(|b| <[u8; 32]>::try_from(b).ok())
            {
                Some(h) if claimed.as_ref().and_then(Value::as_str) == Some(hash.as_str()) => {
                    s.hashes.insert(seq, h);
                }
                _ => s.damaged += 1,
            }
        }
        Ok(s)
    }
}

/// What the walk compares each record with.
#[derive(Debug, Default)]
pub(super) struct Evidence {
    expect: Option<(u64, String)>,
    expect_found: Option<String>,
    shipped: Option<Shipped>,
    matched: u64,
    first_bad: Option<(u64, String)>,
}

impl Evidence {
    pub(super) fn new(expect: Option<(u64, String)>, shipped: Option<Shipped>) -> Self {
        Self {
            expect,
            shipped,
            ..Default::default()
        }
    }

    fn bad(&mut self, seq: u64, reason: String) {
        if self.first_bad.as_ref().is_none_or(|(s, _)| seq < *s) {
            self.first_bad = Some((seq, reason));
        }
    }

    /// A local record, as the walk verified it.
    pub(super) fn record(&mut self, seq: u64, hash: &str) {
        if self.expect.as_ref().is_some_and(|(s, _)| *s == seq) {
            self.expect_found = Some(hash.to_owned());
        }
        let Some(shipped) = self.shipped.as_mut() else {
            return;
        };
        if let Some(h) = shipped.hashes.remove(&seq) {
            let h = hex::encode(h);
            if h == hash {
                self.matched += 1;
            } else {
                self.bad(seq, format!("record {seq} differs from the copy shipped (local hash {hash}, shipped {h})"));
            }
        }
    }

    /// After the walk: the first record the evidence contradicts, if any.
    pub(super) fn judge(mut self, mut v: Verified) -> Result<Verified, Broken> {
        let next = if v.records == 0 { 1 } else { v.last_seq + 1 };
        let has = if v.records == 0 {
            "the log holds no record".to_string()
        } else {
            format!("the log ends at record {}", v.last_seq)
        };
        if let Some((seq, hash)) = self.expect.clone() {
            if v.records == 0 || seq > v.last_seq {
                self.bad(next, format!("{has}, but record {seq} was expected (--expect-head): records removed from the end, or the file emptied"));
            } else {
                match &self.expect_found {
                    Some(h) if *h == hash => {}
                    Some(h) => {
                        let reason = format!("record {seq} has hash {h}, not the expected {hash}");
                        self.bad(seq, reason);
                    }
                    None => v.notes.push(format!(
                        "--expect-head {seq} is before the first record walked ({}); not checked",
                        v.first_seq
                    )),
                }
            }
        }
        if let Some(shipped) = self.shipped.take() {
            let mut before = 0;
            for &seq in shipped.hashes.keys() {
                if v.records == 0 || seq > v.last_seq {
                    self.bad(
                        next,
                        format!("record {seq} was shipped, but {has}: its tail was cut"),
                    );
                    break;
                } else if seq < v.first_seq {
                    before += 1;
                } else {
                    self.bad(
                        seq,
                        format!("record {seq} was shipped but is not in the local log"),
                    );
                }
            }
            v.notes.push(format!(
                "{} shipped records match the local log{}",
                self.matched,
                if before > 0 {
                    format!(" ({before} are from before the first record walked)")
                } else {
                    String::new()
                }
            ));
            if shipped.gaps > 0 {
                v.notes.push(format!("the shipper reported {} records it could not queue (shipping_gap): they are in the local log only", shipped.gaps));
            }
            if shipped.damaged > 0 {
                v.notes.push(format!(
                    "{} lines of the shipped copy are no whole record (cut by the daemon's message size limit?); not compared",
                    shipped.damaged
                ));
            }
        }
        match self.first_bad {
            Some((seq, reason)) => Err(Broken {
                seq,
                file: v.last_file.clone(),
                line: v.last_line + 1,
                reason,
            }),
            None => Ok(v),
        }
    }
}
