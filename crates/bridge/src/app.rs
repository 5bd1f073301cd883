//! Starting the pieces in order; shared by `serve`, `demo` and the tests.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::admin::on_disk::OnDisk;
use crate::admin::{self, ready::Readiness};
use crate::ahp::server;
use crate::ahp::tls::{Tls, TlsLoadError};
use crate::ahp::Host;
use crate::ahp::{Backend, ClientPhase};
use crate::audit::AuditError;
use crate::audit::PolicyRecord;
use crate::audit::Shipper;
use crate::audit::{AuditLog, Options, Ship};
use crate::bridge::audit_channel::AuditChannel;
use crate::bridge::audit_port::LogPort;
use crate::bridge::decisions::AuditRecorder;
use crate::bridge::relay::{GithubToken, Relay, RelayError, RelaySettings};
use crate::bridge::{Bridge, BridgeSettings};
use crate::config::{Config, Secret};
use crate::policy::{Policy, PolicySource};
use crate::start_error::StartError;
use crate::store::Store;
use crate::transform::AuditPort;
use crate::transform::{RecordOptions, Router};

/// How long shutdown waits for the syslog queue to drain.
const SHIP_FLUSH: Duration = Duration::from_secs(5);

/// The audit log and where its records are shipped.
pub struct AuditTrail {
    pub log: Arc<AuditLog>,
    pub shipper: Option<Arc<Shipper>>,
}

impl AuditTrail {
    /// At shutdown: the last checkpoint, the file synced, the queue drained.
    pub async fn close(&self) {
        let log = self.log.clone();
        match tokio::task::spawn_blocking(move || log.close()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!("audit log close: {e}"),
            Err(e) => tracing::error!("audit log close: {e}"),
        }
        if let Some(s) = &self.shipper {
            if !s.flush(SHIP_FLUSH).await {
                tracing::warn!("syslog queue not drained within {SHIP_FLUSH:?} at shutdown");
            }
        }
    }
}

/// Opens `[audit] path` with its key, rotation and shipper, its records
/// also published on `host`'s `x-audit://log`; None without a path.
pub(crate) fn open_audit(cfg: &Config, host: &Arc<Host>) -> Result<Option<AuditTrail>, AuditError> {
    let Some(p) = &cfg.audit.path else {
        return Ok(None);
    };
    let instance = cfg.server.instance();
    let mut opts = Options::from_config(&cfg.audit, instance.clone())?;
    let shipper = cfg
        .audit
        .syslog
        .as_ref()
        .map(|s| Shipper::start(s, &instance))
        .transpose()?;
    let channel = AuditChannel::start(Arc::downgrade(host), shipper.clone());
    opts.ship = Some(channel as Arc<dyn Ship>);
    let signed = opts.signer.as_ref().map(|s| s.key_id().to_owned());
    let (log, rec) = AuditLog::open_with(p, opts)?;
    host.seed_audit_tail(crate::bridge::audit_channel::tail_of(p));
    tracing::info!(path = %p.display(), records = rec.records, torn = ?rec.torn_bytes, signing_key = ?signed, "audit log open");
    Ok(Some(AuditTrail { log, shipper }))
}

/// Writes the `policy` record of `policy`: at startup, and after a reload.
pub(crate) fn audit_policy(log: &AuditLog, policy: &Policy) -> Result<(), AuditError> {
    log.append(&PolicyRecord::of(policy))?;
    Ok(())
}

/// The policy in force, logged and written as the audit log's first record
/// of this run, and the governor's decisions recorded in that log: the
/// same for either runtime.
fn policy_in_force(host: &Host, policy: &PolicySource, audit: Option<&AuditTrail>) {
    let current = policy.current();
    tracing::info!(sha256 = %current.policy_sha256(), hidden = ?current.hidden_sections(), "policy loaded");
    // A full disk at startup does not keep the bridge from serving: the next
    // record that can be written is preceded by a `recovered` record that
    // counts this one, and keep-original fails transforms closed meanwhile.
    if let Some(a) = audit {
        if let Err(e) = audit_policy(&a.log, &current) {
            tracing::error!("the policy record was not written: {e}");
        }
    }
    let recorder = AuditRecorder::new(audit.map(|a| a.log.clone()));
    host.governor().set_recorder(Arc::new(recorder));
}

/// The bridge to the Copilot runtime, with its router and audit log; the
/// policy in force is the log's first record of this run.
pub(crate) fn copilot_backend(
    host: &Arc<Host>,
    cfg: &Config,
    policy: &PolicySource,
    audit: Option<&AuditTrail>,
) -> Arc<Bridge> {
    let port = audit.map(|a| Arc::new(LogPort::new(a.log.clone())) as Arc<dyn AuditPort>);
    let options = RecordOptions::from_config(&cfg.audit);
    let router = Arc::new(Router::new(policy.reader(), port, options));
    policy_in_force(host, policy, audit);
    Bridge::new(
        host,
        BridgeSettings::from_config(cfg),
        cfg.reloadable(),
        router,
        policy.reader(),
        audit.map(|a| a.log.clone()),
    )
}

/// The relay to the runtime's own AHP host (`[runtime] protocol = "ahp"`),
/// linked and authenticated before it returns; the policy in force is the
/// log's first record of this run, as with the JSON-RPC runtime.
pub(crate) async fn relay_backend(
    host: &Arc<Host>,
    cfg: &Config,
    policy: &PolicySource,
    audit: Option<&AuditTrail>,
) -> Result<Arc<Relay>, RelayError> {
    policy_in_force(host, policy, audit);
    let ahp = &cfg.runtime.ahp;
    let github = match (&ahp.github_token_file, &ahp.github_token_env) {
        (Some(f), _) => GithubToken::File(f.clone()),
        (None, Some(v)) => GithubToken::Env(v.clone()),
        (None, None) => return Err(RelayError::NoGithubTokenSource),
    };
    let connection_token = match &ahp.connection_token_file {
        Some(f) => {
            let t =
                std::fs::read_to_string(f).map_err(|source| RelayError::ConnectionTokenFile {
                    path: f.clone(),
                    source,
                })?;
            Some(Secret(t.trim().to_owned()))
        }
        None => None,
    };
    // The host's HOME beside the state store, so its sessions outlive a
    // restart of the bridge as the bridge's own do.
    let home = match cfg.state_path() {
        Some(p) => p
            .parent()
            .unwrap_or(std::path::Path::new("."))
            .join("copilot-ahp-host"),
        None => std::env::temp_dir().join(format!("ahp-bridge-host-{}", std::process::id())),
    };
    let settings = RelaySettings {
        runtime: cfg.runtime.clone(),
        home,
        connection_token,
        github,
        policy: policy.reader(),
        audit: audit.map(|a| a.log.clone()),
        include_content: cfg.audit.include_content,
        on_failure: cfg.audit.on_failure,
    };
    crate::bridge::relay::start(host, settings).await
}

/// How often `x-host://status` looks for a change to send.
const STATUS_TICK: Duration = Duration::from_secs(1);

/// Sends `x-host://status` its changes until the host stops.
async fn tick_status(host: std::sync::Weak<Host>, stopped: CancellationToken) {
    let mut tick = tokio::time::interval(STATUS_TICK);
    loop {
        tokio::select! {
            _ = stopped.cancelled() => return,
            _ = tick.tick() => {}
        }
        let Some(host) = host.upgrade() else { return };
        host.publish_status_if_changed();
    }
}

/// A running host.
pub struct Running {
    pub addr: SocketAddr,
    /// Where SDK apps connect (`[sdk] listen`), if anywhere.
    pub sdk: Option<SocketAddr>,
    /// Whether they connect over TLS (`[sdk.tls]`).
    sdk_tls: bool,
    /// Where `/healthz`, `/readyz` and `/metrics` are served, if anywhere.
    pub admin: Option<SocketAddr>,
    /// Cancelled when a graceful shutdown starts (`/readyz` says 503 at once).
    pub stopping: CancellationToken,
    /// Cancelled when the shutdown is over: the admin listener stops.
    stopped: CancellationToken,
    pub host: Arc<Host>,
    /// Closes everything at once: no more accepts, every client closed.
    /// [`Running::stop`] is the graceful way.
    pub shutdown: CancellationToken,
    /// Stops accepting only (cancelled by `shutdown` too).
    accepting: CancellationToken,
    /// The bridge to the runtime, with [`Agent::Copilot`].
    pub bridge: Option<Arc<Bridge>>,
    /// The relay to the runtime's AHP host, with [`Agent::Copilot`] and
    /// `[runtime] protocol = "ahp"`.
    pub relay: Option<Arc<Relay>>,
    /// The audit log, with [`Agent::Copilot`] and `[audit] path`.
    pub audit: Option<AuditTrail>,
    /// The policy in force; a reload replaces it here.
    pub policy: Arc<PolicySource>,
    /// The AHP listener's TLS (`wss://`), reloaded when its files change.
    pub tls: Option<Arc<Tls>>,
    /// The admin listener's TLS (`https://`).
    pub admin_tls: Option<Arc<Tls>>,
    /// Whether the config file on disk is in force (a reload can refuse it).
    pub on_disk: Arc<OnDisk>,
}

impl Running {
    /// The address clients connect to: `wss://` with TLS, else `ws://`.
    pub fn ws_url(&self) -> String {
        let scheme = if self.tls.is_some() { "wss" } else { "ws" };
        format!("{scheme}://{}", self.addr)
    }

    /// The admin listener's base URL, if it listens.
    pub fn admin_url(&self) -> Option<String> {
        let scheme = if self.admin_tls.is_some() {
            "https"
        } else {
            "http"
        };
        self.admin.map(|a| format!("{scheme}://{a}"))
    }

    /// Where SDK apps connect, if anywhere: `tcp://` (`tls://` with [sdk.tls]).
    pub fn sdk_url(&self) -> Option<String> {
        let scheme = if self.sdk_tls { "tls" } else { "tcp" };
        self.sdk.map(|a| format!("{scheme}://{a}"))
    }
}

impl Running {
    /// SIGTERM's shutdown: first `drain`, during which `/readyz` says 503,
    /// new WebSocket upgrades are answered 503 and open connections go on
    /// (a turn that fits in it completes whole); then [`Running::stop`]
    /// within `limit`. The whole `drain` even when no client is left: a load
    /// balancer still learning of it gets 503s, not refused connections.
    pub async fn drain_then_stop(&self, drain: Duration, limit: Duration) -> bool {
        self.stopping.cancel();
        if !drain.is_zero() {
            tracing::info!(
                ?drain,
                "draining: /readyz says 503, new connections get 503, open ones go on"
            );
            tokio::time::sleep(drain).await;
        }
        self.stop(limit).await
    }

    /// A graceful shutdown, bounded by `limit`: stop accepting; end every
    /// running turn with "the host is shutting down" (an SDK app's too, the
    /// app told) and answer what the runtime waits on; close every client
    /// with 1001 once its queue is flushed, and every SDK app's connection
    /// once its queues are written; stop the runtime; flush the audit log. Returns false when
    /// `limit` ran out first (what was left is abandoned).
    pub async fn stop(&self, limit: Duration) -> bool {
        self.stopping.cancel();
        let sequence = async {
            self.accepting.cancel();
            if let Some(b) = &self.bridge {
                b.end_turns_for_shutdown().await;
            }
            if let Some(r) = &self.relay {
                r.end_turns_for_shutdown().await;
            }
            self.shutdown.cancel();
            self.host.connections().all_disconnected().await;
            if let Some(b) = &self.bridge {
                b.shutdown().sdk_closed().await;
                // Clients are gone: transforms still asked of them fail at
                // once, and the runtime gets its original text back.
                b.shutdown().runtime_requests_answered().await;
                b.stop_runtime().await;
            }
            if let Some(r) = &self.relay {
                r.stop().await;
            }
        };
        let finished = tokio::time::timeout(limit, sequence).await.is_ok();
        if !finished {
            tracing::warn!("shutdown did not finish within [server] shutdown_timeout ({limit:?}); exiting anyway");
            self.shutdown.cancel();
            if let Some(b) = &self.bridge {
                b.stop_runtime().await;
            }
            if let Some(r) = &self.relay {
                r.stop().await;
            }
        }
        // The last checkpoint, the file synced, the syslog queue drained.
        if let Some(a) = &self.audit {
            a.close().await;
        }
        tracing::info!(clean = finished, "shut down");
        self.stopped.cancel();
        finished
    }
}

impl Drop for Running {
    /// Let go of without a graceful stop (tests): the admin listener goes too.
    fn drop(&mut self) {
        self.stopped.cancel();
    }
}

/// A backend without an agent: sessions become ready at once, turns do
/// nothing (tests of the host alone).
pub(crate) struct NullBackend(pub std::sync::Weak<Host>);

impl Backend for NullBackend {
    fn session_created(&self, session: &str) {
        if let Some(h) = self.0.upgrade() {
            let ready = ahp_types::actions::SessionReadyAction {};
            let _ = h.dispatch(
                session,
                ahp_types::actions::StateAction::SessionReady(ready),
            );
        }
    }
    fn session_disposed(&self, _: &str) {}
    fn phase(&self, _: &str, _: ClientPhase) {}
}

/// Builds the backend once the host exists (it needs a handle to the host).
pub(crate) type BackendFactory = Box<dyn FnOnce(&Arc<Host>) -> Arc<dyn Backend> + Send>;

/// Which agent the host drives.
pub enum Agent {
    /// No agent: sessions are ready at once, turns do nothing (tests of the host alone).
    None,
    /// The Copilot runtime, as `[runtime]` configures it (the product).
    Copilot,
    /// A backend built once the host exists.
    Custom(BackendFactory),
}

/// Binds `cfg.server.listen` and serves until `shutdown` is cancelled.
pub async fn start(cfg: Arc<Config>, agent: Agent) -> Result<Running, StartError> {
    cfg.validate()?;
    let policy = Arc::new(PolicySource::new(Policy::from_config(&cfg)?));
    let host = Host::new(&cfg, policy.reader());
    let on_disk = Arc::new(OnDisk::default());
    let mut bridge = None;
    let mut relay = None;
    let mut audit = None;
    let backend: Arc<dyn Backend> = match agent {
        Agent::None => Arc::new(NullBackend(Arc::downgrade(&host))),
        Agent::Copilot if cfg.runtime.protocol == crate::config::RuntimeProtocol::Ahp => {
            audit = open_audit(&cfg, &host)?;
            let r = relay_backend(&host, &cfg, &policy, audit.as_ref()).await?;
            relay = Some(r.clone());
            r
        }
        Agent::Copilot => {
            audit = open_audit(&cfg, &host)?;
            let b = copilot_backend(&host, &cfg, &policy, audit.as_ref());
            bridge = Some(b.clone());
            b
        }
        Agent::Custom(make) => make(&host),
    };
    host.set_backend(backend);
    match cfg.state_path() {
        Some(path) => {
            host.session_list().restore_sessions(Store::open(&path)?)?;
        }
        None if !cfg.state.enabled => tracing::info!(
            "[state] enabled = false: sessions live in memory only and do not survive a restart"
        ),
        None => tracing::warn!(
            "no [state] path and no audit log: sessions live in memory only and do not survive a restart"
        ),
    }
    let stopping = CancellationToken::new();
    let stopped = CancellationToken::new();
    let tls = listener_tls(cfg.server.tls.as_ref(), "server.tls", &stopped)?;
    let admin_tls = cfg.admin.tls.as_ref().map(|t| t.listener());
    let admin_tls = listener_tls(admin_tls.as_ref(), "admin.tls", &stopped)?;
    let listener = server::bind(cfg.server.listen).await?;
    let addr = listener.local_addr().map_err(StartError::LocalAddr)?;
    let shutdown = CancellationToken::new();
    let accepting = shutdown.child_token();
    tokio::spawn(server::serve(
        listener,
        host.clone(),
        tls.clone(),
        accepting.clone(),
        stopping.clone(),
        shutdown.clone(),
    ));
    // SDK apps: accepted until the AHP listener stops accepting, refused
    // while it drains; open connections end at the bridge's stop.
    let sdk = match bridge
        .as_ref()
        .and_then(|b| b.sdk_gate(audit.as_ref().map(|a| a.log.clone())))
    {
        Some(gate) => {
            let listening = crate::bridge::sdk::listen(gate, accepting.clone(), stopping.clone());
            Some(listening.await?.0)
        }
        None => None,
    };
    let admin = match cfg.admin.listen {
        Some(at) => {
            let readiness = Readiness {
                on_disk: on_disk.clone(),
                stopping: stopping.clone(),
                accepting: accepting.clone(),
                bridge: bridge.as_ref().map(Arc::downgrade),
                relay: relay.as_ref().map(Arc::downgrade),
                audit: audit.as_ref().map(|a| a.log.clone()),
                state: cfg.state_path(),
            };
            // Served through the whole shutdown (saying 503), stopped last.
            Some(admin::start(at, readiness, admin_tls.clone(), stopped.clone()).await?)
        }
        None => None,
    };
    crate::telemetry::metrics().set_build_info(ahp_types::PROTOCOL_VERSION, &cfg.server.instance());
    tokio::spawn(tick_status(Arc::downgrade(&host), stopped.clone()));
    Ok(Running {
        sdk_tls: cfg.sdk.as_ref().is_some_and(|s| s.tls.is_some()),
        addr,
        sdk,
        admin,
        host,
        shutdown,
        stopping,
        stopped,
        accepting,
        bridge,
        relay,
        audit,
        policy,
        tls,
        admin_tls,
        on_disk,
    })
}

/// A listener's TLS, loaded now and watched until `stopped`.
fn listener_tls(
    cfg: Option<&crate::config::TlsConfig>,
    table: &'static str,
    stopped: &CancellationToken,
) -> Result<Option<Arc<Tls>>, TlsLoadError> {
    let Some(cfg) = cfg else { return Ok(None) };
    let tls = Tls::load(cfg, table)?;
    tls.watch(stopped.clone());
    Ok(Some(tls))
}
