//! What a client's action must pass beyond its principal's roles: the
//! checks only the state can answer (a client sets only its own entry,
//! answers only its own tool calls), and what its fields must be (a
//! working directory the runtime can be given). Pure functions of the
//! action and the sessions' state.

use ahp_types::actions::StateAction;

use super::sessions::Sessions;
use crate::protocol::actions::Rejection;
use crate::protocol::uri::working_directory;

/// The checks only state can answer: a client sets and removes only its own
/// active-client entry, and completes only tool calls it contributed.
pub(super) fn check_own(
    sessions: &Sessions,
    channel: &str,
    client_id: &str,
    action: &StateAction,
) -> Result<(), Rejection> {
    match action {
        StateAction::SessionActiveClientSet(a) if a.active_client.client_id != client_id => {
            Err("activeClientSet may only set the sender's own clientId".into())
        }
        StateAction::SessionActiveClientRemoved(a) if a.client_id != client_id => {
            Err("activeClientRemoved may only remove the sender's own clientId".into())
        }
        StateAction::ChatToolCallConfirmed(a) => {
            pending_confirmation(sessions, channel, &a.tool_call_id)
        }
        StateAction::ChatToolCallComplete(a) => tool_owner_is(
            sessions,
            channel,
            client_id,
            &a.tool_call_id,
            "chat/toolCallComplete",
        ),
        StateAction::ChatToolCallContentChanged(a) => tool_owner_is(
            sessions,
            channel,
            client_id,
            &a.tool_call_id,
            "chat/toolCallContentChanged",
        ),
        _ => Ok(()),
    }
}

/// A confirmation answers only a tool call that waits for one.
fn pending_confirmation(
    sessions: &Sessions,
    chat: &str,
    tool_call_id: &str,
) -> Result<(), Rejection> {
    use ahp_types::state::ToolCallState as T;
    let state = sessions.tool_call(chat, tool_call_id).map(|(_, call)| call);
    let now = match state {
        Some(T::PendingConfirmation(_)) => return Ok(()),
        None => "no such tool call in the running turn",
        Some(T::Streaming(_)) => "it is still streaming",
        Some(T::Running(_)) => "it is already running",
        Some(T::Completed(_)) => "it has completed",
        Some(T::Cancelled(_)) => "it was cancelled",
        Some(_) => "it is not waiting for confirmation",
    };
    Err(Rejection(format!(
        "chat/toolCallConfirmed for tool call {tool_call_id:?}, which is not pending confirmation: {now}"
    )))
}

fn tool_owner_is(
    sessions: &Sessions,
    chat: &str,
    client_id: &str,
    tool_call_id: &str,
    ty: &str,
) -> Result<(), Rejection> {
    if sessions.tool_call_owner(chat, tool_call_id) == Some(client_id) {
        Ok(())
    } else {
        Err(Rejection(format!(
            "{ty} may only come from the client that owns tool call {tool_call_id:?}"
        )))
    }
}

/// Whether a client's action starts a turn, now or once queued: what
/// `turns_per_minute` counts.
pub(super) fn starts_turn(action: &StateAction) -> bool {
    use ahp_types::state::PendingMessageKind;
    match action {
        StateAction::ChatTurnStarted(_) => true,
        StateAction::ChatPendingMessageSet(a) => a.kind == PendingMessageKind::Queued,
        _ => false,
    }
}

/// A working directory a client sets must be one the runtime can be
/// given and files read from, as `createSession` demands of its own.
pub(super) fn check_directories(action: &StateAction) -> Result<(), Rejection> {
    let (field, uri) = match action {
        StateAction::SessionWorkingDirectorySet(a) => ("directory", &a.directory),
        StateAction::SessionWorkingDirectoryReplaced(a) => ("replacement", &a.replacement),
        StateAction::ChatWorkingDirectorySet(a) => ("directory", &a.directory),
        _ => return Ok(()),
    };
    working_directory(uri)
        .map(drop)
        .map_err(|e| Rejection(format!("field `{field}`: {e}")))
}

/// The model a message chooses, in an action that carries a message.
pub(super) fn chosen_model(action: &StateAction) -> Option<&str> {
    let message = match action {
        StateAction::ChatTurnStarted(a) => &a.message,
        StateAction::ChatPendingMessageSet(a) => &a.message,
        _ => return None,
    };
    message.model.as_ref().map(|m| m.id.as_str())
}
