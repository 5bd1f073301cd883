//! The audit log's records, as written, into the host's `x-audit://log`
//! channel (and on to the syslog shipper, when there is one). The log calls
//! [`Ship::ship`] under its lock and must not be held up, so a record is
//! handed over a channel to a task that publishes it, in order.

use std::sync::{Arc, Weak};

use serde_json::Value;
use tokio::sync::mpsc;

use crate::ahp::host::Host;
use crate::audit::log::Ship;
use crate::audit::syslog::Shipper;

/// Every written record to the channel and to `shipper`.
pub struct AuditChannel {
    records: mpsc::UnboundedSender<Value>,
    shipper: Option<Arc<Shipper>>,
}

impl AuditChannel {
    /// Starts the publishing task on the current runtime; it ends when the
    /// log (and so this) is dropped, or the host is gone.
    pub fn start(host: Weak<Host>, shipper: Option<Arc<Shipper>>) -> Arc<Self> {
        let (records, mut rx) = mpsc::unbounded_channel::<Value>();
        let gap_of = shipper.clone();
        tokio::spawn(async move {
            while let Some(record) = rx.recv().await {
                let Some(host) = host.upgrade() else { return };
                let gap = gap_of.as_ref().map_or(0, |s| s.stats().1);
                host.publish_audit_record(record, gap);
            }
        });
        Arc::new(Self { records, shipper })
    }
}

impl Ship for AuditChannel {
    fn ship(&self, record: &Value, line: &str) {
        if let Some(s) = &self.shipper {
            s.ship(record, line);
        }
        let _ = self.records.send(record.clone());
    }
}
