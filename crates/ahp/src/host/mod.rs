//! The host: the AHP state and everything clients and the backend ask of
//! it, made of parts that each own their fields. [`core::Core`] holds the
//! state behind one lock ([`sessions::Sessions`]: the AHP state;
//! [`clients::Clients`]: connections and presence; [`replay::ReplayBuffer`]:
//! `serverSeq` and replay; [`durable::Durable`]: the store, and what of a
//! chat's turns only it keeps) and the one path every action takes.
//! [`credentials`] owns who may connect and how much each may do.
//!
//! `Host` itself answers the handshake, the subscriptions, a client's
//! `dispatchAction` (checked here, then down the core's path) and the host
//! channels; it lends the rest by concern: [`Host::connections`]
//! ([`connections`]), [`Host::session_list`] ([`session_list`]) and
//! [`Host::for_backend`] ([`backend_view`]).

use ahp_bridge_telemetry::Escaped;
use std::sync::Arc;

use ahp_types::actions::{ActionEnvelope, ActionOrigin, StateAction};
use ahp_types::state::{AgentInfo, RootState};
use serde_json::Value;
use tracing::debug;

use self::checks::{check_config, check_directories, check_own, chosen_model, starts_turn};
use self::clients::{Clients, ConnId};
use self::connections::ConnectionTally;
use self::core::{Core, HostState};
use self::credentials::Credentials;
use self::replay::ReplayBuffer;
use self::sessions::{Sessions, PROVIDER};
use super::auth::access::check_action;
use super::auth::tokens::Tokens;
use super::auth::{Principal, Principals};
use super::backend::{Backend, Dispatcher};
use super::channels::{self, WrittenRecord};
use super::protocol::actions::{parse_client_action, Action, Rejection};
use super::protocol::params::DispatchAction;
use super::protocol::uri::{channel_kind, ChannelKind};
use super::protocol::versions::Version;
use ahp_bridge_base::config::Config;
use ahp_bridge_jsonrpc::{self as jsonrpc, RpcError};
use ahp_bridge_policy::Governor;
use ahp_bridge_policy::PolicyReader;
use ahp_bridge_policy::{Body, ClientKind};

mod backend_view;
mod chats;
pub(crate) mod checks;
pub(crate) mod clients;
mod connections;
mod core;
mod credentials;
mod durable;
mod host_channels;
pub(crate) mod host_policy;
mod host_settings;
pub(crate) mod outbound;
mod replay;
mod session_list;
mod session_start;
pub mod sessions;
pub(crate) mod subscriptions;
mod window;

pub use backend_view::BackendView;
pub use connections::{Connected, Connections};
pub use credentials::CredentialsReloaded;
pub use durable::SessionRestoreError;
pub use host_settings::{BackendConfig, HostSettings};
pub use session_list::SessionList;
pub use session_start::{Creator, SessionStart};
pub use sessions::NewSession;
pub use subscriptions::Reconnected;

pub struct Host {
    /// The state behind the lock and the action path.
    core: Arc<Core>,
    /// Who may connect, their limits and tokens ([`credentials`]).
    credentials: Credentials,
    /// The one decision path (the policy in force, the audit path).
    governor: Arc<Governor>,
    /// What only the connections count ([`connections`]).
    presence: Arc<ConnectionTally>,
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
                .map(|m| host_settings::model_info(m))
                .collect(),
            protected_resources: super::auth::tokens::protected_resources(
                settings.github_sign_in(),
            ),
            customizations: Some(super::ahp_customizations::configured(
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
        let state = HostState {
            sessions: Sessions::new(root),
            clients: Clients::new(),
            replay: ReplayBuffer::new(),
            host_channels: Default::default(),
        };
        Arc::new(Self {
            credentials: Credentials::from_config(cfg.reloadable()),
            governor: Arc::new(Governor::new(policy.clone())),
            core: Arc::new(Core::new(settings, policy, state)),
            presence: Default::default(),
        })
    }

    pub fn settings(&self) -> &HostSettings {
        self.core.settings()
    }

    /// The connections: registering, dropping, who each is.
    pub fn connections(&self) -> Connections<'_> {
        Connections::new(&self.core, &self.credentials, &self.presence)
    }

    /// The sessions: adding, disposing, listing, restoring.
    pub fn session_list(&self) -> SessionList<'_> {
        SessionList::new(&self.core, &self.credentials)
    }

    /// The state as the backend reads and consumes it.
    pub fn for_backend(&self) -> BackendView<'_> {
        BackendView::new(&self.core, &self.credentials)
    }

    // ── the host channels (their state: `host_channels::HostChannels`) ──

    /// Sends `x-host://status` a change, if anything changed since the last
    /// one; called on a tick. Nobody watching: nothing to number, keep or
    /// send (a subscriber gets the status as it is then in its snapshot).
    pub fn publish_status_if_changed(&self) {
        let mut st = self.core.lock();
        if st
            .clients
            .subscribers(channels::HOST_STATUS)
            .next()
            .is_none()
        {
            return;
        }
        let now = st.status_inputs(self.core.settings().pool_size());
        if let Some(action) = st.host_channels.status_changed(&now) {
            self.core
                .publish_host_channel(&mut st, channels::HOST_STATUS, action);
        }
    }

    /// A reload put a new policy in force: `x-policy://effective` says so.
    pub fn publish_policy_loaded(&self) {
        let mut st = self.core.lock();
        let action = st
            .host_channels
            .policy_reloaded(&self.core.policy().current());
        self.core
            .publish_host_channel(&mut st, channels::POLICY, action);
    }

    /// One record written to the audit log: into `x-audit://log`'s state
    /// and out to its subscribers.
    pub fn publish_audit_record(&self, record: WrittenRecord, shipping_gap: u64) {
        let mut st = self.core.lock();
        let action = st.host_channels.audit_appended(record, shipping_gap);
        self.core
            .publish_host_channel(&mut st, channels::AUDIT_LOG, action);
    }

    /// The records the log held before this run, as `x-audit://log`'s tail.
    pub fn seed_audit_tail(&self, records: Vec<WrittenRecord>) {
        self.core.lock().host_channels.seed_audit_tail(records);
    }

    /// The sections the catalogue marks `restricted` (no client ever sees them).
    pub fn hidden_sections(&self) -> Vec<String> {
        self.core.policy().current().hidden_sections()
    }

    /// Who may connect, now.
    pub fn principals(&self) -> Arc<Principals> {
        self.credentials.principals()
    }

    /// The models a session may choose, the default first.
    pub fn models(&self) -> &[String] {
        self.core.settings().models()
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
        self.core.set_backend(backend);
    }

    /// `principal` gave a runtime token: the backend hands it on.
    pub fn authenticated(&self, principal: &str) {
        if let Some(b) = self.core.backend() {
            b.authenticated(principal);
        }
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
        let view = self.core.view();
        self.core
            .lock()
            .attach(&view, conn, client_id, version, initial)
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
        let view = self.core.view();
        self.core
            .lock()
            .reattach(&view, conn, client_id, last_seen, subs)
    }

    pub(crate) fn subscribe(&self, conn: ConnId, uri: &str) -> Result<Value, RpcError> {
        let view = self.core.view();
        self.core.lock().subscribe(&view, conn, uri)
    }

    /// A snapshot `{resource, state, fromSeq}` with extension fields restored.
    /// JSON, as a client receives it: the official `Snapshot` has no form for
    /// an `x-` channel's state nor for the opt-in extension field, and this
    /// is what tests and the catch-up compare with what clients were sent.
    pub fn snapshot(&self, uri: &str) -> Option<Value> {
        let view = self.core.view();
        self.core.lock().snapshot(&view, uri)
    }

    // ── the action path ──────────────────────────────────────────────────

    /// A host-originated action: applied, sequenced, kept, broadcast.
    pub fn dispatch(&self, channel: &str, action: impl Into<Action>) -> Result<u64, Rejection> {
        self.core.dispatch(channel, action.into())
    }

    /// `dispatchAction` from a client: checked against the table and the
    /// sending connection, applied, echoed to subscribers with `origin`; a
    /// refused action goes back to the sender alone with `rejectionReason`.
    pub fn client_dispatch(&self, conn: ConnId, d: DispatchAction) {
        let Some((client_id, principal)) = self.connections().identity(conn) else {
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
                let channel = self.core.lock().sessions.resolve(&d.channel).to_owned();
                let by = Dispatcher {
                    principal: principal.name.clone(),
                    client_id: client_id.clone(),
                    traceparent: d.traceparent,
                };
                self.core.raise(session, &action, &channel, Some(&by))
            }
            Err(reason) => {
                let st = self.core.lock();
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
        if bytes > self.core.settings().server().max_action_bytes {
            return Err(Rejection(format!(
                "action of {bytes} bytes is over [server] max_action_bytes ({})",
                self.core.settings().server().max_action_bytes
            )));
        }
        let action = parse_client_action(kind, &d.action)?;
        check_action(principal, &action).map_err(|d| Rejection(d.0))?;
        if let Some(model) = chosen_model(&action.action) {
            self.check_model(model).map_err(|e| Rejection(e.message))?;
        }
        check_directories(&action.action)?;
        check_config(self.core.settings(), &action.action)?;
        if let Some(opt_in) = &action.opt_in {
            checks::check_opt_in(self.core.settings(), opt_in)?;
            let subject = principal.subject(Some(&origin.client_id), ClientKind::Ahp);
            let body = Body::OptIn {
                sections: &opt_in.sections,
            };
            let about = opt_in.sections.join(",");
            host_policy::decide(&self.governor, &subject, Some(&d.channel), body, &about)
                .map_err(|r| Rejection(r.0))?;
        }
        let mut st = self.core.lock();
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
        checks::check_bounds(&st.sessions, &channel, &action.action, self.core.settings())?;
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
        self.core.apply(&mut st, &channel, &action)?;
        if turn {
            self.credentials.limits().take_turn(&principal.name);
        }
        if let StateAction::ChatTurnStarted(a) = &action.action {
            st.sessions
                .chats_mut()
                .started(&channel, &a.turn_id, &origin.client_id);
        }
        let session = st.sessions.session_of(&channel).map(String::from);
        self.core.commit(&mut st, &channel, &action, Some(origin));
        Ok((session, action.action))
    }

    /// Whether `id` is a model this host offers.
    pub fn check_model(&self, id: &str) -> Result<(), jsonrpc::RpcError> {
        if self.core.settings().models().iter().any(|m| m == id) {
            return Ok(());
        }
        Err(jsonrpc::RpcError::new(
            jsonrpc::ErrorCode::InvalidParams,
            format!(
                "model {id:?} is not offered here; offered: {:?}",
                self.core.settings().models()
            ),
        ))
    }
}
