//! What the host sends, carried to the bridge's own state: a chat action
//! on the session's north chat as it came (the turn ids are the ones the
//! bridge's clients chose), a session's input requests with their chat
//! renamed, the rest of the session's own bookkeeping left upstream (the
//! bridge keeps its sessions' lifecycle, clients and config itself). The
//! bridge's own actions come back as echoes and are dropped: the north
//! applied them when its client dispatched them. A pending tool call is
//! decided by the policy first.

use std::sync::Arc;

use ahp::{ClientEvent, SubscriptionEvent};
use ahp_types::actions::{
    ActionEnvelope, ChatToolCallConfirmedAction, ChatToolCallReadyAction,
    SessionConfigChangedAction, StateAction,
};
use ahp_types::state::{
    SessionInputRequest, ToolCallConfirmationReason, ToolCallConfirmationState,
};
use tracing::{debug, info, warn};

use super::session_map::{Relayed, Side, Turn};
use super::Relay;

/// Carries one event of the host.
pub(super) async fn handle(relay: &Arc<Relay>, ev: ClientEvent) {
    let SubscriptionEvent::Action(env) = ev.event else {
        // The host's own catalogue notifications: the bridge keeps its own.
        return;
    };
    let Some((r, side)) = relay.sessions.of_up(&env.channel) else {
        return;
    };
    if let Some(origin) = &env.origin {
        if origin.client_id == relay.client_id {
            echo(relay, &r, &env);
            return;
        }
    }
    match side {
        Side::Chat => chat_action(relay, &r, env.action).await,
        Side::Session => session_action(relay, &r, env.action),
    }
}

/// The host's echo of the bridge's own action: dropped, but a refusal of a
/// turn ends the turn here, in the host's words.
fn echo(relay: &Relay, r: &Relayed, env: &ActionEnvelope) {
    let Some(why) = &env.rejection_reason else {
        return;
    };
    if let StateAction::ChatTurnStarted(a) = &env.action {
        let refused = |r: &mut Relayed| r.turn.take_if(|t| t.up_id == a.turn_id);
        let Some(turn) = relay.sessions.with(&r.north, refused).flatten() else {
            return;
        };
        relay.end_turn_north(&r.north, &turn.id, why);
    } else {
        crate::telemetry::metrics().runtime_mismatch("agent_host_rejection");
        info!(session = %r.north, "the agent host refused an action of the bridge: {why}");
    }
}

async fn chat_action(relay: &Arc<Relay>, r: &Relayed, mut action: StateAction) {
    // The host's pending messages are the steering ones the bridge sent it
    // (the bridge starts queued messages itself); the bridge keeps its own.
    if matches!(
        action,
        StateAction::ChatPendingMessageSet(_) | StateAction::ChatPendingMessageRemoved(_)
    ) {
        return;
    }
    if let StateAction::ChatError(e) = &action {
        if relay.send_again_if_cancelling(r, e) {
            return;
        }
    }
    // A turn the host starts itself (a steering message it took up after
    // a tool) is the running one here, so a cancel, a confirmation and the
    // silence deadline reach it.
    if let StateAction::ChatTurnStarted(a) = &action {
        let adopted = Turn::new(a.turn_id.clone(), a.message.text.clone(), None);
        relay.sessions.with(&r.north, |r| r.turn = Some(adopted));
    }
    if let Some(t) = &r.turn {
        if !t.spoke {
            relay.sessions.spoke(&r.north, &t.id);
        }
        // A turn sent again has another id upstream: its clients' id here.
        if t.up_id != t.id {
            if let Some(id) = turn_id(&mut action).filter(|id| **id == t.up_id) {
                id.clone_from(&t.id);
            }
        }
    }
    let ended = matches!(
        action,
        StateAction::ChatTurnComplete(_)
            | StateAction::ChatError(_)
            | StateAction::ChatTurnCancelled(_)
    );
    let action = match action {
        StateAction::ChatToolCallReady(a) if a.confirmed.is_none() => {
            match decide(relay, r, a).await {
                Some(a) => a,
                None => return,
            }
        }
        a => a,
    };
    relay.send_north(&r.north_chat, action);
    if ended {
        relay.sessions.with(&r.north, |r| {
            r.turn = None;
            r.decided.clear();
        });
        relay.start_queued_if_idle(&r.north);
    }
}

/// A tool call waiting on a confirmation: the policy decides before any
/// client sees it. Refused, the host is told no (its call ends failed, as
/// a client's no ends it) and the clients see it confirmed by the setting,
/// never pending; allowed and only reading under `[policy]
/// auto_approve_read_only`, the host is told yes, and the clients see the
/// same; allowed otherwise, it goes to the clients to confirm.
async fn decide(
    relay: &Arc<Relay>,
    r: &Relayed,
    mut ready: ChatToolCallReadyAction,
) -> Option<StateAction> {
    let request = ready
        .meta
        .as_ref()
        .and_then(|m| m.get("permissionRequest"))
        .cloned();
    let Some(request) = request else {
        // Nothing for the policy to read: the clients confirm it.
        relay.sessions.set_waiting(&r.north, true);
        return Some(StateAction::ChatToolCallReady(ready));
    };
    let kind = request["kind"].as_str().unwrap_or("unknown").to_owned();
    let host = relay.host()?;
    let starter = r
        .turn
        .as_ref()
        .and_then(|t| t.by.as_ref())
        .map(|d| d.client_id.clone());
    let refusal =
        crate::bridge::permission::refusal(&host, &r.north, starter.as_deref(), &request, &kind);
    let (approved, why) = match refusal {
        Some(refused) => (false, format!("Denied by policy: {refused}")),
        None if relay.settings.policy.current().auto_approves_read_only()
            && crate::policy::only_reads(&request) =>
        {
            (true, "Approved by policy: it only reads".to_owned())
        }
        None => {
            // To the clients, whose answer the turn now waits on.
            relay.sessions.set_waiting(&r.north, true);
            return Some(StateAction::ChatToolCallReady(ready));
        }
    };
    debug!(session = %r.north, tool_call = %ready.tool_call_id, approved, "the policy decided a tool call");
    relay
        .sessions
        .with(&r.north, |r| r.decided.insert(ready.tool_call_id.clone()));
    let answer = StateAction::ChatToolCallConfirmed(ChatToolCallConfirmedAction {
        turn_id: ready.turn_id.clone(),
        tool_call_id: ready.tool_call_id.clone(),
        meta: None,
        approved,
        confirmed: Some(ToolCallConfirmationReason::Setting),
        reason: None,
        edited_tool_input: None,
        user_suggestion: None,
        reason_message: Some(why.into()),
        selected_option_id: None,
    });
    if let Some(chat) = &r.up_chat {
        relay.send_up(chat, answer).await;
    }
    ready.confirmed = Some(ToolCallConfirmationReason::Setting);
    Some(StateAction::ChatToolCallReady(ready))
}

/// A session action of the host: its input requests pass (their chat
/// renamed; none for a call the policy decided), its title, and its
/// changes of the settings the bridge offers; the rest is the host's own
/// bookkeeping.
fn session_action(relay: &Relay, r: &Relayed, action: StateAction) {
    let Some(up_chat) = &r.up_chat else { return };
    let rename = |id: &str| id.replacen(up_chat.as_str(), &r.north_chat, 1);
    let action = match action {
        StateAction::SessionInputNeededSet(mut a) => {
            let (id, chat) = match &mut a.request {
                SessionInputRequest::ToolConfirmation(q) => {
                    let call = match &q.tool_call {
                        ToolCallConfirmationState::PendingConfirmation(c) => &c.tool_call_id,
                        ToolCallConfirmationState::PendingResultConfirmation(c) => &c.tool_call_id,
                        ToolCallConfirmationState::Unknown(_) => return,
                    };
                    if r.decided.contains(call) {
                        return;
                    }
                    north_turn_id(r, &mut q.turn_id);
                    (&mut q.id, &mut q.chat)
                }
                SessionInputRequest::ChatInput(q) => {
                    relay.sessions.set_waiting(&r.north, true);
                    (&mut q.id, &mut q.chat)
                }
                SessionInputRequest::ToolClientExecution(q) => {
                    north_turn_id(r, &mut q.turn_id);
                    (&mut q.id, &mut q.chat)
                }
                _ => return,
            };
            *id = rename(id);
            chat.clone_from(&r.north_chat);
            StateAction::SessionInputNeededSet(a)
        }
        StateAction::SessionInputNeededRemoved(mut a) => {
            a.id = rename(&a.id);
            StateAction::SessionInputNeededRemoved(a)
        }
        a @ StateAction::SessionTitleChanged(_) => a,
        // The host moving its own settings (approving a plan leaves plan
        // mode): those the bridge offers follow.
        StateAction::SessionConfigChanged(mut a) => {
            if let Some(back) = super::config::put_back(&a.config) {
                warn!(session = %r.north, "the agent host left a setting the bridge keeps; it is put back");
                let action = SessionConfigChangedAction {
                    config: back,
                    replace: None,
                };
                relay.queue_up(r.up.clone(), StateAction::SessionConfigChanged(action));
            }
            a.config = super::config::for_host(&a.config);
            if a.config.is_empty() {
                return;
            }
            StateAction::SessionConfigChanged(a)
        }
        _ => return,
    };
    relay.send_north(&r.north, action);
}

/// `id`, the host's id of `r`'s running turn, as the bridge's clients know it.
fn north_turn_id(r: &Relayed, id: &mut String) {
    if let Some(t) = r.turn.as_ref().filter(|t| *id == t.up_id) {
        id.clone_from(&t.id);
    }
}

/// The turn a chat action is about.
fn turn_id(action: &mut StateAction) -> Option<&mut String> {
    use StateAction as A;
    Some(match action {
        A::ChatTurnStarted(a) => &mut a.turn_id,
        A::ChatDelta(a) => &mut a.turn_id,
        A::ChatResponsePart(a) => &mut a.turn_id,
        A::ChatToolCallStart(a) => &mut a.turn_id,
        A::ChatToolCallDelta(a) => &mut a.turn_id,
        A::ChatToolCallReady(a) => &mut a.turn_id,
        A::ChatToolCallConfirmed(a) => &mut a.turn_id,
        A::ChatToolCallComplete(a) => &mut a.turn_id,
        A::ChatToolCallResultConfirmed(a) => &mut a.turn_id,
        A::ChatToolCallContentChanged(a) => &mut a.turn_id,
        A::ChatToolCallAuthRequired(a) => &mut a.turn_id,
        A::ChatToolCallAuthResolved(a) => &mut a.turn_id,
        A::ChatTurnComplete(a) => &mut a.turn_id,
        A::ChatTurnCancelled(a) => &mut a.turn_id,
        A::ChatError(a) => &mut a.turn_id,
        A::ChatTurnResume(a) => &mut a.turn_id,
        A::ChatUsage(a) => &mut a.turn_id,
        A::ChatReasoning(a) => &mut a.turn_id,
        _ => return None,
    })
}
