//! The records of the operator's Rego decisions made outside a transform
//! (a transform section's decision is inside its transform record): an
//! opt-in or a session the host decided on, a permission request, a
//! customization. Written off the async workers, as customization records
//! are; the action itself does not wait for its record.

use std::sync::Arc;

use crate::ahp::backend::Decided;
use crate::audit::decision::DecisionRecord;
use crate::audit::log::AuditLog;

/// Appends `record` to the audit log, if there is one.
pub fn record(log: Option<Arc<AuditLog>>, record: DecisionRecord) {
    let Some(log) = log else {
        return;
    };
    tokio::task::spawn_blocking(move || {
        if let Err(e) = log.append(&record) {
            tracing::error!("decision record not written: {e:#}");
        }
    });
}

/// The record of a decision the host made.
pub fn of_host(d: &Decided) -> DecisionRecord {
    DecisionRecord::new(
        &d.decision,
        d.principal.as_deref(),
        d.session.as_deref(),
        d.client.as_deref(),
        d.about.clone(),
    )
}
