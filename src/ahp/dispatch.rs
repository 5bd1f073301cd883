//! Which actions a client may dispatch, and on which channel. Pure; the host
//! adds the checks that need state (ownership of tool calls, own clientId).

use super::uri::ChannelKind;

const ROOT: &[&str] = &["root/configChanged"];
const SESSION: &[&str] = &[
    "session/titleChanged",
    "session/isReadChanged",
    "session/isArchivedChanged",
    "session/configChanged",
    "session/activeClientSet",
    "session/activeClientRemoved",
    "session/customizationToggled",
    "session/workingDirectorySet",
    "session/workingDirectoryRemoved",
    "session/mcpServerStartRequested",
    "session/mcpServerStopRequested",
];
const CHAT: &[&str] = &[
    "chat/turnStarted",
    "chat/turnCancelled",
    "chat/truncated",
    "chat/toolCallConfirmed",
    "chat/toolCallResultConfirmed",
    "chat/pendingMessageSet",
    "chat/pendingMessageRemoved",
    "chat/queuedMessagesReordered",
    "chat/inputAnswerChanged",
    "chat/inputCompleted",
    "chat/isReadChanged",
    "chat/isArchivedChanged",
    "chat/draftChanged",
    // Only from the tool call's owner: checked by the host.
    "chat/toolCallComplete",
    "chat/toolCallContentChanged",
];

/// Actions a client may send only for a tool call it contributed.
pub fn needs_tool_owner(action_type: &str) -> bool {
    matches!(
        action_type,
        "chat/toolCallComplete" | "chat/toolCallContentChanged"
    )
}

/// Whether a client may dispatch `action_type` on a channel of `kind`;
/// the error is the `rejectionReason`.
pub fn client_may_dispatch(kind: ChannelKind, action_type: &str) -> Result<(), String> {
    let allowed = match kind {
        ChannelKind::Root => ROOT,
        ChannelKind::Session => SESSION,
        ChannelKind::Chat => CHAT,
        ChannelKind::Other => &[],
    };
    if allowed.contains(&action_type) {
        return Ok(());
    }
    let any = ROOT
        .iter()
        .chain(SESSION)
        .chain(CHAT)
        .any(|a| *a == action_type);
    Err(if any {
        format!("{action_type} does not belong on this channel")
    } else {
        format!("{action_type} may only be dispatched by the host")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        assert!(client_may_dispatch(ChannelKind::Chat, "chat/turnStarted").is_ok());
        assert!(client_may_dispatch(ChannelKind::Session, "session/activeClientSet").is_ok());
        let e = client_may_dispatch(ChannelKind::Session, "session/ready").unwrap_err();
        assert!(e.contains("only be dispatched by the host"));
        let e = client_may_dispatch(ChannelKind::Session, "chat/turnStarted").unwrap_err();
        assert!(e.contains("does not belong"));
        assert!(client_may_dispatch(ChannelKind::Chat, "chat/delta").is_err());
        assert!(client_may_dispatch(ChannelKind::Root, "root/agentsChanged").is_err());
        assert!(needs_tool_owner("chat/toolCallComplete"));
        assert!(!needs_tool_owner("chat/toolCallConfirmed"));
    }
}
