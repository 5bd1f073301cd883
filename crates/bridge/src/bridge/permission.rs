//! `ahp.permission`, asked the same way whichever runtime sent the request
//! (its JSON-RPC's `permission.requested`, or its AHP host's pending
//! `chat/toolCallReady`): the operator's Rego over the request as the
//! runtime sent it and the session's working directories, for the client
//! that started the turn.

use serde_json::Value;

use crate::ahp::Host;
use crate::policy::{lexical, Body};
use crate::policy::{Ask, Recording};

/// The reason the policy refuses `request` (of kind `kind`) in `session`,
/// where the turn was started by `starter`; `None` when it may go to the
/// clients.
pub(super) fn refusal(
    host: &Host,
    session: &str,
    starter: Option<&str>,
    request: &Value,
    kind: &str,
) -> Option<String> {
    let subject = host.connections().subject_of(starter);
    let dirs: Vec<String> = host
        .for_backend()
        .working_directories(session)
        .iter()
        .map(|p| lexical(&p.to_string_lossy()))
        .collect();
    let body = Body::Permission {
        request,
        working_directories: &dirs,
    };
    let verdict = host.governor().decide(Ask {
        subject: &subject,
        session: Some(session),
        body,
        about: kind,
        recording: Recording::Now,
    });
    verdict.refused().map(str::to_owned)
}
