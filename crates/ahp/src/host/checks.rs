//! What a client's action must pass beyond its principal's roles: the
//! checks only the state can answer (a client sets only its own entry,
//! answers only its own tool calls; what a session or chat holds stays
//! within its `[server]` bound), and what its fields must be (a
//! working directory the runtime can be given, a config the schema has). Pure functions of the
//! action and the sessions' state.

use ahp_types::actions::StateAction;

use super::host_settings::HostSettings;
use super::sessions::{Sessions, MODEL_SETTING, SECTIONS_SETTING};
use crate::extension::TransformOptIn;
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

/// What a client's action would grow past its `[server]` bound, refused
/// naming the key: the reducers keep what these actions add (a session's
/// working directories for its life, stored at each boundary; a chat's
/// queued messages until they run), so without a bound a client grows a
/// session with every message (issue 44).
pub(super) fn check_bounds(
    sessions: &Sessions,
    channel: &str,
    action: &StateAction,
    settings: &HostSettings,
) -> Result<(), Rejection> {
    use ahp_types::state::PendingMessageKind;
    match action {
        // A session's list only: `chat/workingDirectorySet` is not a
        // client's action (`client_may_dispatch`).
        StateAction::SessionWorkingDirectorySet(a) => {
            let held = sessions
                .state(channel)
                .and_then(|s| s.working_directories.as_deref());
            let held = held.unwrap_or_default();
            let max = settings.server().max_working_directories;
            // A directory already held is no change (the reducer's no-op).
            if held.len() < max || held.contains(&a.directory) {
                return Ok(());
            }
            Err(Rejection(format!(
                "session/workingDirectorySet: the session holds {} working directories, the most [server] max_working_directories ({max}) allows; remove one first",
                held.len()
            )))
        }
        StateAction::ChatPendingMessageSet(a) if a.kind == PendingMessageKind::Queued => {
            let held = sessions
                .chats()
                .chat(channel)
                .and_then(|c| c.queued_messages.as_deref());
            let held = held.unwrap_or_default();
            let max = settings.server().max_queued_messages;
            // A message already queued is replaced in place.
            if held.len() < max || held.iter().any(|m| m.id == a.id) {
                return Ok(());
            }
            Err(Rejection(format!(
                "chat/pendingMessageSet: the chat holds {} queued messages, the most [server] max_queued_messages ({max}) allows; wait for one to run or remove one",
                held.len()
            )))
        }
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
    let state = sessions
        .chats()
        .tool_call(chat, tool_call_id)
        .map(|(_, call)| call);
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
    if sessions.chats().tool_call_owner(chat, tool_call_id) == Some(client_id) {
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

/// A client's `session/configChanged` holds only this host's settings, as
/// `createSession.config` must (the schema `resolveSessionConfig` offers:
/// the model, a string, which models [`chosen_model`] and the host check;
/// and the backend's session-mutable settings, each held to its schema).
/// The reducer merges every key it is given into the session's state for
/// good, stored at each boundary: a key outside the schema would be kept,
/// and a client changing keys would grow the session with every message
/// (issue 44).
pub(super) fn check_config(settings: &HostSettings, action: &StateAction) -> Result<(), Rejection> {
    let StateAction::SessionConfigChanged(a) = action else {
        return Ok(());
    };
    for (key, value) in &a.config {
        if key == SECTIONS_SETTING {
            return Err(Rejection(format!(
                "config.{SECTIONS_SETTING} is fixed when the session is created"
            )));
        }
        if key == MODEL_SETTING {
            if !value.is_string() {
                return Err(Rejection(format!(
                    "config.{MODEL_SETTING} must be a string"
                )));
            }
            continue;
        }
        match settings.backend_config().check(key, value, true) {
            Ok(true) => {}
            Ok(false) => {
                return Err(Rejection(format!(
                    "config.{key:?} is not a setting of this host (see resolveSessionConfig)"
                )))
            }
            Err(why) => return Err(Rejection(why.0)),
        }
    }
    Ok(())
}

/// What a client opting in to `systemMessageTransform` is told in front of
/// the runtime's own AHP host, which has no transform hook.
pub(crate) const ADDITIONS_ONLY: &str = "this runtime takes section text only at creation: \
     send config.systemMessageSections in createSession (systemMessageTransform is not offered)";

/// A transform opt-in, refused where sessions take section text at
/// creation instead.
pub(crate) fn check_opt_in(
    settings: &HostSettings,
    opt_in: &TransformOptIn,
) -> Result<(), Rejection> {
    if settings.additions() && !opt_in.sections.is_empty() {
        return Err(Rejection(ADDITIONS_ONLY.to_owned()));
    }
    Ok(())
}

/// The model an action chooses: a message's, or a session config's.
pub(super) fn chosen_model(action: &StateAction) -> Option<&str> {
    let message = match action {
        StateAction::ChatTurnStarted(a) => &a.message,
        StateAction::ChatPendingMessageSet(a) => &a.message,
        StateAction::SessionConfigChanged(a) => return a.config.get(MODEL_SETTING)?.as_str(),
        _ => return None,
    };
    message.model.as_ref().map(|m| m.id.as_str())
}
