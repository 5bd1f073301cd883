//! What `serve` and `demo` do, kept out of main.rs so tests can call it.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::app::{self, Agent};
use crate::config::Config;

/// Runs the host until Ctrl-C.
pub async fn serve(cfg: Arc<Config>) -> anyhow::Result<()> {
    let running = app::start(cfg, Agent::None).await?;
    eprintln!("listening on ws://{}", running.addr);
    tokio::signal::ctrl_c().await?;
    running.shutdown.cancel();
    Ok(())
}

pub async fn demo(_listen: SocketAddr) -> anyhow::Result<()> {
    anyhow::bail!("demo is not built yet")
}
