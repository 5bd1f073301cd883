//! Starting the pieces in order; shared by `serve`, `demo` and the tests.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::ahp::host::{Backend, Host, NullBackend};
use crate::ahp::server;
use crate::config::Config;

/// A running host.
pub struct Running {
    pub addr: SocketAddr,
    pub host: Arc<Host>,
    pub shutdown: CancellationToken,
}

/// Builds the backend once the host exists (it needs a handle to the host).
pub type BackendFactory = Box<dyn FnOnce(&Arc<Host>) -> Arc<dyn Backend> + Send>;

/// Which agent the host drives.
pub enum Agent {
    /// No agent: sessions are ready at once, turns do nothing (tests of the host alone).
    None,
    /// A backend built once the host exists.
    Custom(BackendFactory),
}

/// Binds `cfg.server.listen` and serves until `shutdown` is cancelled.
pub async fn start(cfg: Arc<Config>, agent: Agent) -> anyhow::Result<Running> {
    cfg.validate()?;
    let host = Host::new(cfg.clone());
    let backend: Arc<dyn Backend> = match agent {
        Agent::None => Arc::new(NullBackend(Arc::downgrade(&host))),
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
    })
}
