//! Append-only, hash-chained JSON Lines. Each record carries its `kind`, its
//! sequence number, the previous record's hash and its own. Reopening
//! continues the chain from the last whole record; whatever a crash or a
//! failed write left after it is accounted for by a `recovered` record, never
//! silently skipped. With a signing key, signed checkpoints are written every
//! `checkpoint_every` records, every `checkpoint_interval` and at `close`.

use crate::audit_error::AuditError;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use serde_json::Value;
use tracing::{error, info, warn};

use super::chain_hash;
use super::checkpoint::{Signer, HASH_PREFIX};
use super::record::{now_rfc3339, CheckpointRecord, Kind, Record, RotationRecord};
use super::rotation::{file_name, rotated_name};
use super::scan::scan;
use super::writer::Writer;
use ahp_bridge_base::config::{AuditConfig, FsyncPolicy};
use ahp_bridge_telemetry::{metrics, CheckFailed};

/// Where written records go besides the file (the syslog shipper). Called
/// under the log's lock, in order, with the line as written; must not block.
pub trait Ship: Send + Sync {
    fn ship(&self, record: &Value, line: &str);
}

/// How a log is written.
pub struct Options {
    pub fsync: FsyncPolicy,
    pub signer: Option<Signer>,
    pub checkpoint_every: u64,
    pub checkpoint_interval: Duration,
    /// Rotate before the file passes this many bytes; 0: never.
    pub max_bytes: u64,
    /// Rotate once the file's first record is this old; zero: never.
    pub max_age: Duration,
    pub ship: Option<Arc<dyn Ship>>,
    /// This bridge's name in a fleet, in every record (`[server] instance`).
    pub instance: String,
}

impl Options {
    pub fn new(fsync: FsyncPolicy) -> Self {
        let d = AuditConfig::default();
        Self {
            fsync,
            signer: None,
            checkpoint_every: d.checkpoint_every,
            checkpoint_interval: d.checkpoint_interval,
            max_bytes: 0,
            max_age: Duration::ZERO,
            ship: None,
            instance: ahp_bridge_base::config::ServerConfig::default().instance(),
        }
    }

    /// The options `[audit]` asks for (the signing key read here); the
    /// shipper is the caller's to add.
    pub fn from_config(cfg: &AuditConfig, instance: String) -> Result<Self, AuditError> {
        Ok(Self {
            fsync: cfg.fsync,
            signer: cfg.signing_key.as_deref().map(Signer::load).transpose()?,
            checkpoint_every: cfg.checkpoint_every,
            checkpoint_interval: cfg.checkpoint_interval,
            max_bytes: cfg.max_bytes,
            max_age: cfg.max_age,
            ship: None,
            instance,
        })
    }
}

pub struct AuditLog {
    pub(super) path: PathBuf,
    pub(super) w: Mutex<Writer>,
    pub(super) opts: Options,
    dirty: AtomicBool,
}

/// What reopening found at the end of an existing log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    pub records: u64,
    /// Bytes after the last whole record, accounted for by a `recovered` record.
    pub torn_bytes: Option<usize>,
}

impl AuditLog {
    /// Opens (or creates) the log with default options and `fsync`.
    pub fn open(path: &Path, fsync: FsyncPolicy) -> Result<(Arc<Self>, Recovery), AuditError> {
        Self::open_with(path, Options::new(fsync))
    }

    /// Opens (or creates) the log and finds the chain head.
    pub fn open_with(path: &Path, opts: Options) -> Result<(Arc<Self>, Recovery), AuditError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let s = scan(path)?;
        let w = Writer::open(path, s)?;
        let torn = w.torn();
        let records = w.seq();
        let log = Arc::new(Self {
            path: path.to_owned(),
            w: Mutex::new(w),
            opts,
            dirty: AtomicBool::new(false),
        });
        if let Some(n) = torn {
            warn!(path = %path.display(), bytes = n, last_seq = records, "audit log ends in a torn record (crash?); a recovered record accounts for it");
            let mut w = log.lock();
            if let Err(e) = log.settle(&mut w) {
                error!(path = %path.display(), "could not write the recovered record yet: {e}");
            }
        }
        log.spawn_timers();
        Ok((
            log,
            Recovery {
                records,
                torn_bytes: torn,
            },
        ))
    }

    fn spawn_timers(self: &Arc<Self>) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.opts.fsync == FsyncPolicy::Batch {
            let weak = Arc::downgrade(self);
            rt.spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    let Some(log) = weak.upgrade() else { return };
                    log.sync_if_dirty();
                }
            });
        }
        if self.opts.signer.is_some() {
            let weak = Arc::downgrade(self);
            let every = self.opts.checkpoint_interval;
            rt.spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let Some(log) = weak.upgrade() else { return };
                    // File I/O off the async threads.
                    let _ = tokio::task::spawn_blocking(move || {
                        if let Err(e) = log.checkpoint_now() {
                            error!("audit checkpoint not written: {e}");
                        }
                    })
                    .await;
                }
            });
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Writer> {
        self.w.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends one record: `kind`, `seq`, `prev` and `hash` are filled in
    /// here. Returns the record as written. On an error nothing of it is in
    /// the file, and the next record that is written is preceded by a
    /// `recovered` record that counts it.
    pub fn append<R: Record>(&self, record: &R) -> Result<Value, AuditError> {
        let body = serde_json::to_value(record)?;
        let mut w = self.lock();
        let written = self
            .settle(&mut w)
            .and_then(|()| {
                self.rotate_if_due(&mut w);
                self.write(&mut w, R::KIND, body)
            })
            .inspect_err(|e| {
                metrics().audit_write_failed();
                let lost = w.count_lost();
                error!(path = %self.path.display(), lost, "audit write failed: {e}");
            })?;
        if self.opts.signer.is_some() && w.uncheckpointed() >= self.opts.checkpoint_every {
            if let Err(e) = self.checkpoint(&mut w) {
                error!(path = %self.path.display(), "audit checkpoint not written: {e}");
            }
        }
        Ok(written)
    }

    /// [`Self::append`] when that is only a line written: the lock free, no
    /// rotation, checkpoint or recovery record due, no fsync to wait for.
    /// `None` when it would be more (nothing is written then): call
    /// `append` where blocking is allowed.
    pub fn append_if_quick<R: Record>(&self, record: &R) -> Option<Result<Value, AuditError>> {
        let mut w = match self.w.try_lock() {
            Ok(w) => w,
            Err(TryLockError::WouldBlock) => return None,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
        };
        let checkpoint_due =
            self.opts.signer.is_some() && w.uncheckpointed() + 1 >= self.opts.checkpoint_every;
        if self.opts.fsync == FsyncPolicy::Always
            || checkpoint_due
            || w.pending_link().is_some()
            || w.needs_recovery()
            || self.rotation_due(&w)
        {
            return None;
        }
        let written = serde_json::to_value(record)
            .map_err(AuditError::from)
            .and_then(|body| self.write(&mut w, R::KIND, body));
        Some(written.inspect_err(|e| {
            metrics().audit_write_failed();
            let lost = w.count_lost();
            error!(path = %self.path.display(), lost, "audit write failed: {e}");
        }))
    }

    /// Whether records are being written: none lost since the last that
    /// was, and the file still writable. `Err` says why not.
    pub fn writable(&self) -> Result<(), CheckFailed> {
        let lost = self.lock().lost();
        if lost > 0 {
            return Err(CheckFailed(format!(
                "{lost} record(s) could not be written to {}",
                self.path.display()
            )));
        }
        ahp_bridge_telemetry::writable(&self.path)
    }

    /// A signed checkpoint now, if there is a key and anything to cover.
    pub fn checkpoint_now(&self) -> Result<Option<Value>, AuditError> {
        let mut w = self.lock();
        if self.opts.signer.is_none() || w.uncheckpointed() == 0 {
            return Ok(None);
        }
        self.settle(&mut w)?;
        self.checkpoint(&mut w).map(Some)
    }

    /// At shutdown: a last checkpoint, and the file on disk.
    pub fn close(&self) -> Result<(), AuditError> {
        self.checkpoint_now()?;
        self.lock().sync()?;
        Ok(())
    }

    pub(super) fn checkpoint(&self, w: &mut Writer) -> Result<Value, AuditError> {
        let Some(signer) = &self.opts.signer else {
            return Err(AuditError::NoSigningKey);
        };
        let (from_seq, hashes) = w.since_checkpoint();
        let record = CheckpointRecord {
            time: now_rfc3339(),
            key_id: signer.key_id().to_owned(),
            from_seq,
            head: w.prev().to_owned(),
            hashes: hashes
                .iter()
                .map(|h| h[..HASH_PREFIX.min(h.len())].to_owned())
                .collect(),
        };
        self.write(w, Kind::Checkpoint, serde_json::to_value(&record)?)
    }

    /// Writes the `recovered` record a failed write or a torn tail made due.
    pub(super) fn settle(&self, w: &mut Writer) -> Result<(), AuditError> {
        if let Some(link) = w.pending_link() {
            let link = serde_json::to_value(link)?;
            self.write(w, Kind::Rotation, link)?;
            w.link_written();
        }
        if !w.needs_recovery() {
            return Ok(());
        }
        let rec = w.recovered_record();
        self.write(w, Kind::Recovered, serde_json::to_value(&rec)?)?;
        warn!(path = %self.path.display(), cut_bytes = rec.cut_bytes, cut_line = rec.cut_line, lost_records = rec.lost_records, "audit log recovered: {}", rec.reason);
        w.recovered();
        Ok(())
    }

    /// Chains, signs (a checkpoint), writes, syncs and ships one record.
    pub(super) fn write(
        &self,
        w: &mut Writer,
        kind: Kind,
        body: Value,
    ) -> Result<Value, AuditError> {
        let Value::Object(mut o) = body else {
            return Err(AuditError::NotAnObject);
        };
        o.insert("kind".into(), Value::from(kind.as_str()));
        // Which bridge of a fleet wrote it: chained, so it cannot be moved
        // to another bridge's trail.
        o.insert("instance".into(), Value::from(self.opts.instance.as_str()));
        o.remove("hash");
        o.insert("seq".into(), Value::from(w.seq() + 1));
        o.insert("prev".into(), Value::from(w.prev()));
        let mut record = Value::Object(o);
        if kind == Kind::Checkpoint {
            if let Some(s) = &self.opts.signer {
                record["signature"] = Value::from(s.sign(&record));
            }
        }
        // Serialized once: the hash is over the canonical JSON, and the line
        // is that JSON with the hash as its last field (a line is read by
        // parsing it, so where `hash` stands does not matter).
        let canonical = record.to_string();
        let hash = chain_hash(w.prev(), &canonical);
        let line = with_hash(&canonical, &hash);
        record["hash"] = Value::from(hash.clone());
        w.write_line(&line)?;
        w.advance(&record, &hash, kind == Kind::Checkpoint);
        metrics().audit_record(kind.as_str());
        match self.opts.fsync {
            // The record is in the file and the chain moved on: a failed
            // fsync is reported, not counted as a lost record.
            FsyncPolicy::Always => {
                if let Err(e) = w.sync() {
                    error!(path = %self.path.display(), seq = w.seq(), "audit fsync failed: {e}");
                }
            }
            FsyncPolicy::Batch => self.dirty.store(true, Ordering::Release),
            FsyncPolicy::Never => {}
        }
        if let Some(ship) = &self.opts.ship {
            ship.ship(&record, &line);
        }
        Ok(record)
    }

    /// Makes what was written durable now (the batch flusher's tick).
    fn sync_if_dirty(&self) {
        if self.dirty.swap(false, Ordering::AcqRel) {
            // On a handle of its own, outside the lock: writers are not
            // held up for the length of an fsync.
            let file = self.lock().file_handle();
            if let Err(e) = file.and_then(|f| f.sync_data()) {
                error!(path = %self.path.display(), "audit fsync failed: {e}");
            }
        }
    }

    // Rotation (rotation.rs says how a series is made).

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

#[cfg(any(test, feature = "test-util"))]
impl AuditLog {
    /// For tests here and in the crates above (feature `test-util`): every
    /// write fails (a read-only handle) until called again with `false`.
    pub fn fail_writes_for_test(&self, fail: bool) {
        self.lock().fail_writes_for_test(fail);
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        if self.opts.fsync != FsyncPolicy::Never {
            if let Ok(w) = self.w.lock() {
                let _ = w.sync();
            }
        }
    }
}

/// A record's line: its canonical JSON (an object: at least `kind`) with
/// `"hash"` added as the last field.
fn with_hash(canonical: &str, hash: &str) -> String {
    let body = canonical.strip_suffix('}').unwrap_or(canonical);
    format!("{body},\"hash\":\"{hash}\"}}")
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
