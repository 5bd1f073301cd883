//! Starting the pieces in order; shared by `serve`, `demo` and the tests.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::ahp::backend::{Backend, NullBackend};
use crate::ahp::host::Host;
use crate::ahp::server;
use crate::audit::log::AuditLog;
use crate::bridge::Bridge;
use crate::config::Config;
use crate::store::Store;
use crate::transform::router::Router;

/// The bridge to the Copilot runtime, with its router and audit log.
pub fn copilot_backend(
    host: &Arc<Host>,
    cfg: &Config,
) -> anyhow::Result<(Arc<Bridge>, Option<Arc<AuditLog>>)> {
    let audit = match &cfg.audit.path {
        Some(p) => {
            let (log, rec) = AuditLog::open(p, cfg.audit.fsync)?;
            tracing::info!(path = %p.display(), records = rec.records, torn = ?rec.torn_bytes, "audit log open");
            Some(log)
        }
        None => None,
    };
    let router = Arc::new(Router::new(cfg, audit.clone())?);
    let policy = router.policy();
    tracing::info!(sha256 = %policy.policy_sha256(), hidden = ?policy.hidden_sections(), "policy loaded");
    Ok((Bridge::new(host, router), audit))
}

/// A running host.
pub struct Running {
    pub addr: SocketAddr,
    pub host: Arc<Host>,
    /// Closes everything at once: no more accepts, every client closed.
    /// [`Running::stop`] is the graceful way.
    pub shutdown: CancellationToken,
    /// Stops accepting only (cancelled by `shutdown` too).
    accepting: CancellationToken,
    /// The bridge to the runtime, with [`Agent::Copilot`].
    pub bridge: Option<Arc<Bridge>>,
    audit: Option<Arc<AuditLog>>,
}

impl Running {
    /// A graceful shutdown, bounded by `limit`: stop accepting; end every
    /// running turn with "the host is shutting down" and answer what the
    /// runtime waits on; close every client with 1001 once its queue is
    /// flushed; stop the runtime; flush the audit log. Returns false when
    /// `limit` ran out first (what was left is abandoned).
    pub async fn stop(&self, limit: Duration) -> bool {
        let sequence = async {
            self.accepting.cancel();
            if let Some(b) = &self.bridge {
                b.end_turns_for_shutdown().await;
            }
            self.shutdown.cancel();
            self.host.all_disconnected().await;
            if let Some(b) = &self.bridge {
                // Clients are gone: transforms still asked of them fail at
                // once, and the runtime gets its original text back.
                b.runtime_requests_answered().await;
                b.stop_runtime().await;
            }
        };
        let finished = tokio::time::timeout(limit, sequence).await.is_ok();
        if !finished {
            tracing::warn!("shutdown did not finish within [server] shutdown_timeout ({limit:?}); exiting anyway");
            self.shutdown.cancel();
            if let Some(b) = &self.bridge {
                b.stop_runtime().await;
            }
        }
        if let Some(log) = &self.audit {
            log.sync_if_dirty();
        }
        tracing::info!(clean = finished, "shut down");
        finished
    }
}

/// Builds the backend once the host exists (it needs a handle to the host).
pub type BackendFactory = Box<dyn FnOnce(&Arc<Host>) -> Arc<dyn Backend> + Send>;

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
pub async fn start(cfg: Arc<Config>, agent: Agent) -> anyhow::Result<Running> {
    cfg.validate()?;
    let host = Host::new(cfg.clone());
    let (mut bridge, mut audit) = (None, None);
    let backend: Arc<dyn Backend> = match agent {
        Agent::None => Arc::new(NullBackend(Arc::downgrade(&host))),
        Agent::Copilot => {
            let (b, log) = copilot_backend(&host, &cfg)?;
            bridge = Some(b.clone());
            audit = log;
            b
        }
        Agent::Custom(make) => make(&host),
    };
    host.set_backend(backend);
    match cfg.state_path() {
        Some(path) => {
            host.restore(Store::open(&path)?)?;
        }
        None => tracing::warn!(
            "no [state] path and no audit log: sessions live in memory only and do not survive a restart"
        ),
    }
    let listener = server::bind(cfg.server.listen).await?;
    let addr = listener.local_addr()?;
    let shutdown = CancellationToken::new();
    let accepting = shutdown.child_token();
    tokio::spawn(server::serve(
        listener,
        host.clone(),
        accepting.clone(),
        shutdown.clone(),
    ));
    Ok(Running {
        addr,
        host,
        shutdown,
        accepting,
        bridge,
        audit,
    })
}
