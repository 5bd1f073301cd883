//! The bridge in front of the runtime's own AHP host (`[runtime] protocol
//! = "ahp"`): the north host keeps its clients, principals, sessions and
//! policy as ever, and this backend carries each session to a session of
//! the runtime's host and back. Turns, tool calls and input requests are
//! already AHP on both sides, so actions pass typed and whole, their
//! channels renamed; what the policy decides (a permission, the sections a
//! session starts with) is decided here before the host or a client sees it.

mod config;
mod github_token;
mod host_process;
mod relay_error;
mod session_map;
mod uplink;
mod upstream_events;
mod upstream_session;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use ahp::Client;
use ahp_types::actions::{
    ChatErrorAction, ChatPendingMessageSetAction, ChatToolCallConfirmedAction,
    ChatTurnCancelledAction, SessionCreationFailedAction, SessionReadyAction, StateAction,
};
use ahp_types::state::{
    ErrorInfo, ErrorResponsePart, PendingMessageKind, ToolCallConfirmationReason,
};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use self::session_map::{RelaySessions, Relayed, Turn};
use crate::ahp::uri::{chat_uri_of, file_uri_of};
use crate::ahp::Host;
use crate::ahp::{Backend, ClientPhase, Dispatcher};
use crate::audit::AuditLog;
use crate::bridge::turn_mapper::{user_message, user_turn_started};
use crate::config::{OnFailure, RuntimeConfig, Secret};
use crate::policy::PolicyReader;
use crate::upstream;
use crate::upstream::UpstreamError;
use ahp_types::common::JsonObject;

use self::host_process::HostProcess;
pub(crate) use github_token::GithubToken;
pub(crate) use relay_error::RelayError;
pub(crate) use uplink::start;
use upstream_session::OperatorSection;

/// What a turn in flight ends with when the link to the host is lost.
pub(crate) const LINK_LOST: &str =
    "the agent host connection was lost during the turn; send the message again";

/// How long after the bridge cancels a turn the host may still refuse the
/// next as "still being cancelled" (observed: tens of milliseconds).
const CANCEL_SETTLE: Duration = Duration::from_secs(5);

/// What a turn on a session the host does not have ends with.
const NOT_LINKED: &str = "the session is not linked to the agent host";

/// What the relay is started with, read from the config at start.
pub(crate) struct RelaySettings {
    /// `[runtime]`: the command, `connect`, `[runtime.env]`, the deadlines.
    pub runtime: RuntimeConfig,
    /// Where a host the bridge starts keeps its state (its HOME).
    pub home: PathBuf,
    /// `[runtime.ahp] connection_token_file`'s token, read at start.
    pub connection_token: Option<Secret>,
    /// Where the GitHub token is read at each connection.
    pub github: GithubToken,
    /// The policy in force (a reload replaces it).
    pub policy: PolicyReader,
    /// The audit log a session's sections are recorded in, with `[audit]`
    /// `include_content` and `on_failure`.
    pub audit: Option<Arc<AuditLog>>,
    pub include_content: bool,
    pub on_failure: OnFailure,
}

/// The backend that relays to the runtime's AHP host.
pub struct Relay {
    me: Weak<Relay>,
    host: Weak<Host>,
    settings: RelaySettings,
    sessions: RelaySessions,
    /// The client of the current link; `None` while the link is down.
    client: Mutex<Option<Client>>,
    /// The one `clientId` the bridge has upstream, for its whole life: its
    /// echoes are recognised by it.
    client_id: String,
    /// Actions for the host, sent in the order they were queued by one
    /// task, so a confirmation never overtakes the turn it belongs to.
    outbound: tokio::sync::mpsc::UnboundedSender<(String, StateAction)>,
    /// The host the bridge started (without `connect`).
    process: HostProcess,
    stop: CancellationToken,
}

impl Relay {
    /// The relay, not linked yet ([`start`] links it).
    fn new(host: &Arc<Host>, settings: RelaySettings) -> Arc<Self> {
        let (outbound, queued) = tokio::sync::mpsc::unbounded_channel();
        let relay = Arc::new_cyclic(|me| Self {
            me: me.clone(),
            host: Arc::downgrade(host),
            settings,
            sessions: RelaySessions::default(),
            client: Mutex::new(None),
            client_id: format!("ahp-copilot-bridge-{}", uuid::Uuid::new_v4().simple()),
            outbound,
            process: HostProcess::default(),
            stop: CancellationToken::new(),
        });
        tokio::spawn(send_in_order(Arc::downgrade(&relay), queued));
        relay
    }

    fn host(&self) -> Option<Arc<Host>> {
        self.host.upgrade()
    }

    fn client(&self) -> Option<Client> {
        self.client
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set_client(&self, c: Option<Client>) {
        *self.client.lock().unwrap_or_else(|e| e.into_inner()) = c;
    }

    /// The pid of the host the bridge started, while it runs.
    pub async fn host_pid(&self) -> Option<u32> {
        self.process.pid().await
    }

    /// Whether the link to the host is up (authenticated).
    pub fn linked(&self) -> bool {
        self.client().is_some()
    }

    /// Dispatches `action` on the host's `channel`; a failure is logged
    /// (the link's loss is the supervisor's to handle).
    async fn send_up(&self, channel: &str, action: StateAction) {
        let Some(client) = self.client() else {
            warn!(%channel, "no link to the agent host: an action was not sent");
            return;
        };
        if let Err(e) = upstream::dispatch(&client, channel, action).await {
            warn!(%channel, "the agent host did not take an action: {e}");
        }
    }

    /// Dispatches `action` on the bridge's own `channel`; a refusal is a
    /// mismatch between the two hosts' states, counted.
    fn send_north(&self, channel: &str, action: StateAction) {
        let Some(host) = self.host() else { return };
        if let Err(r) = host.dispatch(channel, action) {
            crate::telemetry::metrics().runtime_mismatch("agent_host_action");
            warn!(%channel, "an action of the agent host did not apply here: {}", r.0);
        }
    }

    /// Creates the upstream session of `north` with its sections, then
    /// says `session/ready` (or `session/creationFailed` in the host's
    /// words).
    async fn create(self: Arc<Self>, north: String) {
        let result = self.create_upstream(&north, new_upstream_id()).await;
        let action = match result {
            Ok(()) => StateAction::SessionReady(SessionReadyAction {}),
            Err(e) => {
                self.sessions.remove(&north);
                warn!(session = %north, "the agent host did not create the session: {e}");
                StateAction::SessionCreationFailed(SessionCreationFailedAction {
                    error: ErrorInfo {
                        error_type: "agentHost".into(),
                        message: e.to_string(),
                        stack: None,
                        meta: None,
                    },
                })
            }
        };
        self.send_north(&north, action);
    }

    /// Creates `north`'s session on the host as `up`.
    async fn create_upstream(&self, north: &str, up: String) -> Result<(), RelayError> {
        let host = self.host().ok_or(RelayError::Stopping)?;
        let client = self.client().ok_or(RelayError::NotLinked)?;
        let dirs: Vec<String> = host
            .for_backend()
            .working_directories(north)
            .iter()
            .map(|p| file_uri_of(p))
            .collect();
        let start = host
            .for_backend()
            .session_start(north)
            .ok_or(RelayError::Stopping)?;
        let policy = self.settings.policy.current();
        // The operator's sections as the policy in force has them (a
        // reload changes them for the sessions created after it).
        let operator = OperatorSection::all_of(policy.overrides());
        let deciders = upstream_session::Deciders {
            policy: &policy,
            governor: host.governor(),
            operator: &operator,
            include_content: self.settings.include_content,
        };
        let plan = deciders.plan(north, &up, &start);
        let mut config = self.audit_start(plan).await;
        // The host's own settings the session was created with (`mode`, ...).
        config.extend(config::for_host(&start.backend_settings));
        self.sessions.add(north, &chat_uri_of(north), &up);
        let state = upstream::create_session(&client, &up, dirs, config).await?;
        if let Some(chat) = &upstream::default_chat(&state) {
            self.sessions.set_up_chat(north, chat);
            upstream::subscribe(&client, chat).await?;
        }
        host.for_backend().set_backend_ref(north, &up);
        info!(session = %north, upstream = %up, "session relayed to the agent host");
        Ok(())
    }

    /// Writes the session's `session_sections` record before the host is
    /// asked (audit before effect); the config to send. A record that
    /// cannot be written keeps the client's sections out under
    /// `[audit] on_failure = "keep-original"`.
    async fn audit_start(&self, plan: upstream_session::SectionPlan) -> JsonObject {
        let Some(log) = self.settings.audit.clone() else {
            return plan.config;
        };
        let record = plan.record.clone();
        let written = tokio::task::spawn_blocking(move || log.append(&record)).await;
        let failed = match written {
            Ok(Ok(_)) => return plan.config,
            Ok(Err(e)) => e.to_string(),
            Err(e) => e.to_string(),
        };
        error!(session = %plan.record.session, "session_sections record not written: {failed}");
        match self.settings.on_failure {
            OnFailure::KeepOriginal => plan.without_client_sections(),
            OnFailure::Continue => plan.config,
        }
    }

    fn start_turn(&self, north: &str, turn_id: String, text: String, by: Option<Dispatcher>) {
        let mapped = self.sessions.with(north, |r| {
            r.turn = Some(Turn::new(turn_id.clone(), text.clone(), by));
            r.up_chat.clone()
        });
        let started = user_turn_started(turn_id.clone(), text);
        match mapped {
            Some(Some(up_chat)) => self.queue_up(up_chat, started),
            // Restored, or linked again, and its chat not subscribed yet:
            // subscribed first, then the turn goes.
            Some(None) => {
                let (Some(me), north) = (self.me.upgrade(), north.to_owned()) else {
                    return;
                };
                tokio::spawn(async move {
                    me.resubscribe(&north).await;
                    match me.sessions.with(&north, |r| r.up_chat.clone()).flatten() {
                        Some(chat) => me.queue_up(chat, started),
                        None => {
                            me.sessions.with(&north, |r| r.turn = None);
                            me.end_turn_north(&north, &turn_id, NOT_LINKED);
                        }
                    }
                });
            }
            None => self.end_turn_north(north, &turn_id, NOT_LINKED),
        }
    }

    /// Ends `turn_id` on the bridge's side with an error saying `why`.
    fn end_turn_north(&self, north: &str, turn_id: &str, why: &str) {
        let error = StateAction::ChatError(ChatErrorAction {
            turn_id: turn_id.to_owned(),
            duration: 0,
            part: ErrorResponsePart {
                error: ErrorInfo {
                    error_type: "agentHost".into(),
                    message: why.to_owned(),
                    stack: None,
                    meta: None,
                },
                resumable: None,
            },
            meta: None,
        });
        self.send_north(&chat_uri_of(north), error);
    }

    /// Starts the chat's next queued message, if no turn runs.
    fn start_queued_if_idle(&self, north: &str) {
        if self.sessions.with(north, |r| r.turn.is_some()) != Some(false) {
            return;
        }
        let Some(host) = self.host() else { return };
        if let Some(next) = host.for_backend().start_next_queued(&chat_uri_of(north)) {
            self.start_turn(north, next.turn_id, next.text, None);
        }
    }

    /// Subscribes to `north`'s upstream session and its default chat again.
    async fn resubscribe(&self, north: &str) {
        let (Some(client), Some(up)) = (self.client(), self.sessions.with(north, |r| r.up.clone()))
        else {
            return;
        };
        let chat = match upstream::session_state(&client, &up).await {
            Ok(state) => upstream::default_chat(&state),
            Err(UpstreamError::NotFound { .. }) => return self.start_afresh(north, &up).await,
            Err(e) => {
                warn!(session = %north, upstream = %up, "the agent host does not have the session: {e}");
                return;
            }
        };
        let Some(chat) = chat else {
            warn!(session = %north, upstream = %up, "the agent host's session has no chat");
            return;
        };
        self.sessions.set_up_chat(north, &chat);
        if let Err(e) = upstream::subscribe(&client, &chat).await {
            warn!(session = %north, "the agent host's chat was not subscribed: {e}");
        }
    }

    /// Creates afresh, under a new upstream id, a relayed session its host
    /// does not have (the host stopped before it stored it, or its state is
    /// gone): the client keeps its session, and the model does not see the
    /// earlier turns, as when the runtime cannot resume a session on the
    /// JSON-RPC side.
    /// Once only: a turn's resubscribe and the restore's may both find
    /// the session lost, and the one that comes second finds it replaced.
    async fn start_afresh(&self, north: &str, lost: &str) {
        let up = new_upstream_id();
        if !self.sessions.replace_up(north, lost, &up) {
            return;
        }
        warn!(session = %north, upstream = %lost, "the agent host does not have the session; starting it afresh: the model will not see the earlier turns");
        if let Err(e) = self.create_upstream(north, up).await {
            warn!(session = %north, "the agent host did not create the session afresh: {e}");
        }
    }

    /// A client's steering message for `north`'s running turn goes to the
    /// host's turn, taken out of the bridge's state as the JSON-RPC side
    /// takes it; without a running turn it stays pending here.
    fn steer(&self, north: &str, chat: &str) {
        let (Some((up_chat, _)), Some(host)) = (self.turn_of(north), self.host()) else {
            return;
        };
        let Some(text) = host.for_backend().take_steering(chat) else {
            return;
        };
        let steering = StateAction::ChatPendingMessageSet(ChatPendingMessageSetAction {
            kind: PendingMessageKind::Steering,
            id: uuid::Uuid::new_v4().to_string(),
            message: user_message(text),
        });
        self.queue_up(up_chat, steering);
    }

    /// Tells the host to cancel `turn` of `north`'s chat.
    fn cancel_upstream(&self, north: &str, turn_id: String) {
        let chat = self.sessions.with(north, |r| {
            r.cancelled_at = Some(Instant::now());
            r.up_chat.clone()
        });
        let Some(Some(chat)) = chat else { return };
        self.queue_up(chat, cancelled(turn_id));
    }

    /// The host refuses a turn sent while it still finishes cancelling the
    /// one before (a `sendFailed` error before any word about the turn; it
    /// says nothing when a cancel is done, and its chat reads idle at
    /// once). Within [`CANCEL_SETTLE`] of the bridge's cancel the turn is
    /// sent again after a pause that doubles, instead of ending: `true`
    /// when it will be.
    fn send_again_if_cancelling(&self, r: &Relayed, error: &ChatErrorAction) -> bool {
        let (Some(turn), Some(at)) = (&r.turn, r.cancelled_at) else {
            return false;
        };
        if turn.up_id != error.turn_id
            || turn.spoke
            || error.part.error.error_type != "sendFailed"
            || at.elapsed() > CANCEL_SETTLE
        {
            return false;
        }
        let (Some(me), Some(chat)) = (self.me.upgrade(), r.up_chat.clone()) else {
            return false;
        };
        let pause = Duration::from_millis(50) * 2u32.pow(turn.resent.min(5));
        let (north, id, text) = (r.north.clone(), turn.id.clone(), turn.text.clone());
        info!(session = %north, turn = %id, "the agent host was still cancelling the turn before; the turn is sent again");
        tokio::spawn(async move {
            tokio::time::sleep(pause).await;
            if let Some(up_id) = me.sessions.resend(&north, &id) {
                me.queue_up(chat, user_turn_started(up_id, text));
            }
        });
        true
    }

    /// The upstream chat and running turn of `north`, for an action about it.
    fn turn_of(&self, north: &str) -> Option<(String, String)> {
        self.sessions
            .with(north, |r| {
                Some((r.up_chat.clone()?, r.turn.as_ref()?.up_id.clone()))
            })
            .flatten()
    }

    /// Ends each turn the host has been silent on for `[runtime]
    /// turn_inactivity_timeout` (waiting on a client does not count), and
    /// tells the host to cancel it: a host whose model calls fail before
    /// any answer holds a turn with no word at all.
    fn end_silent_turns(&self) {
        let limit = self.settings.runtime.turn_inactivity_timeout;
        for (r, turn) in self.sessions.take_silent(limit) {
            let shown = humantime::format_duration(limit);
            let why = format!("the agent host sent nothing for {shown} ([runtime] turn_inactivity_timeout); the turn is stopped");
            warn!(session = %r.north, turn = %turn.id, "{why}");
            self.end_turn_north(&r.north, &turn.id, &why);
            self.cancel_upstream(&r.north, turn.up_id);
        }
    }

    /// Ends every running turn with "the host is shutting down" and tells
    /// the host to cancel it.
    pub async fn end_turns_for_shutdown(&self) {
        for (r, turn) in self.sessions.take_running() {
            self.end_turn_north(&r.north, &turn.id, crate::bridge::turn::SHUTTING_DOWN);
            if let Some(chat) = &r.up_chat {
                // Sent now, not queued: the link goes next.
                self.send_up(chat, cancelled(turn.up_id)).await;
            }
        }
    }

    /// Stops the link and a host the bridge started.
    pub async fn stop(&self) {
        self.stop.cancel();
        if let Some(c) = self.client() {
            c.shutdown().await;
        }
        self.process.stop().await;
    }
}

impl Backend for Relay {
    fn session_created(&self, session: &str) {
        if let Some(me) = self.me.upgrade() {
            tokio::spawn(me.create(session.to_owned()));
        }
    }

    fn session_restored(&self, session: &str, backend_ref: Option<&str>) {
        // The host keeps its sessions across restarts: the same upstream
        // session is subscribed again, now (the bridge restored it after it
        // linked) and at each new link.
        let Some(up) = backend_ref else { return };
        self.sessions.add(session, &chat_uri_of(session), up);
        if let Some(me) = self.me.upgrade() {
            let north = session.to_owned();
            tokio::spawn(async move { me.resubscribe(&north).await });
        }
    }

    fn session_disposed(&self, session: &str) {
        let Some(r) = self.sessions.remove(session) else {
            return;
        };
        let Some(client) = self.client() else { return };
        tokio::spawn(async move {
            if let Err(e) = upstream::dispose_session(&client, &r.up).await {
                warn!(upstream = %r.up, "the agent host did not dispose the session: {e}");
            }
        });
    }

    fn phase(&self, session: &str, phase: ClientPhase) {
        match phase {
            ClientPhase::TurnStarted {
                turn_id, text, by, ..
            } => self.start_turn(session, turn_id, text, Some(by)),
            ClientPhase::PendingMessageSet {
                steering: false, ..
            } => self.start_queued_if_idle(session),
            ClientPhase::TurnCancelled { .. } => {
                let Some(turn) = self.sessions.with(session, |r| r.turn.take()).flatten() else {
                    return;
                };
                self.cancel_upstream(session, turn.up_id);
            }
            ClientPhase::ToolCallConfirmed {
                tool_call_id,
                approved,
            } => {
                let Some((chat, turn_id)) = self.turn_of(session) else {
                    return;
                };
                self.sessions.set_waiting(session, false);
                let confirmed = StateAction::ChatToolCallConfirmed(ChatToolCallConfirmedAction {
                    turn_id,
                    tool_call_id,
                    meta: None,
                    approved,
                    confirmed: Some(ToolCallConfirmationReason::UserAction),
                    reason: None,
                    edited_tool_input: None,
                    user_suggestion: None,
                    reason_message: None,
                    selected_option_id: None,
                });
                self.queue_up(chat, confirmed);
            }
            ClientPhase::InputCompleted(a) => {
                let Some((chat, _)) = self.turn_of(session) else {
                    return;
                };
                self.sessions.set_waiting(session, false);
                self.queue_up(chat, StateAction::ChatInputCompleted(a));
            }
            ClientPhase::PendingMessageSet {
                steering: true,
                chat,
            } => self.steer(session, &chat),
            ClientPhase::ConfigChanged(mut a) => {
                a.config = config::for_host(&a.config);
                let up = self.sessions.with(session, |r| r.up.clone());
                if let (Some(up), false) = (up, a.config.is_empty()) {
                    self.queue_up(up, StateAction::SessionConfigChanged(a));
                }
            }
            // Client tools and plugins are not relayed (docs/agent-host.md).
            ClientPhase::ToolCallCompleted { .. }
            | ClientPhase::ActiveClientSet { .. }
            | ClientPhase::ActiveClientRemoved { .. } => {}
        }
    }
}

impl Relay {
    /// Queues `action` for the host's `channel`, after what was queued before.
    fn queue_up(&self, channel: String, action: StateAction) {
        let _ = self.outbound.send((channel, action));
    }
}

/// An upstream session id of the bridge's choosing, never derived from the
/// client's URI.
fn new_upstream_id() -> String {
    format!("copilot:/{}", uuid::Uuid::new_v4())
}

/// The bridge cancelling `turn_id` on the host.
fn cancelled(turn_id: String) -> StateAction {
    StateAction::ChatTurnCancelled(ChatTurnCancelledAction {
        turn_id,
        duration: 0,
        meta: None,
    })
}

/// Sends what [`Relay::queue_up`] queued, one at a time, until the relay goes.
async fn send_in_order(
    relay: Weak<Relay>,
    mut queued: tokio::sync::mpsc::UnboundedReceiver<(String, StateAction)>,
) {
    while let Some((channel, action)) = queued.recv().await {
        let Some(r) = relay.upgrade() else { return };
        r.send_up(&channel, action).await;
    }
}
