//! The bridge: the only place that joins the north side (the AHP host), the
//! south side (the runtime) and the transform core. One runtime session per
//! AHP session. Its state is owned in parts: the sessions ([`bridged_sessions`],
//! each a [`session::BridgedSession`] whose running turn is [`turn::RunningTurn`]),
//! the runtimes ([`pool`]), the transform router, the customizations
//! ([`customizing`], over [`custom`]). A change of a session returns
//! [`effects::Effects`] (typed actions, runtime calls), carried out here
//! once the lock is released.
//!
//! - north -> south: the host's `ClientPhase`s, in [`phases`]; the turn's
//!   life and the binding of its runtime session, here;
//! - south -> north: runtime events and requests, in [`runtime_side`];
//! - what a turn maps to: [`turn_mapper`] (events), [`user_input`] (questions);
//!   its spans: [`turn_trace`]; its inactivity deadline: [`silence`];
//! - what a runtime session is bound to: [`binding`];
//! - transforms: the router asks clients through [`transform_clients`] and
//!   writes through [`audit_port`].

pub(crate) mod audit_channel;
pub(crate) mod audit_port;
pub(crate) mod binding;
mod bridge_settings;
mod bridged_sessions;
pub(crate) mod custom;
mod customizing;
pub(crate) mod decisions;
mod effects;
mod permission;
mod phases;
mod placement;
mod pool;
pub(crate) mod relay;
pub(crate) mod runtime_side;
pub(crate) mod sdk;
mod session;
pub(crate) mod shutdown;
mod silence;
pub(crate) mod transform_clients;
pub(crate) mod turn;
mod turn_error;
pub(crate) mod turn_mapper;
mod turn_trace;
pub(crate) mod user_input;

use std::sync::{Arc, Weak};
use std::time::Duration;

use tracing::{info, warn};

use self::binding::Binding;
pub(crate) use self::bridge_settings::BridgeSettings;
use self::bridged_sessions::BridgedSessions;
use self::custom::CustomizationState;
use self::customizing::{AgentChange, Customizing};
use self::effects::{Effects, MirrorChanges};
pub(crate) use self::pool::ReachError;
use self::pool::{Pool, Starts};
use self::sdk::{Parts, SdkGate};
use self::session::{BridgedSession, DRAIN_LIMIT};
use self::shutdown::Stop;
pub use self::transform_clients::HostClients;
use self::turn::{mirror_id, TurnOver, TurnRequest, SHUTTING_DOWN};
use self::turn_error::TurnError;
use self::turn_trace::TurnSpans;
use crate::ahp::Host;
use crate::audit::AuditLog;
use crate::config::Reloadable;
use crate::policy::PolicyReader;
use crate::runtime::{
    agent_deselect_params, agent_select_params, model_switch_params, send_params, AgentDeselect,
    AgentSelect, Method, ModelSwitch, RuntimeConn, Secret, SessionConfig, SessionDestroy,
    SessionRef, SessionSend,
};
use crate::telemetry::{Causes, CheckFailed};
use crate::transform::Router;

pub struct Bridge {
    me: Weak<Bridge>,
    host: Weak<Host>,
    /// Read at start; a reload reaches the bridge through
    /// [`Bridge::reload_customizations`] and the policy reader only.
    settings: BridgeSettings,
    router: Arc<Router>,
    /// The policy in force, for bindings (the router reads the same one).
    policy: PolicyReader,
    pool: Arc<Pool>,
    sessions: BridgedSessions,
    /// What a graceful stop waits on and reaches.
    stop: Stop,
    /// The customizations of its sessions (`customization` records go to
    /// the audit log from there; the router writes its own).
    customizing: Arc<Customizing>,
    /// Told when a reload changed the customization folders to watch.
    rewatch: Arc<tokio::sync::Notify>,
}

impl Bridge {
    pub fn new(
        host: &Arc<Host>,
        settings: BridgeSettings,
        reloadable: Reloadable<'_>,
        router: Arc<Router>,
        policy: PolicyReader,
        audit: Option<Arc<AuditLog>>,
    ) -> Arc<Self> {
        let customizing = Customizing::new(
            CustomizationState::new(reloadable),
            Arc::downgrade(host),
            policy.clone(),
            audit,
        );
        let bridge = Arc::new_cyclic(|me| Self {
            me: me.clone(),
            host: Arc::downgrade(host),
            pool: Arc::new(Pool::new(&settings.runtime, settings.sdk.is_some())),
            settings,
            router,
            policy,
            sessions: BridgedSessions::default(),
            stop: Stop::new(),
            customizing,
            rewatch: Arc::new(tokio::sync::Notify::new()),
        });
        bridge.watch_host_folders();
        bridge
    }

    /// What a graceful stop waits on (the SDK apps' connections, the
    /// runtime's requests).
    pub fn shutdown(&self) -> &Stop {
        &self.stop
    }

    /// Ends every running turn with [`SHUTTING_DOWN`] and answers what the
    /// runtime waits on for it (permissions denied, client tools failed,
    /// questions unanswered, the message aborted). From now on no runtime is
    /// started. The clients are still connected: they see the end. SDK
    /// apps' turns end too, each app told, while observers still watch.
    pub async fn end_turns_for_shutdown(&self) {
        self.pool.stop_starting();
        if let Some(gate) = self.stop.gate() {
            gate.stop();
        }
        let ended = self
            .sessions
            .change_all(|s, fx| s.shut_down(SHUTTING_DOWN, fx));
        info!(
            turns = ended.len(),
            "shutting down: ending the running turns"
        );
        for fx in ended {
            let conn = self.pool.live(fx.slot).await;
            let (calls, runtime_id) = (fx.calls.clone(), fx.runtime_id.clone());
            self.carry_out(Effects {
                calls: vec![],
                ended: None,
                ..fx
            });
            let Some(conn) = &conn else { continue };
            for c in calls {
                if let Err(e) = c.make(conn, &runtime_id).await {
                    warn!(method = c.method(), "runtime call at shutdown failed: {e}");
                }
            }
        }
    }

    /// Stops every runtime of the pool, at once.
    pub async fn stop_runtime(&self) {
        self.pool.stop_all().await;
    }

    /// A reload's `[customizations]` and `[policy.customizations]` put in
    /// force (see [`Customizing::reconfigured`]); the folders watched anew.
    pub async fn reload_customizations(&self, cfg: Reloadable<'_>) {
        if self
            .customizing
            .reconfigured(cfg, &self.sessions.uris())
            .await
        {
            self.rewatch.notify_one();
        }
    }

    /// Watches the host's customization folders for as long as the bridge
    /// lives (see [`Customizing::watch_folders`]).
    fn watch_host_folders(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        self.customizing
            .watch_folders(self.rewatch.clone(), move || {
                me.upgrade().map(|b| b.sessions.uris())
            });
    }

    /// The gate SDK apps connect through (`[sdk]`), on this bridge's pool,
    /// router and policy; `None` without `[sdk]`.
    pub fn sdk_gate(&self, audit: Option<Arc<AuditLog>>) -> Option<Arc<SdkGate>> {
        let owner: Weak<dyn Starts> = self.me.clone();
        let parts = Parts {
            host: self.host.clone(),
            pool: self.pool.clone(),
            owner,
            router: self.router.clone(),
            policy: self.policy.clone(),
            customizing: self.customizing.clone(),
            governor: self.host().map(|h| h.governor().clone())?,
        };
        let gate = SdkGate::new(self.settings.sdk.clone()?, parts, audit);
        Some(self.stop.keep_gate(gate))
    }

    fn host(&self) -> Option<Arc<Host>> {
        self.host.upgrade()
    }

    /// Carries out what a change of a session asked for: its runtime calls,
    /// in order, in the background; then its actions, in order; then the
    /// mirrors of tool calls that wait on a client; then the next queued
    /// message if a turn ended.
    fn carry_out(&self, fx: Effects) {
        // The runtime is answered whether or not the host is still there.
        if !fx.calls.is_empty() {
            let (calls, runtime_id) = (fx.calls.clone(), fx.runtime_id.clone());
            let me = self.me.clone();
            let slot = fx.slot;
            tokio::spawn(async move {
                let Some(b) = me.upgrade() else { return };
                match b.runtime(slot).await {
                    Ok((conn, _)) => {
                        for c in calls {
                            if let Err(e) = c.make(&conn, &runtime_id).await {
                                warn!(method = c.method(), "runtime call failed: {e}");
                            }
                        }
                    }
                    Err(e) => warn!("no runtime for {} call(s): {}", calls.len(), Causes(&e)),
                }
            });
        }
        let Some(host) = self.host() else { return };
        for (channel, a) in fx.actions {
            if let Err(e) = host.dispatch(&channel, a) {
                warn!(channel, "host refused a bridge action: {e}");
            }
        }
        for m in &fx.mirrors {
            self.mirror(&host, &fx.session, m);
        }
        if let Some(chat) = fx.ended {
            self.start_queued_if_idle(&fx.session, &chat);
        }
    }

    /// Mirrors a tool call that waits on a client (its confirmation, or its
    /// execution by its owner) into the session's `inputNeeded`, carrying
    /// the tool call as the chat state has it now. Set only while the call
    /// still waits, checked and set under the bridged sessions' lock: an answer or a
    /// removal that came first must not be followed by a stale entry.
    fn mirror(&self, host: &Host, uri: &str, m: &MirrorChanges) {
        let Some((turn_id, call)) = host.for_backend().tool_call(&m.chat, &m.tool_call_id) else {
            return;
        };
        let Some(request) = effects::mirror_request(mirror_id(&m.tool_call_id), m, turn_id, call)
        else {
            return;
        };
        self.sessions.with(uri, |s| {
            if s.waits_on_client(&m.tool_call_id) {
                let _ = host.dispatch(uri, request);
            }
        });
    }

    /// Calls runtime `slot` and logs a failure: for answers nobody here waits on.
    async fn call_runtime<M: Method>(&self, slot: usize, params: M::Params) {
        let method = M::NAME;
        match self.runtime(slot).await {
            Ok((conn, _)) => {
                if let Err(e) = conn.call::<M>(&params).await {
                    warn!(method, "runtime call failed: {e}");
                }
            }
            Err(e) => warn!(method, "no runtime: {}", Causes(&e)),
        }
    }

    /// Runtime `slot`, started (or restarted) on demand.
    pub async fn runtime(&self, slot: usize) -> Result<(Arc<RuntimeConn>, u64), ReachError> {
        let me: std::sync::Weak<dyn Starts> = self.me.clone();
        self.pool.runtime(slot, me).await
    }

    /// The first runtime's process id (None before it starts, or over TCP):
    /// for an operator's diagnostics, and for tests that kill it.
    pub async fn runtime_pid(&self) -> Option<u32> {
        self.runtime_pids().await.into_iter().flatten().next()
    }

    /// Whether the runtimes serve, for a readiness probe (see `Pool::health`).
    pub async fn runtime_health(&self, timeout: Duration) -> Result<(), CheckFailed> {
        let me: Weak<dyn Starts> = self.me.clone();
        self.pool.health(timeout, me).await
    }

    /// Each runtime's process id, by slot.
    pub async fn runtime_pids(&self) -> Vec<Option<u32>> {
        self.pool.pids().await
    }

    /// Which runtime a session lives on.
    pub fn slot_of_session(&self, uri: &str) -> Option<usize> {
        self.sessions.with(uri, |s| s.placement().slot())
    }

    // ── a turn's life ────────────────────────────────────────────────────

    /// Runs a turn: waits until the session is idle (a cancelled turn's
    /// tail must not end this one), binds the runtime session as the AHP
    /// state wants it, switches the model if the message chose another, and
    /// sends the message. A failure ends the turn with `chat/error`.
    async fn start_turn(self: Arc<Self>, uri: String, turn: TurnRequest) {
        let Some((gate, mut idle)) = self.sessions.with(&uri, |s| (s.gate(), s.idle_watch()))
        else {
            return;
        };
        let _g = gate.lock().await;
        if tokio::time::timeout(DRAIN_LIMIT, idle.wait_for(|is_idle| *is_idle))
            .await
            .is_err()
        {
            warn!(session = %uri, "the runtime did not go idle after a cancel within {DRAIN_LIMIT:?}; sending anyway");
        }
        let model = turn.model.as_deref();
        let asked = turn
            .model
            .clone()
            .unwrap_or_else(|| self.session_model(&uri));
        let spans = TurnSpans::start(&uri, &turn.turn_id, &asked, turn.by.as_ref());
        let by = turn.by.as_ref().map(|b| b.client_id.clone());
        let begun = |s: &mut BridgedSession| s.begin(&turn.turn_id, &turn.chat, model, spans, by);
        let Some(over) = self.sessions.with(&uri, begun) else {
            return;
        };
        tokio::spawn(Self::end_if_silent(
            self.me.clone(),
            uri.clone(),
            turn.turn_id.clone(),
            over,
        ));
        if let Err(e) = self.send(&uri, &turn).await {
            warn!(session = %uri, "turn not started: {}", Causes(&e));
            let msg = Causes(&e).to_string();
            if let Some(fx) = self
                .sessions
                .change(&uri, |s, fx| s.fail("runtime", &msg, fx))
            {
                self.carry_out(fx);
            }
        }
    }

    /// Ends turn `turn_id` when the runtime says nothing for it for
    /// `[runtime] turn_inactivity_timeout` (time spent waiting on a client
    /// does not count): a runtime that answers pings but never finishes
    /// must not hold the turn, and the session, forever. Returns as soon
    /// as the turn is over (`over`).
    async fn end_if_silent(me: Weak<Self>, uri: String, turn_id: String, over: TurnOver) {
        let Some(limit) = me
            .upgrade()
            .map(|b| b.settings.runtime.turn_inactivity_timeout)
        else {
            return;
        };
        let look = || {
            let b = me.upgrade()?;
            b.sessions.with(&uri, |s| s.last_heard(&turn_id)).flatten()
        };
        if !silence::silent(limit, over, look).await {
            return;
        }
        let Some(b) = me.upgrade() else { return };
        let shown = humantime::format_duration(limit);
        let why = format!("the agent runtime sent nothing for {shown} ([runtime] turn_inactivity_timeout); the turn is stopped");
        warn!(session = %uri, turn = %turn_id, "{why}");
        b.change(&uri, |s, fx| s.silent(&why, fx));
    }

    async fn send(&self, uri: &str, turn: &TurnRequest) -> Result<(), TurnError> {
        let (conn, runtime_id) = self.ensure_bound(uri).await?;
        self.switch_model(&conn, uri, &runtime_id, turn.model.as_deref())
            .await?;
        self.select_agent(&conn, uri, &runtime_id, turn.agent.as_deref())
            .await?;
        conn.call::<SessionSend>(&send_params(&runtime_id, &turn.prompt))
            .await
            .map_err(TurnError::call(SessionSend::NAME))?;
        // From its first message on, the runtime keeps the session on disk:
        // from now on a restart resumes it, so the host stores it.
        if self.sessions.with(uri, |s| s.placement_mut().persist()) == Some(true) {
            if let Some(h) = self.host() {
                h.for_backend().set_backend_ref(uri, &runtime_id);
            }
        }
        Ok(())
    }

    /// Creates, resumes or re-binds the runtime session so that it matches the
    /// AHP state now. Registration is fixed at create/resume, so a change of
    /// opt-ins, owners, tools or policy means destroy + resume (history kept).
    async fn ensure_bound(&self, uri: &str) -> Result<(Arc<RuntimeConn>, String), TurnError> {
        let gone = || TurnError::SessionGone(uri.to_owned());
        let slot = self.slot_of_session(uri).ok_or_else(gone)?;
        let (conn, generation) = self.runtime(slot).await?;
        let host = self.host().ok_or(TurnError::HostGone)?;
        let policy = self.policy.current();
        let mut want = Binding::derive(&policy, &host.for_backend().active_clients(uri));
        let custom = self.customizing.for_runtime(uri).await;
        want.customizations = custom.fields;
        let (runtime_id, bound, persisted) = self
            .sessions
            .with(uri, |s| {
                let bound = s.placement().binding_in(generation).cloned();
                (
                    s.placement().runtime_id().to_owned(),
                    bound,
                    s.placement().persisted(),
                )
            })
            .ok_or_else(gone)?;
        if bound.as_ref() == Some(&want) {
            return Ok((conn, runtime_id));
        }
        let model = self.session_model(uri);
        let config = SessionConfig {
            session_id: runtime_id.clone(),
            model: model.clone(),
            working_directory: self.working_directory(&host, uri),
            tools: want.runtime_tools(),
            provider: self.settings.model_provider(),
            system_message: want.system_message(&policy),
            github_token: host.for_backend().github_token_for(uri).map(Secret),
            customizations: want.customizations.clone(),
        };
        if bound.is_some() {
            info!(session = uri, registered = ?want.registered, owners = ?want.owners, "opt-ins, owners, tools, policy or customizations changed; re-binding the runtime session");
            if let Err(e) = conn
                .call::<SessionDestroy>(&SessionRef::new(&runtime_id))
                .await
            {
                tracing::debug!("session.destroy before re-bind: {e}");
            }
        }
        binding::bind(&conn, uri, &config, persisted, bound.is_none()).await?;
        self.customizing.write_records(custom.records);
        self.sessions
            .with(uri, |s| s.placement_mut().bound(want, generation, model));
        Ok((conn, runtime_id))
    }

    /// The working directory a runtime session is given: the session's
    /// first, else `[runtime] working_directory`, else the bridge's own.
    fn working_directory(&self, host: &Host, uri: &str) -> String {
        host.for_backend()
            .working_directories(uri)
            .into_iter()
            .next()
            .or_else(|| self.settings.runtime.working_directory.clone())
            .or_else(|| std::env::current_dir().ok())
            .map_or_else(|| "/".into(), |p| p.display().to_string())
    }

    /// The model a (re)bind gives the runtime session of `uri`: the one it
    /// was last given, else its session config's, else `[runtime] model`.
    fn session_model(&self, uri: &str) -> String {
        let current = self
            .sessions
            .with(uri, |s| s.placement().model().map(String::from))
            .flatten();
        current
            .or_else(|| self.host().and_then(|h| h.for_backend().session_model(uri)))
            .unwrap_or_else(|| self.settings.runtime.model.clone())
    }

    /// Switches the runtime session to `wanted` when it uses another model
    /// (the runtime re-renders the prompt, so opted-in clients are asked
    /// again and the audit records it).
    async fn switch_model(
        &self,
        conn: &RuntimeConn,
        uri: &str,
        runtime_id: &str,
        wanted: Option<&str>,
    ) -> Result<(), TurnError> {
        let Some(wanted) = wanted else { return Ok(()) };
        let current = self
            .sessions
            .with(uri, |s| s.placement().model().map(String::from))
            .flatten();
        if current.as_deref() == Some(wanted) {
            return Ok(());
        }
        conn.call::<ModelSwitch>(&model_switch_params(runtime_id, wanted))
            .await
            .map_err(TurnError::call(ModelSwitch::NAME))?;
        info!(session = %uri, from = ?current, to = %wanted, "model switched");
        self.sessions
            .with(uri, |s| s.placement_mut().set_model(wanted));
        Ok(())
    }

    /// Tells the runtime session of the custom agent the turn's message
    /// chose (`agent_uri`), or that it chose none, when that differs from
    /// what the session has selected.
    async fn select_agent(
        &self,
        conn: &RuntimeConn,
        uri: &str,
        runtime_id: &str,
        agent_uri: Option<&str>,
    ) -> Result<(), TurnError> {
        let known = self
            .sessions
            .with(uri, |s| s.placement().agent().map(|a| a.map(String::from)))
            .ok_or_else(|| TurnError::SessionGone(uri.to_owned()))?;
        let Some(change) = self.customizing.agent_change(uri, agent_uri, known) else {
            return Ok(());
        };
        let called = match &change {
            AgentChange::Select(name) => conn
                .call::<AgentSelect>(&agent_select_params(runtime_id, name))
                .await
                .map_err(TurnError::call(AgentSelect::NAME)),
            AgentChange::Deselect => conn
                .call::<AgentDeselect>(&agent_deselect_params(runtime_id))
                .await
                .map_err(TurnError::call(AgentDeselect::NAME)),
        };
        called?;
        let selected = match change {
            AgentChange::Select(name) => Some(name),
            AgentChange::Deselect => None,
        };
        self.sessions
            .with(uri, |s| s.placement_mut().set_agent(selected.as_deref()));
        Ok(())
    }

    /// Starts the next queued message of `chat` when its session is idle.
    fn start_queued_if_idle(&self, uri: &str, chat: &str) {
        if self.sessions.with(uri, |s| s.is_idle()) != Some(true) {
            return;
        }
        let (Some(host), Some(me)) = (self.host(), self.me.upgrade()) else {
            return;
        };
        let Some(next) = host.for_backend().start_next_queued(chat) else {
            return;
        };
        info!(session = %uri, turn = ?next.turn_id, "queued message starts as a turn");
        let turn = TurnRequest {
            chat: chat.to_owned(),
            turn_id: next.turn_id,
            prompt: next.text,
            model: next.model,
            agent: next.agent,
            by: None,
        };
        tokio::spawn(me.start_turn(uri.to_owned(), turn));
    }

    /// Sends the steering message of `chat` into its running turn
    /// (`session.send` mode `immediate`); while no turn runs, it stays in
    /// the state for the next one.
    fn steer(&self, uri: &str, chat: &str) {
        let running = self.sessions.with(uri, |s| s.running_chat() == Some(chat));
        if running != Some(true) {
            return;
        }
        let Some(text) = self
            .host()
            .and_then(|h| h.for_backend().take_steering(chat))
        else {
            return;
        };
        info!(session = %uri, "steering message sent into the running turn");
        let fx = self
            .sessions
            .change(uri, |_, fx| fx.call(effects::RuntimeCall::Steer(text)));
        if let Some(fx) = fx {
            self.carry_out(fx);
        }
    }

    /// Changes one session and carries out what the change asks for.
    fn change(&self, uri: &str, f: impl FnOnce(&mut session::BridgedSession, &mut Effects)) {
        if let Some(fx) = self.sessions.change(uri, f) {
            self.carry_out(fx);
        }
    }
}
