//! Evidence from outside the file: a chain that holds can still have lost its
//! tail (or everything). `--expect-head SEQ:HASH` (a head written down
//! elsewhere) and `--against SHIPPED` (the records a syslog daemon received)
//! catch that.

use serde_json::Value;

use super::record_hash;
use super::verify::{Broken, Check, Verified};

/// `SEQ:HASH`, as `audit verify` prints it.
pub fn parse_head(s: &str) -> Result<(u64, String), String> {
    let (seq, hash) = s
        .split_once(':')
        .ok_or_else(|| format!("{s:?}: expected SEQ:HASH"))?;
    let seq = seq
        .parse()
        .map_err(|_| format!("{seq:?} is not a sequence number"))?;
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("{hash:?} is not a SHA-256 in hex"));
    }
    Ok((seq, hash.to_ascii_lowercase()))
}

pub(super) fn outside_evidence(
    mut v: Verified,
    check: &Check,
) -> anyhow::Result<Result<Verified, Broken>> {
    let end = |v: &Verified, seq: u64, reason: String| Broken {
        seq,
        file: v.last_file.clone(),
        line: v.last_line + 1,
        reason,
    };
    let hash_of = |v: &Verified, seq: u64| {
        seq.checked_sub(v.first_seq)
            .and_then(|i| v.hashes.get(i as usize))
            .cloned()
    };
    if let Some((seq, hash)) = &check.expect_head {
        if v.records == 0 || *seq > v.last_seq {
            let next = if v.records == 0 { 1 } else { v.last_seq + 1 };
            let has = if v.records == 0 {
                "the log holds no record".to_string()
            } else {
                format!("the log ends at record {}", v.last_seq)
            };
            return Ok(Err(end(&v, next, format!("{has}, but record {seq} was expected (--expect-head): records removed from the end, or the file emptied"))));
        }
        match hash_of(&v, *seq) {
            Some(h) if h == *hash => {}
            Some(h) => {
                return Ok(Err(end(
                    &v,
                    *seq,
                    format!("record {seq} has hash {h}, not the expected {hash}"),
                )));
            }
            None => v.notes.push(format!(
                "--expect-head {seq} is before the first record walked ({}); not checked",
                v.first_seq
            )),
        }
    }
    if let Some(path) = &check.against {
        let text = std::fs::read(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let mut first_bad: Option<(u64, String)> = None;
        let mut bad = |seq: u64, reason: String| {
            if first_bad.as_ref().map_or(true, |(s, _)| seq < *s) {
                first_bad = Some((seq, reason));
            }
        };
        let (mut shipped, mut before, mut damaged, mut gaps) = (0u64, 0u64, 0u64, 0u64);
        for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let Ok(mut r) = serde_json::from_slice::<Value>(line) else {
                damaged += 1;
                continue;
            };
            if r["kind"] == "shipping_gap" {
                gaps += r["dropped"].as_u64().unwrap_or_default();
                continue;
            }
            let (Some(seq), Some(prev)) = (r["seq"].as_u64(), r["prev"].as_str()) else {
                damaged += 1;
                continue;
            };
            let prev = prev.to_owned();
            let claimed = r.as_object_mut().and_then(|o| o.remove("hash"));
            let hash = record_hash(&prev, &r);
            if claimed.as_ref().and_then(Value::as_str) != Some(hash.as_str()) {
                damaged += 1;
                continue;
            }
            shipped += 1;
            if v.records == 0 || seq > v.last_seq {
                let next = if v.records == 0 { 1 } else { v.last_seq + 1 };
                bad(
                    next,
                    format!(
                        "record {seq} was shipped, but the local log ends {}: its tail was cut",
                        if v.records == 0 {
                            "before record 1".to_string()
                        } else {
                            format!("at record {}", v.last_seq)
                        }
                    ),
                );
            } else if let Some(local) = hash_of(&v, seq) {
                if local != hash {
                    bad(seq, format!("record {seq} differs from the copy shipped (local hash {local}, shipped {hash})"));
                }
            } else {
                before += 1;
            }
        }
        if let Some((seq, reason)) = first_bad {
            return Ok(Err(end(&v, seq, reason)));
        }
        v.notes.push(format!(
            "{shipped} shipped records match the local log{}",
            if before > 0 {
                format!(" ({before} are from before the first record walked)")
            } else {
                String::new()
            }
        ));
        if gaps > 0 {
            v.notes.push(format!("the shipper reported {gaps} records it could not queue (shipping_gap): they are in the local log only"));
        }
        if damaged > 0 {
            v.notes.push(format!(
                "{damaged} lines of the shipped copy are no whole record (cut by the daemon's message size limit?); not compared"
            ));
        }
    }
    Ok(Ok(v))
}
