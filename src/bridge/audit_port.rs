//! The router's records, written to the audit log. With `[audit] fsync =
//! "always"` a write waits for the disk, so it runs on the blocking pool;
//! otherwise it is one `write` of a line (the flusher syncs in the
//! background), cheaper than the hop to another thread, so it runs here.

use std::sync::Arc;

use crate::audit::log::AuditLog;
use crate::audit::record::TransformRecord;
use crate::config::FsyncPolicy;
use crate::transform::{AppendFuture, AuditPort};

pub struct LogPort {
    log: Arc<AuditLog>,
    waits_for_disk: bool,
}

impl LogPort {
    pub fn new(log: Arc<AuditLog>, fsync: FsyncPolicy) -> Self {
        Self {
            log,
            waits_for_disk: fsync == FsyncPolicy::Always,
        }
    }
}

impl AuditPort for LogPort {
    fn append(&self, record: TransformRecord) -> AppendFuture {
        let log = self.log.clone();
        if !self.waits_for_disk {
            let written = log.append(&record).map(drop);
            return Box::pin(std::future::ready(written));
        }
        Box::pin(async move {
            tokio::task::spawn_blocking(move || log.append(&record).map(drop))
                .await
                .unwrap_or_else(|e| Err(anyhow::anyhow!("audit writer panicked: {e}")))
        })
    }
}
