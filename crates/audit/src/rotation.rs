//! Rotation (`max_bytes`, `max_age`) and the series it makes. The full file
//! is renamed to `NAME.SEQ` (SEQ: its first record), a new NAME is started,
//! and its first record, `rotation`, names the previous file and links to its
//! last hash, so the series is one chain. With a key, the old file ends in a
//! checkpoint, so every file's records are signed within it.

use crate::error::AuditError;
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use tracing::{error, info};

use super::log::AuditLog;
use super::record::{now_rfc3339, RotationRecord};
use super::writer::Writer;

impl AuditLog {
    /// Rotates when the file is due; a failure is logged and the current
    /// file written on (nothing is lost by not rotating).
    pub(super) fn rotate_if_due(&self, w: &mut Writer) {
        if !self.rotation_due(w) {
            return;
        }
        if let Err(e) = self.rotate(w) {
            error!(path = %self.path.display(), "audit log rotation failed, writing on in the current file: {e}");
        }
    }

    pub(super) fn rotation_due(&self, w: &Writer) -> bool {
        if w.file_first_seq().is_none() || w.needs_recovery() || w.pending_link().is_some() {
            return false;
        }
        let o = &self.opts;
        let big = o.max_bytes > 0 && w.file_len() >= o.max_bytes;
        let old = !o.max_age.is_zero()
            && w.file_started().is_some_and(|t| {
                jiff::Timestamp::now().duration_since(t).unsigned_abs() >= o.max_age
            });
        big || old
    }

    fn rotate(&self, w: &mut Writer) -> Result<(), AuditError> {
        if self.opts.signer.is_some() && w.uncheckpointed() > 0 {
            self.checkpoint(w)?;
        }
        w.sync()?;
        let to = rotated_name(&self.path, w.file_first_seq().unwrap_or(w.seq()));
        std::fs::rename(&self.path, &to)?;
        let file = match OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&self.path)
        {
            Ok(f) => f,
            Err(e) => {
                let _ = std::fs::rename(&to, &self.path);
                return Err(e.into());
            }
        };
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
        }
        info!(path = %self.path.display(), rotated_to = %to.display(), last_seq = w.seq(), "audit log rotated");
        let link = RotationRecord {
            time: now_rfc3339(),
            previous_file: file_name(&to),
            previous_seq: w.seq(),
        };
        // Written by `settle`, which also retries it before anything else
        // if this write fails (no recovery is pending: `rotation_due` says so).
        w.rotated(file, link);
        self.settle(w)
    }
}

pub(super) fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `NAME.SEQ`, or with a further suffix if that exists (a series restarted
/// from scratch beside an older one).
fn rotated_name(path: &Path, first_seq: u64) -> PathBuf {
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
