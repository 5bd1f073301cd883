//! The seam between the host and whatever runs the agent: the host tells its
//! backend what clients did, as typed, named phases, after it has applied and
//! broadcast the change; the backend answers with typed actions
//! (`Host::dispatch`).

use std::collections::BTreeSet;

use ahp_bridge_policy::OptIn;
use ahp_types::actions::{ChatInputCompletedAction, SessionConfigChangedAction, StateAction};
use ahp_types::state::{PendingMessageKind, SessionActiveClient, ToolCallResult, ToolDefinition};

/// What happened in a session that the agent must act on.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientPhase {
    /// A client started a turn on `chat`; `model`: the message chose one.
    TurnStarted {
        chat: String,
        turn_id: String,
        text: String,
        model: Option<String>,
        /// The custom agent the message was sent with (its `uri`).
        agent: Option<String>,
        by: Dispatcher,
    },
    /// A client queued a message, or left one to steer the running turn.
    PendingMessageSet { chat: String, steering: bool },
    /// A client cancelled the running turn on `chat`.
    TurnCancelled { chat: String },
    /// A client approved or denied a tool call waiting for confirmation.
    ToolCallConfirmed {
        tool_call_id: String,
        approved: bool,
    },
    /// The owner of a client tool finished running it.
    ToolCallCompleted {
        tool_call_id: String,
        result: ToolCallResult,
    },
    /// A client answered (or declined) an input request.
    InputCompleted(ChatInputCompletedAction),
    /// A client changed the session's config (the keys it changed).
    ConfigChanged(SessionConfigChangedAction),
    /// A client set (or replaced) its active-client entry: its plugins may
    /// have changed.
    ActiveClientSet { client_id: String },
    /// An active client left the session: it removed itself, unsubscribed, or
    /// its grace period ran out after it disconnected. Raised in one place,
    /// whatever removed it.
    ActiveClientRemoved { client_id: String },
}

/// Who dispatched a client's action, as the agent may need it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Dispatcher {
    /// The name of the connection's principal (the operator's, from the config).
    pub principal: String,
    /// The client that dispatched it.
    pub client_id: String,
    /// The W3C `traceparent` the `dispatchAction` carried in `_meta`.
    pub traceparent: Option<String>,
}

impl ClientPhase {
    /// The phase an applied action raises; `by`: a client dispatched it.
    /// Only a client's own actions start, cancel, confirm or complete; the
    /// removal of an active client is raised whoever dispatched it.
    pub fn of(action: &StateAction, channel: &str, by: Option<&Dispatcher>) -> Option<Self> {
        Some(match (action, by) {
            (StateAction::SessionActiveClientRemoved(a), _) => Self::ActiveClientRemoved {
                client_id: a.client_id.clone(),
            },
            (_, None) => return None,
            (StateAction::SessionActiveClientSet(a), Some(_)) => Self::ActiveClientSet {
                client_id: a.active_client.client_id.clone(),
            },
            (StateAction::ChatTurnStarted(a), Some(by)) => Self::TurnStarted {
                chat: channel.to_owned(),
                turn_id: a.turn_id.clone(),
                text: a.message.text.clone(),
                model: a.message.model.as_ref().map(|m| m.id.clone()),
                agent: a.message.agent.as_ref().map(|a| a.uri.clone()),
                by: by.clone(),
            },
            (StateAction::ChatPendingMessageSet(a), _) => Self::PendingMessageSet {
                chat: channel.to_owned(),
                steering: a.kind == PendingMessageKind::Steering,
            },
            (StateAction::ChatTurnCancelled(_), _) => Self::TurnCancelled {
                chat: channel.to_owned(),
            },
            (StateAction::ChatToolCallConfirmed(a), _) => Self::ToolCallConfirmed {
                tool_call_id: a.tool_call_id.clone(),
                approved: a.approved,
            },
            (StateAction::ChatToolCallComplete(a), _) => Self::ToolCallCompleted {
                tool_call_id: a.tool_call_id.clone(),
                result: a.result.clone(),
            },
            (StateAction::ChatInputCompleted(a), _) => Self::InputCompleted(a.clone()),
            (StateAction::SessionConfigChanged(a), Some(_)) => Self::ConfigChanged(a.clone()),
            _ => return None,
        })
    }
}

/// What runs the agent behind the host.
pub trait Backend: Send + Sync + 'static {
    /// A session exists in state with lifecycle `creating`; end it with
    /// `session/ready` or `session/creationFailed`.
    fn session_created(&self, session: &str);
    /// A session was disposed.
    fn session_disposed(&self, session: &str);
    /// A session came back from the store after a restart, `ready`, with the
    /// reference the backend gave it (`BackendView::set_backend_ref`).
    fn session_restored(&self, _session: &str, _backend_ref: Option<&str>) {}
    /// `principal` gave a token with `authenticate`
    /// (`BackendView::github_token_for` has it).
    fn authenticated(&self, _principal: &str) {}
    /// Something happened in `session` that the agent must act on.
    fn phase(&self, session: &str, phase: ClientPhase);
}

/// An active client as the agent needs it: its tools and its
/// `systemMessageTransform.sections` opt-in, as the client sent them.
#[derive(Debug, Clone, PartialEq)]
pub struct ActiveClientView {
    pub client_id: String,
    pub tools: Vec<ToolDefinition>,
    pub opt_in: Vec<String>,
    /// The sections its principal may transform: `None` for any the policy
    /// allows, empty without the `transform` role (or once it is gone).
    pub transform_sections: Option<BTreeSet<String>>,
    /// The plugins it publishes (`customizations` of its entry).
    pub plugins: Vec<ClientPlugin>,
    /// Whether its principal has the `customize` role.
    pub may_customize: bool,
    /// Who it is: its principal while it has one (connected or in its
    /// grace), with its roles and claims (the operator's Rego policy reads them).
    pub subject: ahp_bridge_policy::Subject,
}

/// A client's opt-in as the transform core sees it: its opt-in and its
/// principal's allow-list, which the policy evaluates.
impl From<&ActiveClientView> for OptIn {
    fn from(c: &ActiveClientView) -> Self {
        OptIn {
            client_id: c.client_id.clone(),
            sections: c.opt_in.clone(),
            allowed: c.transform_sections.clone(),
            subject: c.subject.clone(),
        }
    }
}

/// A plugin a client publishes, as the host reads it: where, and the
/// version token that says when to read it again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientPlugin {
    pub id: String,
    pub uri: String,
    pub name: String,
    pub nonce: Option<String>,
}

impl ClientPlugin {
    /// The plugins an active-client entry publishes.
    pub(crate) fn all_of(c: &SessionActiveClient) -> Vec<Self> {
        c.customizations
            .iter()
            .flatten()
            .map(|p| Self {
                id: p.id.clone(),
                uri: p.uri.clone(),
                name: p.name.clone(),
                nonce: p.nonce.clone(),
            })
            .collect()
    }
}

/// A turn the host started from the queue, for the agent to run.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedTurn {
    pub turn_id: String,
    pub text: String,
    pub model: Option<String>,
    /// The custom agent the message chose (its `uri`).
    pub agent: Option<String>,
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn action(v: Value) -> StateAction {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn phases_of_actions() {
        let started = action(json!({"type": "chat/turnStarted", "turnId": "t",
            "startedAt": "2026-01-01T00:00:00Z", "message": {"text": "hi", "origin": {"kind": "user"}}}));
        let by = Dispatcher {
            principal: "local".into(),
            client_id: "c1".into(),
            traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into()),
        };
        assert_eq!(
            ClientPhase::of(&started, "ahp-chat:/a", Some(&by)),
            Some(ClientPhase::TurnStarted {
                chat: "ahp-chat:/a".into(),
                turn_id: "t".into(),
                text: "hi".into(),
                model: None,
                agent: None,
                by: by.clone(),
            })
        );
        // The host's own actions raise nothing but a removal.
        assert_eq!(ClientPhase::of(&started, "ahp-chat:/a", None), None);
        let removed = action(json!({"type": "session/activeClientRemoved", "clientId": "c"}));
        for by in [Some(&by), None] {
            assert_eq!(
                ClientPhase::of(&removed, "ahp-session:/a", by),
                Some(ClientPhase::ActiveClientRemoved {
                    client_id: "c".into()
                })
            );
        }
        let title = action(json!({"type": "session/titleChanged", "title": "x"}));
        assert_eq!(ClientPhase::of(&title, "ahp-session:/a", Some(&by)), None);
    }
}
