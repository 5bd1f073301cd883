//! What the backend (the bridge) asks of the host's state while it runs a
//! session: its directories, customizations and active clients, a tool
//! call, the queued and steering messages it consumes, the model, who
//! started it and with which token. [`BackendView`] is what the host lends
//! for it (`Host::for_backend`), over its core and its credentials.

use std::path::PathBuf;

use ahp_types::actions::{ChatPendingMessageRemovedAction, ChatTurnStartedAction, StateAction};
use ahp_types::state::{Customization, PendingMessageKind, ToolCallState};

use super::core::Core;
use super::credentials::Credentials;
use super::session_start::SessionStart;
use super::sessions::now_iso;
use crate::backend::{ActiveClientView, ClientPlugin, QueuedTurn};
use crate::protocol::uri::working_directory;
use ahp_bridge_base::config::Role;
use ahp_bridge_policy::{ClientKind, Subject};
use ahp_bridge_store::TurnChanges;

/// The host's state as the backend reads and consumes it, lent by
/// `Host::for_backend`.
pub struct BackendView<'h> {
    core: &'h Core,
    credentials: &'h Credentials,
}

impl<'h> BackendView<'h> {
    pub(super) fn new(core: &'h Core, credentials: &'h Credentials) -> Self {
        Self { core, credentials }
    }

    /// The session's working directories, as local paths (the first is
    /// the runtime's; a policy reads them all).
    pub fn working_directories(&self, session: &str) -> Vec<PathBuf> {
        let st = self.core.lock();
        let Some(dirs) = st
            .sessions
            .state(session)
            .and_then(|s| s.working_directories.clone())
        else {
            return vec![];
        };
        dirs.iter()
            .filter_map(|d| working_directory(d).ok())
            .collect()
    }

    /// The session's customizations as its state holds them now (the
    /// clients' toggles applied by the reducer), empty when it has none.
    pub fn session_customizations(&self, session: &str) -> Vec<Customization> {
        let st = self.core.lock();
        st.sessions
            .state(session)
            .and_then(|s| s.customizations.clone())
            .unwrap_or_default()
    }

    /// The session's active clients in order, with their tools and opt-ins.
    pub fn active_clients(&self, session: &str) -> Vec<ActiveClientView> {
        let st = self.core.lock();
        let Some(state) = st.sessions.state(session) else {
            return vec![];
        };
        state
            .active_clients
            .iter()
            .map(|c| {
                let p = st.clients.principal_of_client(&c.client_id);
                ActiveClientView {
                    transform_sections: p
                        .map_or(Some(Default::default()), |p| p.transform_sections()),
                    plugins: ClientPlugin::all_of(c),
                    may_customize: p.is_some_and(|p| p.has(Role::Customize)),
                    subject: p.map_or_else(
                        || Subject::client(&c.client_id, ClientKind::Ahp),
                        |p| p.subject(Some(&c.client_id), ClientKind::Ahp),
                    ),
                    client_id: c.client_id.clone(),
                    tools: c.tools.clone(),
                    opt_in: st
                        .sessions
                        .opt_in(session, &c.client_id)
                        .map(|o| o.sections.clone())
                        .unwrap_or_default(),
                }
            })
            .collect()
    }

    /// The running turn's id and tool call `tool_call_id` in `chat`, as the state has it now.
    pub fn tool_call(&self, chat: &str, tool_call_id: &str) -> Option<(String, ToolCallState)> {
        let st = self.core.lock();
        let (turn, call) = st.sessions.chats().tool_call(chat, tool_call_id)?;
        Some((turn.to_owned(), call.clone()))
    }

    /// Starts the first queued message of `chat` as a turn, if the chat has
    /// no active turn: `chat/pendingMessageRemoved`, then `chat/turnStarted`
    /// with its `queuedMessageId`, under one lock, so two consumers cannot
    /// both take it. `None` when nothing is queued or a turn runs.
    pub fn start_next_queued(&self, chat: &str) -> Option<QueuedTurn> {
        let mut st = self.core.lock();
        let q = st.sessions.chats().next_queued(chat)?.clone();
        let turn_id = uuid::Uuid::new_v4().to_string();
        let removed = StateAction::ChatPendingMessageRemoved(ChatPendingMessageRemovedAction {
            kind: PendingMessageKind::Queued,
            id: q.id.clone(),
        });
        let started = StateAction::ChatTurnStarted(ChatTurnStartedAction {
            turn_id: turn_id.clone(),
            started_at: now_iso(),
            message: q.message.clone(),
            queued_message_id: Some(q.id),
            meta: None,
        });
        self.core.apply_all(&mut st, chat, [removed, started])?;
        Some(QueuedTurn {
            turn_id,
            text: q.message.text,
            model: q.message.model.map(|m| m.id),
            agent: q.message.agent.map(|a| a.uri),
        })
    }

    /// Takes the steering message of `chat` out of the state; its text.
    pub fn take_steering(&self, chat: &str) -> Option<String> {
        let mut st = self.core.lock();
        let m = st.sessions.chats().chat(chat)?.steering_message.clone()?;
        let removed = StateAction::ChatPendingMessageRemoved(ChatPendingMessageRemovedAction {
            kind: PendingMessageKind::Steering,
            id: m.id,
        });
        self.core.apply_all(&mut st, chat, [removed])?;
        Some(m.message.text)
    }

    /// The model a session's turns use unless a message chooses another.
    pub fn session_model(&self, uri: &str) -> Option<String> {
        self.core.lock().sessions.model_of(uri)
    }

    /// Who created `session` and the section text it was created with (in
    /// front of the runtime's AHP host).
    pub fn session_start(&self, uri: &str) -> Option<SessionStart> {
        self.core.lock().sessions.start_of(uri)
    }

    /// The GitHub token the owner of `session` gave, if any.
    pub fn github_token_for(&self, session: &str) -> Option<String> {
        let owner = self.core.lock().sessions.owner(session)?.to_owned();
        self.credentials.tokens().get(&owner)
    }

    /// Records what the backend needs to find a session again.
    pub fn set_backend_ref(&self, session: &str, backend_ref: &str) {
        let st = self.core.lock();
        let none = TurnChanges::default();
        self.core
            .durable()
            .save(&st.sessions, session, Some(backend_ref), &none);
    }
}
