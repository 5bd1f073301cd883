//! The router's records, written to the audit log. A record that is only a
//! line to write (no fsync to wait for, no rotation or checkpoint due, the
//! log's lock free) is written here, cheaper than the hop to another
//! thread; anything that may block goes to the blocking pool. Either way a
//! panic in the writer is an error, so the runtime is still answered.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use crate::audit::AuditLog;
use crate::audit::TransformRecord;
use crate::transform::{AppendError, AppendFuture, AuditPort};

pub(crate) struct LogPort {
    log: Arc<AuditLog>,
}

impl LogPort {
    pub(crate) fn new(log: Arc<AuditLog>) -> Self {
        Self { log }
    }
}

fn panicked(what: impl std::fmt::Debug) -> AppendError {
    AppendError(format!("audit writer panicked: {what:?}"))
}

impl AuditPort for LogPort {
    fn append(&self, record: TransformRecord) -> AppendFuture {
        let log = self.log.clone();
        let quick = std::panic::catch_unwind(AssertUnwindSafe(|| log.append_if_quick(&record)));
        match quick {
            Ok(Some(written)) => Box::pin(std::future::ready(
                written.map(drop).map_err(AppendError::from),
            )),
            Err(p) => Box::pin(std::future::ready(Err(panicked(p)))),
            Ok(None) => Box::pin(async move {
                tokio::task::spawn_blocking(move || {
                    log.append(&record).map(drop).map_err(AppendError::from)
                })
                .await
                .unwrap_or_else(|e| Err(panicked(e)))
            }),
        }
    }
}
