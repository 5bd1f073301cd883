//! Actions as the host applies and sends them ([`Action`]: the typed
//! `StateAction` and the extension field `ahp-types` drops), which actions
//! a client may dispatch and on which channel, and what a well-formed one of
//! each type is. Pure; the host adds the checks that need state (ownership
//! of tool calls, own clientId).

use ahp_types::actions as a;
use ahp_types::actions::StateAction;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::uri::ChannelKind;
use crate::extension::TransformOptIn;

/// One action: typed, with the `systemMessageTransform` opt-in of an
/// active-client entry beside it (`ahp-types` has no field for it). Built
/// typed by its owner; JSON only where it meets the socket ([`Self::to_json`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Action {
    pub action: StateAction,
    /// With `session/activeClientSet`: the entry's opt-in, if any.
    pub opt_in: Option<TransformOptIn>,
}

impl From<StateAction> for Action {
    fn from(action: StateAction) -> Self {
        Self {
            action,
            opt_in: None,
        }
    }
}

impl Action {
    /// The action as the wire carries it.
    pub(crate) fn to_json(&self) -> Value {
        let mut v = serde_json::to_value(&self.action).unwrap_or(Value::Null);
        if let (Some(o), Some(entry)) = (&self.opt_in, v.get_mut("activeClient")) {
            entry[crate::extension::OPT_IN_FIELD] = serde_json::to_value(o).unwrap_or(Value::Null);
        }
        v
    }
}

/// Why the host refuses a client's action: the `rejectionReason` it echoes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Rejection(pub String);

impl From<String> for Rejection {
    fn from(why: String) -> Self {
        Self(why)
    }
}

impl From<&str> for Rejection {
    fn from(why: &str) -> Self {
        Self(why.to_owned())
    }
}

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
#[cfg(test)]
pub(crate) fn needs_tool_owner(action_type: &str) -> bool {
    matches!(
        action_type,
        "chat/toolCallComplete" | "chat/toolCallContentChanged"
    )
}

/// Whether a client may dispatch `action_type` on a channel of `kind`.
pub(crate) fn client_may_dispatch(kind: ChannelKind, action_type: &str) -> Result<(), Rejection> {
    let allowed = match kind {
        ChannelKind::Root => ROOT,
        ChannelKind::Session => SESSION,
        ChannelKind::Chat => CHAT,
        ChannelKind::HostChannel | ChannelKind::Other => &[],
    };
    if allowed.contains(&action_type) {
        return Ok(());
    }
    let any = ROOT
        .iter()
        .chain(SESSION)
        .chain(CHAT)
        .any(|a| *a == action_type);
    Err(Rejection(if any {
        format!("{action_type} does not belong on this channel")
    } else {
        format!("{action_type} may only be dispatched by the host")
    }))
}

/// A client's action as it arrived, checked against the table for a
/// channel of `kind` and parsed once, the opt-in of an active-client entry
/// included; refused naming what is wrong.
pub(crate) fn parse_client_action(kind: ChannelKind, action: &Value) -> Result<Action, Rejection> {
    let ty = match action {
        Value::Null => return Err(Rejection("field `action` is missing".into())),
        Value::Object(o) => o
            .get("type")
            .and_then(Value::as_str)
            .ok_or("field `action.type` is missing or not a string")?,
        _ => return Err(Rejection("field `action` is not an object".into())),
    };
    client_may_dispatch(kind, ty)?;
    let typed = parse_typed(ty, action)?;
    let opt_in = match &typed {
        StateAction::SessionActiveClientSet(_) => {
            let entry = action.get("activeClient").unwrap_or(&Value::Null);
            TransformOptIn::of_entry(entry)
                .map_err(|e| Rejection(format!("malformed {ty}: activeClient.{e}")))?
        }
        _ => None,
    };
    Ok(Action {
        action: typed,
        opt_in,
    })
}

/// Deserializes a client-dispatchable action of type `ty` (already checked
/// against the table). `ahp-types` turns a malformed action of a known type
/// into `StateAction::Unknown`, which the reducers then call out of scope;
/// here it is refused as malformed, naming the field, e.g.
/// "malformed chat/turnStarted: missing field `turnId`".
fn parse_typed(ty: &str, action: &Value) -> Result<StateAction, Rejection> {
    let typed: StateAction = serde_json::from_value(action.clone())
        .map_err(|e| Rejection(format!("malformed {ty}: {e}")))?;
    if !matches!(typed, StateAction::Unknown(_)) {
        return Ok(typed);
    }
    let why = shape_check(ty)
        .and_then(|check| check(action).err())
        .map_or_else(
            || "not a valid action of this type".to_owned(),
            |e| e.to_string(),
        );
    Err(Rejection(format!("malformed {ty}: {why}")))
}

type ShapeCheck = fn(&Value) -> Result<(), ShapeError>;

/// Where and why an action does not read as its type. It names the field by
/// its whole path (`missing field `message.origin``), so a client finds it
/// in a nested object.
#[derive(Debug, thiserror::Error)]
#[error("{}", self.described())]
struct ShapeError {
    path: String,
    #[source]
    inner: serde_json::Error,
}

impl ShapeError {
    fn described(&self) -> String {
        let inner = self.inner.to_string();
        let missing = inner
            .strip_prefix("missing field `")
            .and_then(|r| r.strip_suffix('`'));
        match (self.path.as_str(), missing) {
            (".", _) => inner,
            (path, Some(field)) => format!("missing field `{path}.{field}`"),
            (path, None) => format!("{inner} (at `{path}`)"),
        }
    }
}

/// The action read as `T`.
fn shape<T: DeserializeOwned>(v: &Value) -> Result<(), ShapeError> {
    serde_path_to_error::deserialize::<_, T>(v)
        .map(drop)
        .map_err(|e| ShapeError {
            path: e.path().to_string(),
            inner: e.into_inner(),
        })
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
        assert!(e.0.contains("only be dispatched by the host"));
        let e = client_may_dispatch(ChannelKind::Session, "chat/turnStarted").unwrap_err();
        assert!(e.0.contains("does not belong"));
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
        let e = parse_client_action(ChannelKind::Chat, &no_id).unwrap_err();
        assert_eq!(e.0, "malformed chat/turnStarted: missing field `turnId`");
        let mut ok = no_id.clone();
        ok["turnId"] = "t".into();
        assert!(matches!(
            parse_client_action(ChannelKind::Chat, &ok).map(|a| a.action),
            Ok(StateAction::ChatTurnStarted(_))
        ));
        let e = parse_client_action(
            ChannelKind::Session,
            &serde_json::json!({"type": "session/titleChanged", "title": 7}),
        )
        .unwrap_err();
        assert!(
            e.0.starts_with("malformed session/titleChanged: invalid type"),
            "{e}"
        );
        let mut no_origin = ok.clone();
        no_origin["message"] = serde_json::json!({"text": "x"});
        let e = parse_client_action(ChannelKind::Chat, &no_origin).unwrap_err();
        assert_eq!(
            e.0, "malformed chat/turnStarted: missing field `message.origin`",
            "the whole path"
        );
        for (action, why) in [
            (Value::Null, "field `action` is missing"),
            (
                serde_json::json!("chat/turnStarted"),
                "field `action` is not an object",
            ),
            (
                serde_json::json!({"turnId": "t"}),
                "field `action.type` is missing or not a string",
            ),
        ] {
            assert_eq!(
                parse_client_action(ChannelKind::Chat, &action)
                    .unwrap_err()
                    .0,
                why
            );
        }
    }

    #[test]
    fn an_opt_in_is_parsed_with_its_entry_and_put_back_on_the_wire() {
        let set = serde_json::json!({"type": "session/activeClientSet", "activeClient":
            {"clientId": "a", "tools": [], "systemMessageTransform": {"sections": ["tone"]}}});
        let a = parse_client_action(ChannelKind::Session, &set).unwrap();
        assert_eq!(
            a.opt_in.as_ref().unwrap().sections,
            vec!["tone".to_string()]
        );
        assert_eq!(a.to_json(), set);
        let bad = serde_json::json!({"type": "session/activeClientSet", "activeClient":
            {"clientId": "a", "tools": [], "systemMessageTransform": {"sections": "tone"}}});
        let e = parse_client_action(ChannelKind::Session, &bad).unwrap_err();
        assert!(e.0.contains("systemMessageTransform.sections"), "{e}");
    }
}
