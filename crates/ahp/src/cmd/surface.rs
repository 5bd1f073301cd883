//! The AHP 1.0 (and 1.1) commands this host does not answer, and the refusal each gets:
//! commands it does not offer at all are -32601 naming the method and why;
//! the `resource*` commands that would change files are PermissionDenied
//! (-32009, the code the spec gives for a write the receiver does not allow),
//! since files are read-only here. docs/protocol.md lists both.

use crate::protocol::errors::AhpError;
use ahp_bridge_jsonrpc::{ErrorCode, RpcError};

/// Commands of AHP 1.0 that this host does not offer, with the reason.
pub(crate) const NOT_OFFERED: &[(&str, &str)] = &[
    (
        "createChat",
        "a session has one chat, its default chat; further chats are not offered",
    ),
    (
        "disposeChat",
        "a session has one chat, its default chat, which goes with the session",
    ),
    ("moveChat", "a session has one chat; chats do not move"),
    ("createTerminal", "this host has no terminals"),
    ("disposeTerminal", "this host has no terminals"),
    (
        "createResourceWatch",
        "this host has no file watches; poll with resourceResolve",
    ),
    ("invokeChangesetOperation", "this host has no changesets"),
    (
        "listAutomationTriggerDefinitions",
        "this host has no automations",
    ),
    ("runAutomation", "this host has no automations"),
    ("fetchAutomationRuns", "this host has no automations"),
    // What 1.1 adds that this host does not offer (it advertises neither
    // `tcpConnections` nor authentication flows in `initialize`).
    (
        "createTcpConnection",
        "this host forwards no TCP connections (`tcpConnections` is not advertised)",
    ),
    (
        "authBegin",
        "this host has no interactive authentication flows; use `authenticate` with a token",
    ),
];

/// The `resource*` commands that change files: refused, files are read-only.
pub(crate) const READ_ONLY_REFUSED: &[&str] = &[
    "resourceWrite",
    "resourceCopy",
    "resourceDelete",
    "resourceMove",
    "resourceMkdir",
];

/// The answer to a request for `method`, which no handler took.
pub(crate) fn refusal(method: &str) -> RpcError {
    if READ_ONLY_REFUSED.contains(&method) {
        return RpcError::new(
            AhpError::PermissionDenied,
            format!("{method} is refused: files are read-only on this host (resourceRead, resourceList and resourceResolve are offered)"),
        );
    }
    match NOT_OFFERED.iter().find(|(m, _)| *m == method) {
        Some((_, why)) => RpcError::new(
            ErrorCode::MethodNotFound,
            format!("{method} is not offered: {why}"),
        ),
        None => RpcError::method_not_found(method),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_method() {
        let e = refusal("createChat");
        assert!(e.is(ErrorCode::MethodNotFound));
        assert!(e.message.contains("createChat") && e.message.contains("default chat"));
        let e = refusal("resourceDelete");
        assert!(e.is(AhpError::PermissionDenied));
        assert!(e.message.contains("resourceDelete") && e.message.contains("read-only"));
        let e = refusal("noSuchThing");
        assert!(e.is(ErrorCode::MethodNotFound));
        assert!(e.message.contains("noSuchThing"));
    }
}
