//! The host: its state behind one lock, split into parts that each own
//! their fields ([`sessions::Sessions`]: the AHP state; [`clients::Clients`]:
//! connections and presence; [`replay::ReplayBuffer`]: `serverSeq` and replay;
//! [`durable::Durable`]: the store, and what of a chat's turns only it
//! keeps), and the one path every action takes: check, apply with the
//! official reducer, sequence, keep for replay,
//! broadcast, store at a boundary, then raise the phase it means to the
//! backend. The operations commands and the backend call are in [`api`];
//! a reload of who may connect, and the closing of revoked connections, in
//! [`credentials`].
//!
//! The lock is a `std::sync::Mutex`, never held across an await: sends to
//! clients are queued without waiting (see [`outbound`]), so a slow client
//! cannot stall the host. The backend is called after the lock is released,
//! so it may call back into the host.

use ahp_bridge_telemetry::Escaped;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use ahp_types::actions::{ActionEnvelope, ActionOrigin, StateAction};
use ahp_types::notifications::{SessionAddedParams, SessionRemovedParams};
use ahp_types::state::{AgentInfo, RootState, SessionSummary};
use serde_json::Value;
use tracing::debug;

use self::catch_up::{Reconnected, View};
use self::checks::{check_config, check_directories, check_own, chosen_model, starts_turn};
use self::clients::{Clients, ConnId};
use self::credentials::Credentials;
use self::durable::{is_boundary, Durable};
use self::outbound::DeltaKey;
use self::replay::ReplayBuffer;
use self::sessions::{Sessions, PROVIDER};
use super::auth::access::check_action;
use super::auth::tokens::Tokens;
use super::auth::{Principal, Principals};
use super::backend::{Backend, ClientPhase, Dispatcher};
use super::channels::{self, WrittenRecord};
use super::protocol::actions::{parse_client_action, Action, Rejection};
use super::protocol::params::DispatchAction;
use super::protocol::uri::{channel_kind, ChannelKind, ROOT_URI};
use super::protocol::versions::Version;
use ahp_bridge_base::config::Config;
use ahp_bridge_jsonrpc::{self as jsonrpc, RpcError};
use ahp_bridge_policy::governor::Governor;
use ahp_bridge_policy::rego::{Body, ClientKind};
use ahp_bridge_policy::PolicyReader;

pub mod api;
pub mod catch_up;
pub(crate) mod checks;
pub mod clients;
mod credentials;
mod durable;
mod host_channels;
pub mod outbound;
pub(crate) mod rego;
mod replay;
mod session_start;
pub mod sessions;
mod settings;
pub mod subscriptions;
mod window;

pub use credentials::CredentialsReloaded;
pub use durable::SessionRestoreError;
pub use session_start::{Creator, SessionStart};
pub use sessions::NewSession;
pub use settings::{BackendConfig, HostSettings};

pub struct Host {
    /// The parts of the config the host reads, start-only.
    settings: HostSettings,
    /// Who may connect, their limits and tokens ([`credentials`]).
    credentials: Credentials,
    /// The policy in force: the catalogue advertises its hidden sections.
    policy: PolicyReader,
    /// The one decision path (the policy in force, the audit path).
    governor: Arc<Governor>,
    state: Mutex<HostState>,
    backend: OnceLock<Arc<dyn Backend>>,
    durable: Durable,
    /// How many connections are open, for a shutdown to wait on.
    connections: tokio::sync::watch::Sender<usize>,
    /// Bumped at every turn end (and other boundaries), for a revoked
    /// connection waiting on its running turn.
    boundaries: tokio::sync::watch::Sender<u64>,
    grace_timers_fired: AtomicU64,
}

/// What the root's subscribers hear of a session coming or going.
enum RootNotice {
    Added(Box<SessionSummary>),
    Removed(String),
}

/// Everything behind the lock: each part changes only through its own methods.
struct HostState {
    sessions: Sessions,
    clients: Clients,
    replay: ReplayBuffer,
    host_channels: host_channels::HostChannels,
}

impl Host {
    /// Built from the config's sections it reads ([`HostSettings`], the
    /// principals and limits, the models and customization folders it
    /// advertises); it keeps none of the rest.
    pub fn new(cfg: &Config, policy: PolicyReader) -> Arc<Self> {
        let settings = HostSettings::from_config(cfg);
        let agent = AgentInfo {
            provider: PROVIDER.into(),
            display_name: "GitHub Copilot".into(),
            description: "The GitHub Copilot agent runtime, through ahp-copilot-bridge".into(),
            models: settings
                .models()
                .iter()
                .map(|m| settings::model_info(m))
                .collect(),
            protected_resources: super::auth::tokens::protected_resources(
                settings.github_sign_in(),
            ),
            customizations: Some(super::customizations::configured(
                &cfg.customizations.containers(),
            )),
            capabilities: None,
        };
        let root = RootState {
            agents: vec![agent],
            active_sessions: Some(0),
            terminals: None,
            config: None,
            meta: None,
        };
        Arc::new(Self {
            credentials: Credentials::from_config(cfg.reloadable()),
            governor: Arc::new(Governor::new(policy.clone())),
            policy,
            settings,
            state: Mutex::new(HostState {
                sessions: Sessions::new(root),
                clients: Clients::new(),
                replay: ReplayBuffer::new(),
                host_channels: Default::default(),
            }),
            backend: OnceLock::new(),
            durable: Durable::default(),
            connections: tokio::sync::watch::Sender::new(0),
            boundaries: tokio::sync::watch::Sender::new(0),
            grace_timers_fired: AtomicU64::new(0),
        })
    }

    pub fn settings(&self) -> &HostSettings {
        &self.settings
    }

    // ── the host channels (their state: `host_channels::HostChannels`) ──

    /// What snapshots are read with: the policy in force and the settings.
    fn view(&self) -> View {
        View {
            policy: self.policy.current(),
            pool_size: self.settings.pool_size(),
            max_subscriptions: self.settings.server().max_subscriptions,
        }
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
        let now = st.status_inputs(self.settings.pool_size());
        if let Some(action) = st.host_channels.status_changed(&now) {
            self.publish_host_channel(&mut st, channels::HOST_STATUS, action);
        }
    }

    /// A reload put a new policy in force: `x-policy://effective` says so.
    pub fn publish_policy_loaded(&self) {
        let mut st = self.lock();
        let action = st.host_channels.policy_reloaded(&self.policy.current());
        self.publish_host_channel(&mut st, channels::POLICY, action);
    }

    /// One record written to the audit log: into `x-audit://log`'s state
    /// and out to its subscribers.
    pub fn publish_audit_record(&self, record: WrittenRecord, shipping_gap: u64) {
        let mut st = self.lock();
        let action = st.host_channels.audit_appended(record, shipping_gap);
        self.publish_host_channel(&mut st, channels::AUDIT_LOG, action);
    }

    /// The records the log held before this run, as `x-audit://log`'s tail.
    pub fn seed_audit_tail(&self, records: Vec<WrittenRecord>) {
        self.lock().host_channels.seed_audit_tail(records);
    }

    /// A host channel's action (its JSON): sequenced, sent to its
    /// subscribers, kept for replay, as every action. The envelope is
    /// written around the action's text, not built as a tree and
    /// serialized again: an audit record is published for every record
    /// written.
    fn publish_host_channel(&self, st: &mut HostState, channel: &str, action: String) {
        let seq = self.durable.next_seq(&mut st.replay);
        let channel_json = serde_json::to_string(channel).unwrap_or_default();
        let env = format!(r#"{{"action":{action},"channel":{channel_json},"serverSeq":{seq}}}"#);
        let text = format!(r#"{{"jsonrpc":"2.0","method":"action","params":{env}}}"#);
        for sub in st.clients.subscribers(channel) {
            // Not a delta: the queue only ever reads the text.
            sub.out.send_action(&Value::Null, &text, None);
        }
        let server = self.settings.server();
        st.replay.keep(
            seq,
            channel,
            env,
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
        self.credentials.principals()
    }

    /// The models a session may choose, the default first.
    pub fn models(&self) -> &[String] {
        self.settings.models()
    }

    /// Tokens clients gave with `authenticate`.
    pub fn tokens(&self) -> &Tokens {
        self.credentials.tokens()
    }

    /// The one decision path, which the join gives its audit path and asks too.
    pub fn governor(&self) -> &Arc<Governor> {
        &self.governor
    }

    pub fn set_backend(&self, backend: Arc<dyn Backend>) {
        let _ = self.backend.set(backend);
    }

    fn backend(&self) -> Option<Arc<dyn Backend>> {
        self.backend.get().cloned()
    }

    fn lock(&self) -> MutexGuard<'_, HostState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    // ── subscriptions (answered by the state: [`subscriptions`]) ─────────

    /// `initialize`: attaches `client_id` to `conn` and subscribes it to
    /// `initial`, all or nothing; the `serverSeq` and the snapshots.
    pub(crate) fn attach_client(
        &self,
        conn: ConnId,
        client_id: &str,
        version: Version,
        initial: Vec<String>,
    ) -> Result<(u64, Vec<Value>), RpcError> {
        let view = self.view();
        self.lock().attach(&view, conn, client_id, version, initial)
    }

    /// `reconnect`: reattaches `client_id` to `conn`; a replay or snapshots,
    /// at once or channel by channel.
    pub fn reattach_client(
        &self,
        conn: ConnId,
        client_id: &str,
        last_seen: u64,
        subs: Vec<(String, Option<u64>)>,
    ) -> Result<Reconnected, RpcError> {
        let view = self.view();
        self.lock()
            .reattach(&view, conn, client_id, last_seen, subs)
    }

    pub(crate) fn subscribe(&self, conn: ConnId, uri: &str) -> Result<Value, RpcError> {
        let view = self.view();
        self.lock().subscribe(&view, conn, uri)
    }

    /// A snapshot `{resource, state, fromSeq}` with extension fields restored.
    /// JSON, as a client receives it: the official `Snapshot` has no form for
    /// an `x-` channel's state nor for the opt-in extension field, and this
    /// is what tests and the catch-up compare with what clients were sent.
    pub fn snapshot(&self, uri: &str) -> Option<Value> {
        let view = self.view();
        self.lock().snapshot(&view, uri)
    }

    // ── the action path ──────────────────────────────────────────────────

    /// A host-originated action: applied, sequenced, kept, broadcast.
    pub fn dispatch(&self, channel: &str, action: impl Into<Action>) -> Result<u64, Rejection> {
        let action = action.into();
        let (seq, session) = {
            let mut st = self.lock();
            self.apply(&mut st, channel, &action)?;
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
                    client_id: client_id.clone(),
                    traceparent: d.traceparent,
                };
                self.raise(session, &action, &channel, Some(&by))
            }
            Err(reason) => {
                let st = self.lock();
                // The refused action goes back as sent: it may not even parse.
                let env = ActionEnvelope {
                    channel: d.channel,
                    action: StateAction::Unknown(d.action),
                    server_seq: st.replay.current(),
                    origin: Some(origin),
                    rejection_reason: Some(reason.0),
                };
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
        self.credentials
            .limits()
            .take_action(&principal.name)
            .map_err(|l| Rejection(l.to_string()))?;
        let kind = channel_kind(&d.channel);
        let bytes = d.action.to_string().len();
        if bytes > self.settings.server().max_action_bytes {
            return Err(Rejection(format!(
                "action of {bytes} bytes is over [server] max_action_bytes ({})",
                self.settings.server().max_action_bytes
            )));
        }
        let action = parse_client_action(kind, &d.action)?;
        check_action(principal, &action).map_err(|d| Rejection(d.0))?;
        if let Some(model) = chosen_model(&action.action) {
            self.check_model(model).map_err(|e| Rejection(e.message))?;
        }
        check_directories(&action.action)?;
        check_config(&self.settings, &action.action)?;
        if let Some(opt_in) = &action.opt_in {
            checks::check_opt_in(&self.settings, opt_in)?;
            let subject = principal.subject(Some(&origin.client_id), ClientKind::Ahp);
            let body = Body::OptIn {
                sections: &opt_in.sections,
            };
            let about = opt_in.sections.join(",");
            rego::decide(&self.governor, &subject, Some(&d.channel), body, &about)
                .map_err(|r| Rejection(r.0))?;
        }
        let mut st = self.lock();
        let channel = st.sessions.resolve(&d.channel).to_owned();
        if kind != ChannelKind::Root && !st.sessions.visible(principal, &channel) {
            // Not visible is not there: existence is not leaked.
            return Err(Rejection(format!("no such channel {:?}", d.channel)));
        }
        if st.sessions.watched_only(&channel) {
            return Err(Rejection(format!(
                "{channel:?} is an SDK app's session: the app drives its turns, clients only watch it"
            )));
        }
        check_own(&st.sessions, &channel, &origin.client_id, &action.action)?;
        checks::check_bounds(&st.sessions, &channel, &action.action, &self.settings)?;
        let turn = starts_turn(&action.action);
        if turn {
            if let Some(standing) = st.clients.revoked(conn) {
                return Err(Rejection(format!(
                    "{}: no new turns; this connection closes once its running turn ends",
                    standing.reason()
                )));
            }
            self.credentials
                .limits()
                .check_turn(&principal.name)
                .map_err(|l| Rejection(l.to_string()))?;
        }
        self.apply(&mut st, &channel, &action)?;
        if turn {
            self.credentials.limits().take_turn(&principal.name);
        }
        if let StateAction::ChatTurnStarted(a) = &action.action {
            st.sessions.started(&channel, &a.turn_id, &origin.client_id);
        }
        let session = st.sessions.session_of(&channel).map(String::from);
        self.commit(&mut st, &channel, &action, Some(origin));
        Ok((session, action.action))
    }

    /// Applies an action with the official reducer; a truncation to a turn
    /// only the store has gets that turn loaded (and sent) first.
    fn apply(&self, st: &mut HostState, channel: &str, action: &Action) -> Result<(), Rejection> {
        if let Some(loaded) = self
            .durable
            .load_truncated(&mut st.sessions, channel, action)
        {
            self.commit(st, channel, &loaded, None);
        }
        st.sessions.apply(channel, action)
    }

    /// Sequences an applied action, keeps it for replay, sends it to the
    /// channel's subscribers and stores its session at a boundary: every
    /// applied action passes here, under the lock.
    fn commit(
        &self,
        st: &mut HostState,
        channel: &str,
        action: &Action,
        origin: Option<&ActionOrigin>,
    ) -> u64 {
        let seq = self.durable.next_seq(&mut st.replay);
        let env = ActionEnvelope {
            channel: channel.to_owned(),
            action: match action.opt_in {
                None => action.action.clone(),
                // The transform opt-in rides in the entry, beside the official fields.
                Some(_) => StateAction::Unknown(action.to_json()),
            },
            server_seq: seq,
            origin: origin.cloned(),
            rejection_reason: None,
        };
        let notification = jsonrpc::notification("action", &env);
        // Written once, kept for replay and framed as the notification (its keys in that order).
        let envelope = notification["params"].to_string();
        let text = format!(r#"{{"jsonrpc":"2.0","method":"action","params":{envelope}}}"#);
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
        let ty = notification["params"]["action"]["type"]
            .as_str()
            .unwrap_or_default();
        let sender = origin.map(|o| o.client_id.as_str());
        for sub in st.clients.subscribers(channel) {
            // A client is sent only what its protocol line knows (its own echo aside).
            if !sub.version.knows_action(ty) && sub.client_id != sender {
                continue;
            }
            sub.out.send_action(&notification, &text, delta.as_ref());
        }
        let server = self.settings.server();
        st.replay.keep(
            seq,
            channel,
            envelope,
            server.replay_buffer,
            server.replay_buffer_bytes,
        );
        if is_boundary(&action.action) {
            let window = self.settings.window();
            self.durable
                .at_boundary(&mut st.sessions, channel, &action.action, window);
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

    /// Sends a root notification about a session owned by `owner` to the
    /// root subscribers that may see it, each in its protocol line's form.
    fn notify_root(&self, st: &HostState, owner: &str, notice: RootNotice) {
        let for_line = |v: Version| -> String {
            let channel = ROOT_URI.to_owned();
            match &notice {
                RootNotice::Added(summary) => {
                    let mut summary = (**summary).clone();
                    v.summary(&mut summary);
                    let params = SessionAddedParams { channel, summary };
                    jsonrpc::notification("root/sessionAdded", &params).to_string()
                }
                RootNotice::Removed(session) => {
                    let params = SessionRemovedParams {
                        channel,
                        session: session.clone(),
                    };
                    jsonrpc::notification("root/sessionRemoved", &params).to_string()
                }
            }
        };
        let (current, older) = (for_line(Version::V1_0), for_line(Version::V0_9));
        for sub in st.clients.subscribers(ROOT_URI) {
            if sub.principal.sees(owner) {
                let text = if sub.version.summaries_name_chats() {
                    &current
                } else {
                    &older
                };
                sub.out.send(text.clone());
            }
        }
    }

    /// The protocol line `conn` speaks.
    pub fn version_of(&self, conn: ConnId) -> Version {
        self.lock().clients.version(conn)
    }

    /// Whether `id` is a model this host offers.
    pub fn check_model(&self, id: &str) -> Result<(), jsonrpc::RpcError> {
        if self.models().iter().any(|m| m == id) {
            return Ok(());
        }
        Err(jsonrpc::RpcError::new(
            jsonrpc::ErrorCode::InvalidParams,
            format!(
                "model {id:?} is not offered here; offered: {:?}",
                self.models()
            ),
        ))
    }
}
