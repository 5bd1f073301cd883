//! The one audit path of the operator's Rego decisions made outside a
//! transform (a transform section's decision is inside its transform
//! record): an opt-in or a session the host decided on, an SDK app's
//! session, a permission request, a customization. The governor
//! (`crates/policy/src/governor.rs`) hands each decision worth a
//! record here. Written off the async workers, as customization records
//! are; the action itself does not wait for its record.

use std::sync::Arc;

use crate::audit::AuditLog;
use crate::audit::DecisionRecord;
use crate::policy::{Decided, Recorder};
use crate::telemetry::Escaped;
use tracing::info;

/// Logs each decision and appends its record to the audit log, if any.
pub(crate) struct AuditRecorder {
    log: Option<Arc<AuditLog>>,
}

impl AuditRecorder {
    pub(crate) fn new(log: Option<Arc<AuditLog>>) -> Self {
        Self { log }
    }
}

impl Recorder for AuditRecorder {
    fn record(&self, decided: Decided) {
        let record = DecisionRecord::new(
            &decided.decision,
            &decided.subject,
            decided.session.as_deref(),
            &*decided.about,
        );
        let d = &record.decision;
        info!(point = %d.point, outcome = %d.outcome, principal = ?d.principal,
            session = ?record.session, client = ?record.client,
            about = %Escaped(&record.about), messages = %Escaped(&d.messages()), "rego decision");
        let Some(log) = self.log.clone() else {
            return;
        };
        tokio::task::spawn_blocking(move || {
            if let Err(e) = log.append(&record) {
                tracing::error!("decision record not written: {e:#}");
            }
        });
    }
}
