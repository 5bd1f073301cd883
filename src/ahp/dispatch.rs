//! Which actions a client may dispatch, and on which channel, and what a
//! well-formed one of each type is. Pure; the host adds the checks that need
//! state (ownership of tool calls, own clientId).

use ahp_types::actions as a;
use ahp_types::actions::StateAction;
use serde::de::DeserializeOwned;
use serde_json::Value;

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

/// Deserializes a client-dispatchable action of type `ty` (already checked
/// against the table). `ahp-types` turns a malformed action of a known type
/// into `StateAction::Unknown`, which the reducers then call out of scope;
/// here it is refused as malformed, naming the field, e.g.
/// "malformed chat/turnStarted: missing field `turnId`".
pub fn parse_client_action(ty: &str, action: &Value) -> Result<StateAction, String> {
    let typed: StateAction =
        serde_json::from_value(action.clone()).map_err(|e| format!("malformed {ty}: {e}"))?;
    if !matches!(typed, StateAction::Unknown(_)) {
        return Ok(typed);
    }
    let why = shape_check(ty)
        .and_then(|check| check(action).err())
        .map_or_else(
            || "not a valid action of this type".to_owned(),
            |e| e.to_string(),
        );
    Err(format!("malformed {ty}: {why}"))
}

type ShapeCheck = fn(&Value) -> Result<(), serde_json::Error>;

fn shape<T: DeserializeOwned>(v: &Value) -> Result<(), serde_json::Error> {
    T::deserialize(v).map(drop)
}

/// The typed shape of each client-dispatchable action, whose error names the field.
fn shape_check(ty: &str) -> Option<ShapeCheck> {
    Some(match ty {
        "root/configChanged" => shape::<a::RootConfigChangedAction>,
        "session/titleChanged" => shape::<a::SessionTitleChangedAction>,
        "session/isReadChanged" => shape::<a::SessionIsReadChangedAction>,
        "session/isArchivedChanged" => shape::<a::SessionIsArchivedChangedAction>,
        "session/configChanged" => shape::<a::SessionConfigChangedAction>,
        "session/activeClientSet" => shape::<a::SessionActiveClientSetAction>,
        "session/activeClientRemoved" => shape::<a::SessionActiveClientRemovedAction>,
        "session/customizationToggled" => shape::<a::SessionCustomizationToggledAction>,
        "session/workingDirectorySet" => shape::<a::SessionWorkingDirectorySetAction>,
        "session/workingDirectoryRemoved" => shape::<a::SessionWorkingDirectoryRemovedAction>,
        "session/mcpServerStartRequested" => shape::<a::SessionMcpServerStartRequestedAction>,
        "session/mcpServerStopRequested" => shape::<a::SessionMcpServerStopRequestedAction>,
        "chat/turnStarted" => shape::<a::ChatTurnStartedAction>,
        "chat/turnCancelled" => shape::<a::ChatTurnCancelledAction>,
        "chat/truncated" => shape::<a::ChatTruncatedAction>,
        "chat/toolCallConfirmed" => shape::<a::ChatToolCallConfirmedAction>,
        "chat/toolCallResultConfirmed" => shape::<a::ChatToolCallResultConfirmedAction>,
        "chat/pendingMessageSet" => shape::<a::ChatPendingMessageSetAction>,
        "chat/pendingMessageRemoved" => shape::<a::ChatPendingMessageRemovedAction>,
        "chat/queuedMessagesReordered" => shape::<a::ChatQueuedMessagesReorderedAction>,
        "chat/inputAnswerChanged" => shape::<a::ChatInputAnswerChangedAction>,
        "chat/inputCompleted" => shape::<a::ChatInputCompletedAction>,
        "chat/isReadChanged" => shape::<a::ChatIsReadChangedAction>,
        "chat/isArchivedChanged" => shape::<a::ChatIsArchivedChangedAction>,
        "chat/draftChanged" => shape::<a::ChatDraftChangedAction>,
        "chat/toolCallComplete" => shape::<a::ChatToolCallCompleteAction>,
        "chat/toolCallContentChanged" => shape::<a::ChatToolCallContentChangedAction>,
        _ => return None,
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

    #[test]
    fn every_dispatchable_type_has_a_shape() {
        for ty in ROOT.iter().chain(SESSION).chain(CHAT) {
            assert!(shape_check(ty).is_some(), "{ty}");
        }
    }

    #[test]
    fn a_malformed_known_action_names_the_field() {
        let no_id = serde_json::json!({"type": "chat/turnStarted", "startedAt": "2026-01-01T00:00:00Z",
            "message": {"text": "x", "origin": {"kind": "user"}}});
        let e = parse_client_action("chat/turnStarted", &no_id).unwrap_err();
        assert_eq!(e, "malformed chat/turnStarted: missing field `turnId`");
        let mut ok = no_id.clone();
        ok["turnId"] = "t".into();
        assert!(matches!(
            parse_client_action("chat/turnStarted", &ok),
            Ok(StateAction::ChatTurnStarted(_))
        ));
        let e = parse_client_action(
            "session/titleChanged",
            &serde_json::json!({"type": "session/titleChanged", "title": 7}),
        )
        .unwrap_err();
        assert!(
            e.starts_with("malformed session/titleChanged: invalid type"),
            "{e}"
        );
    }
}
