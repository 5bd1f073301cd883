//! The host: its state behind one lock, and the one path every action takes
//! (check, apply with the official reducer, sequence, buffer for replay,
//! broadcast, then raise the phase it means to the backend).
//!
//! The lock is a `std::sync::Mutex`, never held across an await: sends to
//! clients are queued without waiting (see [`super::outbound`]), so a slow
//! client cannot stall the host. The backend is called after the lock is
//! released, so it may call back into the host.
//!
//! Connections and presence live in [`super::clients`], the client requests
//! in [`super::methods`].

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use ahp_types::actions::StateAction;
use ahp_types::state::RootState;
use serde_json::{json, Value};
use tracing::debug;

use super::access::check_action;
use super::auth::{Principal, Principals};
use super::backend::{ActiveClientView, Backend, ClientPhase};
use super::clients::ConnId;
use super::cursor::CursorKey;
use super::dispatch::{client_may_dispatch, needs_tool_owner, parse_client_action};
use super::extension::opted_in_sections;
use super::outbound::DeltaKey;
use super::session_config::chosen_model;
use super::state::{Replayed, State, PROVIDER};
use super::uri::{channel_kind, ChannelKind, ROOT_URI};
use crate::config::Config;
use crate::jsonrpc;
use crate::policy::PolicyReader;

pub struct Host {
    pub(super) cfg: Arc<Config>,
    principals: Principals,
    state: Mutex<State>,
    backend: OnceLock<Arc<dyn Backend>>,
    /// Where sessions outlive the process; none: they live in memory only.
    pub(super) store: OnceLock<crate::store::Store>,
    /// The models this host offers, the default first (`[runtime] model`, `models`).
    pub(super) models: Vec<String>,
    /// Tokens clients gave with `authenticate`, by principal.
    pub(super) tokens: super::authenticate::Tokens,
    /// How many connections are open, for a shutdown to wait on.
    pub(super) connections: tokio::sync::watch::Sender<usize>,
    pub(super) grace_timers_fired: AtomicU64,
    /// The policy in force: the catalogue advertises its hidden sections.
    policy: PolicyReader,
    /// Seals and opens this instance's paging cursors.
    pub(super) cursors: CursorKey,
    /// Bounds the file requests running at once (see [`super::resources`]).
    pub(super) file_workers: Arc<tokio::sync::Semaphore>,
}

/// Who dispatched an action: the host itself, or a client (echoed with `origin`).
pub(super) enum Origin {
    Host,
    Client(Value),
}

impl Host {
    pub fn new(cfg: Arc<Config>, policy: PolicyReader) -> Arc<Self> {
        let models = super::session_config::configured_models(&cfg);
        let root: RootState = serde_json::from_value(json!({
            "agents": [{
                "provider": PROVIDER,
                "displayName": "GitHub Copilot",
                "description": "The GitHub Copilot agent runtime, through ahp-copilot-bridge",
                "models": models.iter().map(|m| json!({"id": m, "provider": PROVIDER, "name": m})).collect::<Vec<_>>(),
                "protectedResources": super::authenticate::protected_resources(&cfg),
            }],
            "activeSessions": 0,
        }))
        .expect("static root state");
        Arc::new(Self {
            policy,
            principals: Principals::from_config(&cfg),
            cfg,
            state: Mutex::new(State::new(root)),
            backend: OnceLock::new(),
            store: OnceLock::new(),
            tokens: Default::default(),
            models,
            connections: tokio::sync::watch::Sender::new(0),
            grace_timers_fired: Default::default(),
            cursors: CursorKey::random(),
            file_workers: Arc::new(tokio::sync::Semaphore::new(super::resources::FILE_WORKERS)),
        })
    }

    pub fn config(&self) -> &Arc<Config> {
        &self.cfg
    }

    /// The sections the catalogue marks `restricted` (no client ever sees them).
    pub fn hidden_sections(&self) -> Vec<String> {
        self.policy.current().hidden_sections()
    }

    /// Who may connect.
    pub fn principals(&self) -> &Principals {
        &self.principals
    }

    pub fn set_backend(&self, backend: Arc<dyn Backend>) {
        let _ = self.backend.set(backend);
    }

    pub(super) fn backend(&self) -> Option<Arc<dyn Backend>> {
        self.backend.get().cloned()
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    // ── the action path ──────────────────────────────────────────────────

    /// A host-originated action: applied, sequenced, buffered and broadcast.
    pub fn server_action(&self, channel: &str, action: Value) -> Result<u64, String> {
        let typed: StateAction =
            serde_json::from_value(action.clone()).map_err(|e| format!("malformed action: {e}"))?;
        let (seq, session) = {
            let mut st = self.lock();
            st.apply(channel, &typed, &action)?;
            let session = st.session_of(channel).map(String::from);
            let seq = self.commit(&mut st, channel, &action, &typed, Origin::Host);
            (seq, session)
        };
        self.raise(session, &typed, channel, false);
        Ok(seq)
    }

    /// `dispatchAction` from a client: checked against the table and the
    /// sending connection, applied, echoed to subscribers with `origin`; a
    /// refused action goes back to the sender alone with `rejectionReason`.
    pub fn client_dispatch(&self, conn: ConnId, params: &Value) {
        let Some((client_id, principal)) = self.identity_of(conn) else {
            return;
        };
        let channel = params
            .get("channel")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let client_seq = params.get("clientSeq").cloned().unwrap_or(json!(0));
        let action = params.get("action").cloned().unwrap_or(Value::Null);
        let origin = json!({"clientId": client_id, "clientSeq": client_seq});
        let outcome =
            self.try_client_action(&principal, &client_id, &channel, &action, origin.clone());
        debug!(principal = %principal.name, client_id = ?client_id, channel = ?channel,
            action = ?action.get("type"), allowed = outcome.is_ok(), refusal = ?outcome.as_ref().err(), "authorization");
        match outcome {
            Ok((session, typed)) => self.raise(session, &typed, &channel, true),
            Err(reason) => {
                let st = self.lock();
                if let Some(c) = st.conns.get(&conn) {
                    let env = json!({"channel": channel, "action": action, "serverSeq": st.seq, "origin": origin, "rejectionReason": reason});
                    c.out
                        .send(jsonrpc::notification("action", &env).to_string());
                }
            }
        }
    }

    /// Checks, applies and commits a client's action; returns its session.
    fn try_client_action(
        &self,
        principal: &Principal,
        client_id: &str,
        channel: &str,
        action: &Value,
        origin: Value,
    ) -> Result<(Option<String>, StateAction), String> {
        let ty = action
            .get("type")
            .and_then(Value::as_str)
            .ok_or("action has no `type`")?;
        let kind = channel_kind(channel);
        client_may_dispatch(kind, ty)?;
        let bytes = action.to_string().len();
        if bytes > self.cfg.server.max_action_bytes {
            return Err(format!(
                "action of {bytes} bytes is over [server] max_action_bytes ({})",
                self.cfg.server.max_action_bytes
            ));
        }
        let typed = parse_client_action(ty, action)?;
        let opts_in = action
            .pointer("/activeClient/systemMessageTransform")
            .is_some_and(|v| !v.is_null());
        check_action(principal, &typed, opts_in)?;
        if let Some(model) = chosen_model(&typed) {
            self.check_model(model).map_err(|e| e.message)?;
        }
        let mut st = self.lock();
        if kind != ChannelKind::Root && !st.visible(principal, channel) {
            // Not visible is not there: existence is not leaked.
            return Err(format!("no such channel {channel:?}"));
        }
        match kind {
            ChannelKind::Session => match &typed {
                StateAction::SessionActiveClientSet(a)
                    if a.active_client.client_id != client_id =>
                {
                    return Err("activeClientSet may only set the sender's own clientId".into())
                }
                StateAction::SessionActiveClientRemoved(a) if a.client_id != client_id => {
                    return Err(
                        "activeClientRemoved may only remove the sender's own clientId".into(),
                    )
                }
                _ => {}
            },
            ChannelKind::Chat => {
                let (_, s) = st
                    .chats
                    .get(channel)
                    .ok_or_else(|| format!("no chat {channel}"))?;
                if needs_tool_owner(ty) {
                    let call = action
                        .get("toolCallId")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let owner = st.sessions.get(s).and_then(|e| e.tool_owners.get(call));
                    if owner.map(String::as_str) != Some(client_id) {
                        return Err(format!(
                            "{ty} may only come from the client that owns tool call {call:?}"
                        ));
                    }
                }
            }
            ChannelKind::Root => {}
            ChannelKind::Other => return Err(format!("unknown channel {channel}")),
        }
        st.apply(channel, &typed, action)?;
        let session = st.session_of(channel).map(String::from);
        self.commit(&mut st, channel, action, &typed, Origin::Client(origin));
        Ok((session, typed))
    }

    pub(super) fn commit(
        &self,
        st: &mut State,
        channel: &str,
        action: &Value,
        typed: &StateAction,
        origin: Origin,
    ) -> u64 {
        let seq = self.next_seq(st);
        let mut env = json!({"channel": channel, "action": action, "serverSeq": seq});
        if let Origin::Client(o) = origin {
            env["origin"] = o;
        }
        let notification = jsonrpc::notification("action", &env);
        let text = notification.to_string();
        // A streamed delta may be merged into the one queued before it.
        let delta = match typed {
            StateAction::ChatDelta(d) => Some((
                DeltaKey {
                    channel: channel.to_owned(),
                    turn_id: d.turn_id.clone(),
                    part_id: d.part_id.clone(),
                },
                d.content.as_str(),
            )),
            _ => None,
        };
        for c in st.conns.values() {
            if c.subs.contains(channel) {
                let delta = delta.as_ref().map(|(k, content)| (k, *content));
                c.out.send_action(&notification, &text, delta);
            }
        }
        let replayed = Replayed {
            seq,
            channel: channel.to_owned(),
            envelope: env.to_string(),
        };
        let server = &self.cfg.server;
        st.keep_for_replay(replayed, server.replay_buffer, server.replay_buffer_bytes);
        // Every applied action passes here: the one place the store hears of it.
        self.persist_after(st, channel, typed);
        seq
    }

    /// Hands the backend the phase an applied action means, if any: the one
    /// place phases are raised (the lock is released by now).
    fn raise(&self, session: Option<String>, typed: &StateAction, channel: &str, by_client: bool) {
        let (Some(session), Some(backend)) = (session, self.backend()) else {
            return;
        };
        if let Some(phase) = ClientPhase::of(typed, channel, by_client) {
            backend.phase(&session, phase);
        }
    }

    /// Sends a root notification about a session owned by `owner`
    /// (`root/sessionAdded`, ...) to the root subscribers that may see it.
    pub(super) fn notify_root(&self, owner: &str, method: &str, params: Value) {
        let st = self.lock();
        let text = jsonrpc::notification(method, &params).to_string();
        for c in st.conns.values() {
            if c.subs.contains(ROOT_URI) && c.principal.sees(owner) {
                c.out.send(text.clone());
            }
        }
    }

    // ── queries for the backend ──────────────────────────────────────────

    pub fn working_directory(&self, session: &str) -> Option<String> {
        let st = self.lock();
        st.sessions
            .get(session)?
            .state
            .working_directories
            .as_ref()?
            .first()
            .cloned()
    }

    /// The session's active clients in order, with their tools and raw opt-ins.
    pub fn active_clients(&self, session: &str) -> Vec<ActiveClientView> {
        let st = self.lock();
        let Some(s) = st.sessions.get(session) else {
            return vec![];
        };
        s.state
            .active_clients
            .iter()
            .map(|c| ActiveClientView {
                transform_sections: st
                    .clients
                    .get(&c.client_id)
                    .map_or(Some(Default::default()), |p| {
                        p.principal.transform_sections()
                    }),
                client_id: c.client_id.clone(),
                tools: c
                    .tools
                    .iter()
                    .filter_map(|t| serde_json::to_value(t).ok())
                    .collect(),
                opt_in: opted_in_sections(s.opt_ins.get(&c.client_id)),
            })
            .collect()
    }

    /// Records the contributor of a client tool call, so only it may complete it.
    pub fn set_tool_owner(&self, session: &str, tool_call_id: &str, client_id: &str) {
        if let Some(s) = self.lock().sessions.get_mut(session) {
            s.tool_owners
                .insert(tool_call_id.to_owned(), client_id.to_owned());
        }
    }
}
