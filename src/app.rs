//! Starting the pieces in order; shared by `serve`, `demo` and the tests.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::ahp::backend::{Backend, NullBackend};
use crate::ahp::host::Host;
use crate::ahp::server;
use crate::audit::log::AuditLog;
use crate::bridge::Bridge;
use crate::config::Config;
use crate::transform::router::Router;

/// The bridge to the Copilot runtime, with its router and audit log.
pub fn copilot_backend(host: &Arc<Host>, cfg: &Config) -> anyhow::Result<Arc<Bridge>> {
    let audit = match &cfg.audit.path {
        Some(p) => {
            let (log, rec) = AuditLog::open(p, cfg.audit.fsync)?;
            tracing::info!(path = %p.display(), records = rec.records, torn = ?rec.torn_bytes, "audit log open");
            Some(log)
        }
        None => None,
    };
    let router = Arc::new(Router::new(cfg, audit)?);
    let policy = router.policy();
    tracing::info!(sha256 = %policy.policy_sha256(), hidden = ?policy.hidden_sections(), "policy loaded");
    Ok(Bridge::new(host, router))
}

/// A running host.
pub struct Running {
    pub addr: SocketAddr,
    pub host: Arc<Host>,
    pub shutdown: CancellationToken,
    /// The bridge to the runtime, with [`Agent::Copilot`].
    pub bridge: Option<Arc<Bridge>>,
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
    let mut bridge = None;
    let backend: Arc<dyn Backend> = match agent {
        Agent::None => Arc::new(NullBackend(Arc::downgrade(&host))),
        Agent::Copilot => {
            let b = copilot_backend(&host, &cfg)?;
            bridge = Some(b.clone());
            b
        }
        Agent::Custom(make) => make(&host),
    };
    host.set_backend(backend);
    let listener = server::bind(cfg.server.listen).await?;
    let addr = listener.local_addr()?;
    let shutdown = CancellationToken::new();
    tokio::spawn(server::serve(listener, host.clone(), shutdown.clone()));
    Ok(Running {
        addr,
        host,
        shutdown,
        bridge,
    })
}
