//! The host: its state behind one lock, split into parts that each own
//! their fields ([`sessions::Sessions`]: the AHP state; [`clients::Clients`]:
//! connections and presence; [`replay::ActionLog`]: `serverSeq` and replay;
//! [`durable::Durable`]: the store), and the one path every action takes:
//! check, apply with the official reducer, sequence, keep for replay,
//! broadcast, store at a boundary, then raise the phase it means to the
//! backend. The operations commands and the backend call are in [`api`];
//! a reload of who may connect, and the closing of revoked connections, in
//! [`credentials`].
//!
//! The lock is a `std::sync::Mutex`, never held across an await: sends to
//! clients are queued without waiting (see [`outbound`]), so a slow client
//! cannot stall the host. The backend is called after the lock is released,
//! so it may call back into the host.

use crate::telemetry::Escaped;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};

use ahp_types::actions::{ActionOrigin, StateAction};
use ahp_types::state::RootState;
use serde_json::{json, Value};
use tracing::debug;

use self::clients::{Clients, ConnId};
use self::durable::{is_boundary, Durable};
use self::outbound::DeltaKey;
use self::replay::ActionLog;
use self::sessions::{now_iso, Sessions, PROVIDER};
use super::auth::access::check_action;
use super::auth::limits::Limits;
use super::auth::tokens::Tokens;
use super::auth::{Principal, Principals};
use super::backend::{Backend, ClientPhase, Dispatcher};
use super::channels;
use super::protocol::actions::{parse_client_action, Action, Rejection};
use super::protocol::params::DispatchAction;
use super::protocol::uri::{channel_kind, working_directory, ChannelKind, ROOT_URI};
use super::protocol::versions::Version;
use crate::config::Config;
use crate::jsonrpc;
use crate::policy::PolicyReader;

pub mod api;
pub mod clients;
mod credentials;
mod durable;
mod extensions;
pub mod outbound;
mod replay;
pub mod sessions;
pub mod subscriptions;

pub use sessions::NewSession;

pub struct Host {
    cfg: Arc<Config>,
    /// Who may connect; a reload replaces it ([`credentials`]).
    principals: RwLock<Arc<Principals>>,
    /// How much each principal may do, and what it has used.
    limits: Limits,
    /// The policy in force: the catalogue advertises its hidden sections.
    policy: PolicyReader,
    state: Mutex<State>,
    backend: OnceLock<Arc<dyn Backend>>,
    durable: Durable,
    /// The models this host offers, the default first (`[runtime] model`, `models`).
    models: Vec<String>,
    /// Tokens clients gave with `authenticate`, by principal.
    tokens: Tokens,
    /// How many connections are open, for a shutdown to wait on.
    connections: tokio::sync::watch::Sender<usize>,
    /// Bumped at every turn end (and other boundaries), for a revoked
    /// connection waiting on its running turn.
    boundaries: tokio::sync::watch::Sender<u64>,
    grace_timers_fired: AtomicU64,
}

/// Everything behind the lock: each part changes only through its own methods.
struct State {
    sessions: Sessions,
    clients: Clients,
    log: ActionLog,
    extensions: extensions::Extensions,
}

impl Host {
    pub fn new(cfg: Arc<Config>, policy: PolicyReader) -> Arc<Self> {
        let models = configured_models(&cfg);
        let root: RootState = serde_json::from_value(json!({
            "agents": [{
                "provider": PROVIDER,
                "displayName": "GitHub Copilot",
                "description": "The GitHub Copilot agent runtime, through ahp-copilot-bridge",
                "models": models.iter().map(|m| json!({"id": m, "provider": PROVIDER, "name": m})).collect::<Vec<_>>(),
                "protectedResources": super::auth::tokens::protected_resources(&cfg),
                "customizations": super::customizations::configured(&cfg.customizations.containers()),
            }],
            "activeSessions": 0,
        }))
        .expect("static root state");
        Arc::new(Self {
            principals: RwLock::new(Arc::new(Principals::from_config(&cfg))),
            limits: Limits::from_config(&cfg),
            policy,
            cfg,
            state: Mutex::new(State {
                sessions: Sessions::new(root),
                clients: Clients::new(),
                log: ActionLog::new(),
                extensions: Default::default(),
            }),
            backend: OnceLock::new(),
            durable: Durable::default(),
            tokens: Tokens::default(),
            models,
            connections: tokio::sync::watch::Sender::new(0),
            boundaries: tokio::sync::watch::Sender::new(0),
            grace_timers_fired: AtomicU64::new(0),
        })
    }

    pub fn config(&self) -> &Arc<Config> {
        &self.cfg
    }

    // ── the extension channels (their state: `extensions::Extensions`) ──

    fn status_inputs(&self, st: &State) -> extensions::StatusInputs {
        extensions::StatusInputs {
            pool_size: self.cfg.runtime.pool_size(),
            clients: st.clients.initialized(),
            sessions: st.sessions.len(),
        }
    }

    /// The extension channel's state, if `uri` is one of them.
    fn extension_state(&self, st: &State, uri: &str) -> Option<Value> {
        let now = self.status_inputs(st);
        st.extensions.state(uri, &self.policy.current(), &now)
    }

    /// Sends `x-host://status` a change, if anything changed since the last
    /// one; called on a tick. Nobody watching: nothing to number, keep or
    /// send (a subscriber gets the status as it is then in its snapshot).
    pub fn publish_status_if_changed(&self) {
        let mut st = self.lock();
        if st
            .clients
            .subscribers(channels::HOST_STATUS)
            .next()
            .is_none()
        {
            return;
        }
        let now = self.status_inputs(&st);
        if let Some(action) = st.extensions.status_changed(&now) {
            self.publish_extension(&mut st, channels::HOST_STATUS, action);
        }
    }

    /// A reload put a new policy in force: `x-policy://effective` says so.
    pub fn publish_policy_loaded(&self) {
        let mut st = self.lock();
        let action = st.extensions.policy_reloaded(&self.policy.current());
        self.publish_extension(&mut st, channels::POLICY, action);
    }

    /// One record written to the audit log: into `x-audit://log`'s state
    /// and out to its subscribers.
    pub fn publish_audit_record(&self, record: Value, shipping_gap: u64) {
        let mut st = self.lock();
        let action = st.extensions.audit_appended(record, shipping_gap);
        self.publish_extension(&mut st, channels::AUDIT_LOG, action);
    }

    /// The records the log held before this run, as `x-audit://log`'s tail.
    pub fn seed_audit_tail(&self, records: Vec<Value>) {
        self.lock().extensions.seed_audit_tail(records);
    }

    /// An extension channel's action: sequenced, sent to its subscribers,
    /// kept for replay, as every action.
    fn publish_extension(&self, st: &mut State, channel: &str, action: Value) {
        let seq = self.durable.next_seq(&mut st.log);
        let env = json!({"channel": channel, "action": action, "serverSeq": seq});
        let notification = jsonrpc::notification("action", &env);
        let text = notification.to_string();
        for sub in st.clients.subscribers(channel) {
            sub.out.send_action(&notification, &text, None);
        }
        let server = &self.cfg.server;
        st.log.keep(
            seq,
            channel,
            env.to_string(),
            server.replay_buffer,
            server.replay_buffer_bytes,
        );
    }

    /// The sections the catalogue marks `restricted` (no client ever sees them).
    pub fn hidden_sections(&self) -> Vec<String> {
        self.policy.current().hidden_sections()
    }

    /// Who may connect, now.
    pub fn principals(&self) -> Arc<Principals> {
        self.principals
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The models a session may choose, the default first.
    pub fn models(&self) -> &[String] {
        &self.models
    }

    /// Tokens clients gave with `authenticate`.
    pub fn tokens(&self) -> &Tokens {
        &self.tokens
    }

    pub fn set_backend(&self, backend: Arc<dyn Backend>) {
        let _ = self.backend.set(backend);
    }

    fn backend(&self) -> Option<Arc<dyn Backend>> {
        self.backend.get().cloned()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    // ── the action path ──────────────────────────────────────────────────

    /// A host-originated action: applied, sequenced, kept, broadcast.
    pub fn dispatch(&self, channel: &str, action: impl Into<Action>) -> Result<u64, Rejection> {
        let action = action.into();
        let (seq, session) = {
            let mut st = self.lock();
            st.sessions.apply(channel, &action)?;
            let session = st.sessions.session_of(channel).map(String::from);
            (self.commit(&mut st, channel, &action, None), session)
        };
        self.raise(session, &action.action, channel, None);
        Ok(seq)
    }

    /// `dispatchAction` from a client: checked against the table and the
    /// sending connection, applied, echoed to subscribers with `origin`; a
    /// refused action goes back to the sender alone with `rejectionReason`.
    pub fn client_dispatch(&self, conn: ConnId, d: DispatchAction) {
        let Some((client_id, principal)) = self.identity(conn) else {
            return;
        };
        let origin = ActionOrigin {
            client_id: client_id.clone(),
            client_seq: d.client_seq,
        };
        let outcome = self.client_action(conn, &principal, &origin, &d);
        debug!(principal = %principal.name, client = %Escaped(&client_id), channel = ?d.channel,
            action = ?d.action.get("type"), allowed = outcome.is_ok(), refusal = ?outcome.as_ref().err(), "authorization");
        match outcome {
            Ok((session, action)) => {
                let channel = self.lock().sessions.resolve(&d.channel).to_owned();
                let by = Dispatcher {
                    principal: principal.name.clone(),
                    traceparent: d.traceparent,
                };
                self.raise(session, &action, &channel, Some(&by))
            }
            Err(reason) => {
                let st = self.lock();
                let env = json!({"channel": d.channel, "action": d.action, "serverSeq": st.log.current(),
                    "origin": origin, "rejectionReason": reason.0});
                if let Some(out) = st.clients.out(conn) {
                    out.send(jsonrpc::notification("action", &env).to_string());
                }
            }
        }
    }

    /// The client id and principal of an initialized connection.
    pub fn identity(&self, conn: ConnId) -> Option<(String, Arc<Principal>)> {
        let st = self.lock();
        let (id, p) = st.clients.identity(conn)?;
        Some((id.to_owned(), p.clone()))
    }

    /// Checks, applies and commits a client's action; returns its session
    /// and the action, to raise once the lock is released.
    fn client_action(
        &self,
        conn: ConnId,
        principal: &Principal,
        origin: &ActionOrigin,
        d: &DispatchAction,
    ) -> Result<(Option<String>, StateAction), Rejection> {
        // Every action counts, refused or not: a runaway client is slowed first.
        self.limits
            .take_action(&principal.name)
            .map_err(|l| Rejection(l.to_string()))?;
        let kind = channel_kind(&d.channel);
        let bytes = d.action.to_string().len();
        if bytes > self.cfg.server.max_action_bytes {
            return Err(Rejection(format!(
                "action of {bytes} bytes is over [server] max_action_bytes ({})",
                self.cfg.server.max_action_bytes
            )));
        }
        let action = parse_client_action(kind, &d.action)?;
        check_action(principal, &action).map_err(|d| Rejection(d.0))?;
        if let Some(model) = chosen_model(&action.action) {
            self.check_model(model).map_err(|e| Rejection(e.message))?;
        }
        check_directories(&action.action)?;
        let mut st = self.lock();
        let channel = st.sessions.resolve(&d.channel).to_owned();
        if kind != ChannelKind::Root && !st.sessions.visible(principal, &channel) {
            // Not visible is not there: existence is not leaked.
            return Err(Rejection(format!("no such channel {:?}", d.channel)));
        }
        check_own(&st.sessions, &channel, &origin.client_id, &action.action)?;
        let turn = starts_turn(&action.action);
        if turn {
            if let Some(standing) = st.clients.revoked(conn) {
                return Err(Rejection(format!(
                    "{}: no new turns; this connection closes once its running turn ends",
                    standing.reason()
                )));
            }
            self.limits
                .check_turn(&principal.name)
                .map_err(|l| Rejection(l.to_string()))?;
        }
        st.sessions.apply(&channel, &action)?;
        if turn {
            self.limits.take_turn(&principal.name);
        }
        if let StateAction::ChatTurnStarted(a) = &action.action {
            st.sessions.started(&channel, &a.turn_id, &origin.client_id);
        }
        let session = st.sessions.session_of(&channel).map(String::from);
        self.commit(&mut st, &channel, &action, Some(origin));
        Ok((session, action.action))
    }

    /// Sequences an applied action, keeps it for replay, sends it to the
    /// channel's subscribers and stores its session at a boundary: every
    /// applied action passes here, under the lock.
    fn commit(
        &self,
        st: &mut State,
        channel: &str,
        action: &Action,
        origin: Option<&ActionOrigin>,
    ) -> u64 {
        let seq = self.durable.next_seq(&mut st.log);
        let mut env = json!({"channel": channel, "action": action.to_json(), "serverSeq": seq});
        if let Some(o) = origin {
            env["origin"] = json!(o);
        }
        let notification = jsonrpc::notification("action", &env);
        let text = notification.to_string();
        // A streamed delta may be merged into the one queued before it.
        let delta = match &action.action {
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
        let ty = env["action"]["type"].as_str().unwrap_or_default();
        let sender = origin.map(|o| o.client_id.as_str());
        for sub in st.clients.subscribers(channel) {
            // A client is sent only what its protocol line knows (its own echo aside).
            if !sub.version.knows_action(ty) && sub.client_id != sender {
                continue;
            }
            let delta = delta.as_ref().map(|(k, content)| (k, *content));
            sub.out.send_action(&notification, &text, delta);
        }
        let server = &self.cfg.server;
        let envelope = env.to_string();
        st.log.keep(
            seq,
            channel,
            envelope,
            server.replay_buffer,
            server.replay_buffer_bytes,
        );
        if is_boundary(&action.action) {
            if let Some(session) = st.sessions.session_of(channel).map(String::from) {
                st.sessions.touch(&session, now_iso());
                self.durable.save(&st.sessions, &session, None);
            }
            self.boundaries.send_modify(|n| *n += 1);
        }
        seq
    }

    /// Hands the backend the phase an applied action means, if any: the one
    /// place phases are raised (the lock is released by now).
    fn raise(
        &self,
        session: Option<String>,
        action: &StateAction,
        channel: &str,
        by: Option<&Dispatcher>,
    ) {
        let (Some(session), Some(backend)) = (session, self.backend()) else {
            return;
        };
        if let Some(phase) = ClientPhase::of(action, channel, by) {
            backend.phase(&session, phase);
        }
    }

    /// Sends a root notification about a session owned by `owner`
    /// (`root/sessionAdded`, ...) to the root subscribers that may see it.
    fn notify_root(&self, st: &State, owner: &str, method: &str, params: Value) {
        let text = jsonrpc::notification(method, &params).to_string();
        // 0.9 summaries had no `chats` nor `defaultChat`.
        let older = || {
            let mut p = params.clone();
            for field in ["summary", "changes"] {
                if let Some(summary) = p.get_mut(field) {
                    Version::V0_9.summary(summary);
                }
            }
            jsonrpc::notification(method, &p).to_string()
        };
        for sub in st.clients.subscribers(ROOT_URI) {
            if sub.principal.sees(owner) {
                let text = if sub.version.summaries_name_chats() {
                    text.clone()
                } else {
                    older()
                };
                sub.out.send(text);
            }
        }
    }

    /// The protocol line `conn` speaks.
    pub fn version_of(&self, conn: ConnId) -> Version {
        self.lock().clients.version(conn)
    }

    /// Whether `id` is a model this host offers.
    pub fn check_model(&self, id: &str) -> Result<(), jsonrpc::RpcError> {
        if self.models.iter().any(|m| m == id) {
            return Ok(());
        }
        Err(jsonrpc::RpcError::new(
            jsonrpc::ErrorCode::InvalidParams,
            format!(
                "model {id:?} is not offered here; offered: {:?}",
                self.models
            ),
        ))
    }
}

/// The checks only state can answer: a client sets and removes only its own
/// active-client entry, and completes only tool calls it contributed.
fn check_own(
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
fn starts_turn(action: &StateAction) -> bool {
    use ahp_types::state::PendingMessageKind;
    match action {
        StateAction::ChatTurnStarted(_) => true,
        StateAction::ChatPendingMessageSet(a) => a.kind == PendingMessageKind::Queued,
        _ => false,
    }
}

/// A working directory a client sets must be one the runtime can be
/// given and files read from, as `createSession` demands of its own.
fn check_directories(action: &StateAction) -> Result<(), Rejection> {
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
fn chosen_model(action: &StateAction) -> Option<&str> {
    let message = match action {
        StateAction::ChatTurnStarted(a) => &a.message,
        StateAction::ChatPendingMessageSet(a) => &a.message,
        _ => return None,
    };
    message.model.as_ref().map(|m| m.id.as_str())
}

/// The models this host offers, the default first, each once.
fn configured_models(cfg: &Config) -> Vec<String> {
    let mut models = vec![cfg.runtime.model.clone()];
    for m in &cfg.runtime.models {
        if !models.contains(m) {
            models.push(m.clone());
        }
    }
    models
}
