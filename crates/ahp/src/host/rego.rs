//! The operator's Rego policy asked from the host's side: a client's
//! opt-in (`ahp.opt_in`) and `createSession` (`ahp.session`). The host
//! knows who asks (the principal it authenticated, its roles and claims);
//! what the decision was worth recording goes to the backend, which keeps
//! the audit log (the host has none) and logs it. Asked outside the host's lock: an
//! evaluation takes up to `[policy.rego] timeout` of CPU, never a wait.

use std::time::Duration;

use std::sync::Arc;

use crate::backend::{Backend, Decided};
use ahp_bridge_base::policy::rego::{Body, Input, Subject};
use ahp_bridge_base::policy::Policy;

/// A decision that refuses: its messages, or the error, for the requester.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Refused(pub String);

/// Asks `policy` (the one in force), if it has Rego modules; refused when
/// the decision refuses. A decision worth recording goes to `backend`. Given
/// the host's pieces, not the host, so that this file does not import the
/// host that imports it.
pub(crate) fn decide(
    policy: &Policy,
    backend: Option<Arc<dyn Backend>>,
    subject: &Subject,
    session: Option<&str>,
    body: Body<'_>,
    about: String,
) -> Result<(), Refused> {
    let Some(rego) = policy.rego() else {
        return Ok(());
    };
    // The host's decisions have no deadline of their own but the policy's.
    let d = rego.decide(&Input::new(subject, session, body), Duration::MAX);
    if !d.recorded() {
        return Ok(());
    }
    let refused = d.refuses().then(|| Refused(d.reason()));
    if let Some(backend) = backend {
        backend.decided(Decided {
            decision: d,
            subject: subject.clone(),
            session: session.map(str::to_owned),
            about,
        });
    }
    refused.map_or(Ok(()), Err)
}
