//! The operator's Rego policy asked from the host's side: a client's
//! opt-in (`ahp.opt_in`) and `createSession` (`ahp.session`). The host
//! knows who asks (the principal it authenticated, its roles and claims);
//! what the decision was worth recording goes to the backend, which keeps
//! the audit log (the host has none) and logs it. Asked outside the host's lock: an
//! evaluation takes up to `[policy.rego] timeout` of CPU, never a wait.

use std::time::Duration;

use super::Host;
use crate::ahp::backend::Decided;
use crate::policy::rego::{Body, ClientKind, Input, Subject};

/// A decision that refuses: its messages, or the error, for the requester.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Refused(pub String);

/// Asks the policy in force, if it has Rego modules; refused when the
/// decision refuses.
pub(crate) fn decide(
    host: &Host,
    subject: &Subject,
    session: Option<&str>,
    body: Body<'_>,
    about: String,
) -> Result<(), Refused> {
    let policy = host.policy.current();
    let Some(rego) = policy.rego() else {
        return Ok(());
    };
    // The host's decisions have no deadline of their own but the policy's.
    let d = rego.decide(&Input::new(subject, session, body), Duration::MAX);
    if !d.recorded() {
        return Ok(());
    }
    let refused = d.refuses().then(|| Refused(d.reason()));
    if let Some(backend) = host.backend() {
        backend.decided(Decided {
            decision: d,
            subject: subject.clone(),
            session: session.map(str::to_owned),
            about,
        });
    }
    refused.map_or(Ok(()), Err)
}

/// Who `client_id` is to the policy (its principal while it is connected
/// or in its grace); nobody when no client is known.
pub(crate) fn subject_of(host: &Host, client_id: Option<&str>) -> Subject {
    let Some(id) = client_id else {
        return Subject::nobody();
    };
    let st = host.lock();
    match st.clients.principal_of_client(id) {
        Some(p) => p.subject(Some(id), ClientKind::Ahp),
        None => Subject::client(id, ClientKind::Ahp),
    }
}
