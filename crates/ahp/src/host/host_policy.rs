//! The operator's policy asked from the host's side: a client's opt-in
//! (`ahp.opt_in`) and `createSession` (`ahp.session`), through the one
//! decision path (`Governor`, which records what is worth a record by the
//! join's audit path; the host has no audit log). The host knows who asks
//! (the principal it authenticated, its roles and claims). Asked outside
//! the host's lock: an evaluation takes up to `[policy.rego] timeout` of
//! CPU, never a wait.

use ahp_bridge_policy::{Ask, Governor, Recording};
use ahp_bridge_policy::{Body, Subject};

/// A decision that refuses: its messages, or the error, for the requester.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct RegoRefused(pub String);

/// Asks the governor about `body`; refused when the decision refuses.
pub(crate) fn decide(
    governor: &Governor,
    subject: &Subject,
    session: Option<&str>,
    body: Body<'_>,
    about: &str,
) -> Result<(), RegoRefused> {
    let verdict = governor.decide(Ask {
        subject,
        session,
        body,
        about,
        recording: Recording::Now,
    });
    match verdict.refused() {
        Some(why) => Err(RegoRefused(why.to_owned())),
        None => Ok(()),
    }
}
