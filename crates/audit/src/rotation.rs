//! The series rotation makes (the rotation itself, on `max_bytes` and
//! `max_age`, is the log's own: `AuditLog` in log.rs). The full file is
//! renamed to `NAME.SEQ` (SEQ: its first record), a new NAME is started,
//! and its first record, `rotation`, names the previous file and links to its
//! last hash, so the series is one chain. With a key, the old file ends in a
//! checkpoint, so every file's records are signed within it.

use crate::audit_error::AuditError;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub(super) fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `NAME.SEQ`, or with a further suffix if that exists (a series restarted
/// from scratch beside an older one).
pub(super) fn rotated_name(path: &Path, first_seq: u64) -> PathBuf {
    let with = |suffix: String| {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        PathBuf::from(p)
    };
    let plain = with(format!(".{first_seq}"));
    if !plain.exists() {
        return plain;
    }
    with(format!(
        ".{first_seq}.{}",
        jiff::Timestamp::now().as_nanosecond()
    ))
}

/// The files of a series in chain order, and what was passed over.
#[derive(Debug, Default)]
pub struct Series {
    pub files: Vec<PathBuf>,
    /// Files in a given directory that are not of its series (a state
    /// store beside the log, say), by name.
    pub skipped: Vec<String>,
}

/// The files of a series in chain order: the given files, and in a given
/// directory the files of the one series it holds (`NAME` and its rotated
/// `NAME.SEQ`), ordered by the sequence number of their first record (a
/// file with none goes last).
pub fn series(paths: &[PathBuf]) -> Result<Series, AuditError> {
    let mut out = Series::default();
    for p in paths {
        if p.is_dir() {
            let (files, skipped) = series_in(p)?;
            out.files.extend(files);
            out.skipped.extend(skipped);
        } else {
            out.files.push(p.clone());
        }
    }
    let mut keyed = Vec::new();
    for f in std::mem::take(&mut out.files) {
        keyed.push((first_seq(&f)?, f));
    }
    keyed.sort_by_key(|(s, _)| s.unwrap_or(u64::MAX));
    for pair in keyed.windows(2) {
        if let ((Some(a), fa), (Some(b), fb)) = (&pair[0], &pair[1]) {
            if a == b {
                return Err(AuditError::TwoSeries {
                    first: fa.clone(),
                    second: fb.clone(),
                    seq: *a,
                });
            }
        }
    }
    out.files = keyed.into_iter().map(|(_, f)| f).collect();
    Ok(out)
}

/// The name a file of a series is rotated from: `audit.jsonl.1001` (and
/// `audit.jsonl.1001.<nanos>`) are of `audit.jsonl`.
fn series_name(file: &str) -> &str {
    let is_seq = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let mut name = file;
    for _ in 0..2 {
        match name.rsplit_once('.') {
            Some((base, seq)) if is_seq(seq) && !base.is_empty() => name = base,
            _ => break,
        }
    }
    name
}

/// The series a directory holds: of the names its files rotate from, the
/// one with the most files that hold audit records. Everything else in
/// the directory is skipped (and named).
fn series_in(dir: &Path) -> Result<(Vec<PathBuf>, Vec<String>), AuditError> {
    let mut by_name: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for e in std::fs::read_dir(dir).map_err(|e| AuditError::read(dir, e))? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if e.file_type()?.is_file() && !name.starts_with('.') {
            by_name
                .entry(series_name(&name).to_owned())
                .or_default()
                .push(e.path());
        }
    }
    let mut best: Option<(usize, String)> = None;
    for (name, files) in &by_name {
        let holds_records = files.iter().any(|f| matches!(first_seq(f), Ok(Some(_))));
        if holds_records && best.as_ref().is_none_or(|(n, _)| files.len() > *n) {
            best = Some((files.len(), name.clone()));
        }
    }
    let chosen = best.map(|(_, n)| n).unwrap_or_default();
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    for (name, group) in by_name {
        if name == chosen {
            files.extend(group);
        } else {
            skipped.extend(group.iter().map(|f| file_name(f)));
        }
    }
    Ok((files, skipped))
}

/// The sequence number of a file's first record.
fn first_seq(path: &Path) -> Result<Option<u64>, AuditError> {
    use std::io::BufRead;
    let f = std::fs::File::open(path).map_err(|e| AuditError::read(path, e))?;
    for line in std::io::BufReader::new(f).split(b'\n') {
        let line = line?;
        if let Some(s) = serde_json::from_slice::<serde_json::Value>(&line)
            .ok()
            .and_then(|v| v["seq"].as_u64())
        {
            return Ok(Some(s));
        }
    }
    Ok(None)
}
