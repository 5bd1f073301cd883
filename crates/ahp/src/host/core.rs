//! The host's core: its state behind one lock, and the one path every action
//! takes: apply with the official reducer, sequence, keep for replay,
//! broadcast, store at a boundary, then raise the phase it means to the
//! backend. The host's concerns ([`super::Host`] and the parts it lends:
//! connections, the session list, the backend's view) each go through it.
//!
//! The lock is a `std::sync::Mutex`, never held across an await: sends to
//! clients are queued without waiting (see [`super::outbound`]), so a slow
//! client cannot stall the host. The backend is called after the lock is
//! released, so it may call back into the host.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use ahp_types::actions::{
    ActionEnvelope, ActionOrigin, RootActiveSessionsChangedAction, StateAction,
};
use ahp_types::notifications::{SessionAddedParams, SessionRemovedParams};
use ahp_types::state::SessionSummary;
use serde_json::Value;
use tokio::sync::watch;
use tracing::warn;

use super::clients::Clients;
use super::durable::{is_boundary, Durable};
use super::host_channels::HostChannels;
use super::host_settings::HostSettings;
use super::outbound::DeltaKey;
use super::replay::ReplayBuffer;
use super::sessions::Sessions;
use crate::backend::{Backend, ClientPhase, Dispatcher};
use crate::protocol::actions::{Action, Rejection};
use crate::protocol::uri::ROOT_URI;
use crate::protocol::versions::Version;
use ahp_bridge_jsonrpc as jsonrpc;
use ahp_bridge_policy::{Policy, PolicyReader};
use ahp_bridge_telemetry::metrics;

/// Everything behind the lock: each part changes only through its own methods.
pub(super) struct HostState {
    pub(super) sessions: Sessions,
    pub(super) clients: Clients,
    pub(super) replay: ReplayBuffer,
    pub(super) host_channels: HostChannels,
}

/// What the root's subscribers hear of a session coming or going.
pub(super) enum RootNotice {
    Added(Box<SessionSummary>),
    Removed(String),
}

/// What a snapshot is read with besides the state: the policy in force
/// (its hidden sections, the policy channel) and the host's settings.
pub(super) struct View {
    pub policy: Arc<Policy>,
    pub pool_size: usize,
    pub max_subscriptions: usize,
}

pub(super) struct Core {
    /// The parts of the config the host reads, start-only.
    settings: HostSettings,
    /// The policy in force: snapshots read its hidden sections.
    policy: PolicyReader,
    state: Mutex<HostState>,
    backend: OnceLock<Arc<dyn Backend>>,
    durable: Durable,
    /// Bumped at every turn end (and other boundaries), for a revoked
    /// connection waiting on its running turn.
    boundaries: watch::Sender<u64>,
}

impl Core {
    pub(super) fn new(settings: HostSettings, policy: PolicyReader, state: HostState) -> Self {
        Self {
            settings,
            policy,
            state: Mutex::new(state),
            backend: OnceLock::new(),
            durable: Durable::default(),
            boundaries: watch::Sender::new(0),
        }
    }

    pub(super) fn settings(&self) -> &HostSettings {
        &self.settings
    }

    pub(super) fn policy(&self) -> &PolicyReader {
        &self.policy
    }

    pub(super) fn durable(&self) -> &Durable {
        &self.durable
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, HostState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What snapshots are read with: the policy in force and the settings.
    pub(super) fn view(&self) -> View {
        View {
            policy: self.policy.current(),
            pool_size: self.settings.pool_size(),
            max_subscriptions: self.settings.server().max_subscriptions,
        }
    }

    pub(super) fn set_backend(&self, backend: Arc<dyn Backend>) {
        let _ = self.backend.set(backend);
    }

    pub(super) fn backend(&self) -> Option<Arc<dyn Backend>> {
        self.backend.get().cloned()
    }

    /// A turn ended or a session went: a revoked connection waiting on its
    /// running turn asks again.
    pub(super) fn boundary_passed(&self) {
        self.boundaries.send_modify(|n| *n += 1);
    }

    pub(super) fn boundaries(&self) -> watch::Receiver<u64> {
        self.boundaries.subscribe()
    }

    /// A host-originated action: applied, sequenced, kept, broadcast.
    pub(super) fn dispatch(&self, channel: &str, action: Action) -> Result<u64, Rejection> {
        let (seq, session) = {
            let mut st = self.lock();
            self.apply(&mut st, channel, &action)?;
            let session = st.sessions.session_of(channel).map(String::from);
            (self.commit(&mut st, channel, &action, None), session)
        };
        self.raise(session, &action.action, channel, None);
        Ok(seq)
    }

    /// Applies an action with the official reducer; a truncation to a turn
    /// only the store has gets that turn loaded (and sent) first.
    pub(super) fn apply(
        &self,
        st: &mut HostState,
        channel: &str,
        action: &Action,
    ) -> Result<(), Rejection> {
        if let Some(loaded) = self
            .durable
            .load_truncated(&mut st.sessions, channel, action)
        {
            self.commit(st, channel, &loaded, None);
        }
        st.sessions.apply(channel, action)
    }

    /// Applies and commits host actions on one channel, in order, under the
    /// lock the caller holds, stopping at the first the reducer refuses.
    pub(super) fn apply_all<const N: usize>(
        &self,
        st: &mut HostState,
        channel: &str,
        actions: [StateAction; N],
    ) -> Option<()> {
        for a in actions {
            let a = Action::from(a);
            if let Err(e) = st.sessions.apply(channel, &a) {
                warn!(channel, "pending message not consumed: {e}");
                return None;
            }
            self.commit(st, channel, &a, None);
        }
        Some(())
    }

    /// Sequences an applied action, keeps it for replay, sends it to the
    /// channel's subscribers and stores its session at a boundary: every
    /// applied action passes here, under the lock.
    pub(super) fn commit(
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
        self.keep(st, seq, channel, envelope);
        if is_boundary(&action.action) {
            let window = self.settings.window();
            self.durable
                .at_boundary(&mut st.sessions, channel, &action.action, window);
            self.boundary_passed();
        }
        seq
    }

    /// A host channel's action (its JSON): sequenced, sent to its
    /// subscribers, kept for replay, as every action. The envelope is
    /// written around the action's text, not built as a tree and
    /// serialized again: an audit record is published for every record
    /// written.
    pub(super) fn publish_host_channel(&self, st: &mut HostState, channel: &str, action: String) {
        let seq = self.durable.next_seq(&mut st.replay);
        let channel_json = serde_json::to_string(channel).unwrap_or_default();
        let env = format!(r#"{{"action":{action},"channel":{channel_json},"serverSeq":{seq}}}"#);
        let text = format!(r#"{{"jsonrpc":"2.0","method":"action","params":{env}}}"#);
        for sub in st.clients.subscribers(channel) {
            // Not a delta: the queue only ever reads the text.
            sub.out.send_action(&Value::Null, &text, None);
        }
        self.keep(st, seq, channel, env);
    }

    /// Keeps a sequenced envelope for replay, within the configured bounds.
    fn keep(&self, st: &mut HostState, seq: u64, channel: &str, envelope: String) {
        let server = self.settings.server();
        st.replay.keep(
            seq,
            channel,
            envelope,
            server.replay_buffer,
            server.replay_buffer_bytes,
        );
    }

    /// Hands the backend the phase an applied action means, if any: the one
    /// place phases are raised (the lock is released by now).
    pub(super) fn raise(
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
    pub(super) fn notify_root(&self, st: &HostState, owner: &str, notice: RootNotice) {
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

    /// The root's `activeSessions` (and the gauge) follow the session count.
    pub(super) fn update_active_sessions(&self) {
        let n = self.lock().sessions.len();
        metrics().set_sessions(n);
        let n = n as i64;
        let changed = RootActiveSessionsChangedAction { active_sessions: n };
        let action = StateAction::RootActiveSessionsChanged(changed);
        let _ = self.dispatch(ROOT_URI, action.into());
    }
}
