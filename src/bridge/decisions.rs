//! The records of the operator's Rego decisions made outside a transform
//! (a transform section's decision is inside its transform record): an
//! opt-in or a session the host decided on, a permission request, a
//! customization. Written off the async workers, as customization records
//! are; the action itself does not wait for its record.

use std::sync::Arc;

use crate::audit::decision::DecisionRecord;
use crate::audit::log::AuditLog;
use crate::telemetry::Escaped;
use tracing::info;

/// Logs a decision worth a record and appends the record to the audit
/// log, if there is one.
pub fn record(log: Option<Arc<AuditLog>>, record: DecisionRecord) {
    let d = &record.decision;
    info!(point = %d.point, outcome = %d.outcome, principal = ?d.principal,
        session = ?record.session, client = ?record.client,
        about = %Escaped(&record.about), messages = %Escaped(&d.messages()), "rego decision");
    let Some(log) = log else {
        return;
    };
    tokio::task::spawn_blocking(move || {
        if let Err(e) = log.append(&record) {
            tracing::error!("decision record not written: {e:#}");
        }
    });
}
