//! The runtime pool: `[runtime] processes` runtimes (or the `connect`
//! addresses), each started on demand, watched by a health check, and
//! replaced on its own when it exits or stops answering. Which runtime a
//! session lives on is the bridged sessions' (sticky, the least loaded when it was
//! created), so a lost runtime ends only the turns on it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tracing::{info, warn};

use crate::config::RuntimeConfig;
use crate::jsonrpc::CallError;
use crate::runtime::RuntimeError;
use crate::runtime::{start_runtime, Reach};
use crate::runtime::{RuntimeConn, RuntimeHandler};
use crate::telemetry::{metrics, Causes, CheckFailed};

/// Why no runtime of the pool can be had.
#[derive(Debug, thiserror::Error)]
pub enum ReachError {
    #[error("the host is shutting down")]
    ShuttingDown,
    #[error("the bridge is gone")]
    BridgeGone,
    /// Its own words say which runtime and why (with its last stderr lines).
    #[error(transparent)]
    Start(#[from] RuntimeError),
    #[error("runtime {slot} speaks over stdio only")]
    StdioOnly { slot: usize },
}

/// How long a runtime is given to exit after SIGTERM before it is killed.
const RUNTIME_EXIT_GRACE: Duration = Duration::from_secs(3);

pub(super) struct Pool {
    cfg: RuntimeConfig,
    runtimes: Vec<tokio::sync::Mutex<Option<LiveRuntime>>>,
    /// Counts runtime starts across the pool: a binding names the start it
    /// lives in.
    generation: AtomicU64,
    /// Set by a shutdown: no runtime is started or restarted any more.
    stopping: AtomicBool,
    /// Spawned runtimes listen on a loopback port, for SDK apps (`[sdk]`).
    listen: bool,
}

/// The runtime in use on one place of the pool, and which start of it this is.
struct LiveRuntime {
    conn: Arc<RuntimeConn>,
    child: Option<tokio::process::Child>,
    generation: u64,
    reach: Option<Reach>,
}

/// The runtime a slot holds, if its connection is still open: what
/// "running" means to every reader of the pool.
fn open_runtime(slot: &Option<LiveRuntime>) -> Option<&LiveRuntime> {
    slot.as_ref().filter(|l| l.conn.is_open())
}

/// What the pool needs from its owner to start a runtime: the handler of
/// what the runtime sends, and what to do when it is lost. The pool holds
/// its owner weakly: the owner holds the pool, and a strong reference back
/// would keep both, and the runtime processes, alive forever.
pub(super) trait Starts: Send + Sync {
    fn handler(&self) -> Arc<dyn RuntimeHandler>;
    fn lost(&self, slot: usize, generation: u64);
}

/// Whether `conn`'s runtime answers a ping within `timeout` (an error
/// reply is an answer).
async fn ping(conn: &RuntimeConn, timeout: Duration) -> Result<(), CheckFailed> {
    match conn.ping(timeout).await {
        Ok(_) | Err(CallError::Rpc(_)) => Ok(()),
        Err(e) => Err(CheckFailed(e.to_string())),
    }
}

impl Pool {
    pub(super) fn new(cfg: &RuntimeConfig, listen: bool) -> Self {
        metrics().runtimes(cfg.pool_size().max(1));
        Self {
            runtimes: (0..cfg.pool_size().max(1))
                .map(|_| tokio::sync::Mutex::new(None))
                .collect(),
            cfg: cfg.clone(),
            generation: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
            listen,
        }
    }

    pub(super) fn size(&self) -> usize {
        self.runtimes.len()
    }

    pub(super) fn stop_starting(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    pub(super) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Whether the runtimes serve, for a readiness probe: every running
    /// one is pinged within `timeout` (none running yet: the first is
    /// started, as a session would, for `owner`). `Err` names each that did
    /// not answer, unless another did.
    pub(super) async fn health(
        self: &Arc<Self>,
        timeout: Duration,
        owner: Weak<dyn Starts>,
    ) -> Result<(), CheckFailed> {
        let pings = self.ping_all(timeout).await;
        if pings.iter().all(Option::is_none) {
            // The start goes on past the probe's deadline: cut off at each
            // probe, a runtime slower to start than the deadline would be
            // killed and started again forever, and never be ready.
            let pool = self.clone();
            let start = tokio::spawn(async move { pool.runtime(0, owner).await });
            match tokio::time::timeout(timeout, start).await {
                Ok(Ok(Ok((conn, _)))) => return ping(&conn, timeout).await,
                Ok(Ok(Err(e))) => {
                    return Err(CheckFailed(format!(
                        "runtime 0 does not start: {}",
                        Causes(&e)
                    )))
                }
                Ok(Err(e)) => return Err(CheckFailed(format!("runtime 0's start failed: {e}"))),
                Err(_) => {
                    return Err(CheckFailed(format!(
                        "runtime 0 did not start within {timeout:?} (still starting)"
                    )))
                }
            }
        }
        if pings.iter().any(|p| matches!(p, Some(Ok(())))) {
            return Ok(());
        }
        let failed: Vec<String> = pings
            .iter()
            .enumerate()
            .filter_map(|(slot, p)| match p {
                Some(Err(e)) => Some(format!("runtime {slot}: {e}")),
                _ => None,
            })
            .collect();
        Err(CheckFailed(failed.join("; ")))
    }

    /// Runtime `slot`, started (or restarted) on demand.
    pub(super) async fn runtime(
        &self,
        slot: usize,
        owner: Weak<dyn Starts>,
    ) -> Result<(Arc<RuntimeConn>, u64), ReachError> {
        let slot = slot.min(self.runtimes.len() - 1);
        let mut g = self.runtimes[slot].lock().await;
        if let Some(l) = open_runtime(&g) {
            return Ok((l.conn.clone(), l.generation));
        }
        if self.is_stopping() {
            return Err(ReachError::ShuttingDown);
        }
        let handler = owner.upgrade().ok_or(ReachError::BridgeGone)?.handler();
        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        // Logged here, once per failed start, whoever asked for it (a
        // session, /readyz, a restart): with a spawned runtime's last words.
        let rt = start_runtime(&self.cfg, slot, handler, self.listen)
            .await
            .inspect_err(|e| warn!(slot, "runtime did not start: {e}"))?;
        let conn = rt.conn.clone();
        let closed = conn.closed_token();
        tokio::spawn(async move {
            closed.cancelled().await;
            metrics().runtime_up(slot, false);
            if let Some(owner) = owner.upgrade() {
                owner.lost(slot, generation);
            }
        });
        let (interval, timeout) = (self.cfg.health_interval, self.cfg.health_timeout);
        tokio::spawn(watchdog(conn.clone(), slot, interval, timeout));
        metrics().runtime_up(slot, true);
        *g = Some(LiveRuntime {
            conn: conn.clone(),
            child: rt.child,
            generation,
            reach: rt.reach,
        });
        Ok((conn, generation))
    }

    /// Where another connection reaches runtime `slot`, started on demand.
    pub(super) async fn reach(
        &self,
        slot: usize,
        owner: Weak<dyn Starts>,
    ) -> Result<Reach, ReachError> {
        self.runtime(slot, owner).await?;
        let slot = slot.min(self.runtimes.len() - 1);
        let g = self.runtimes[slot].lock().await;
        g.as_ref()
            .and_then(|l| l.reach.clone())
            .ok_or(ReachError::StdioOnly { slot })
    }

    /// Runtime `slot`'s connection, if it is running; never starts one.
    pub(super) async fn live(&self, slot: usize) -> Option<Arc<RuntimeConn>> {
        let g = self.runtimes.get(slot)?.lock().await;
        open_runtime(&g).map(|l| l.conn.clone())
    }

    /// Pings every running runtime at once, each within `timeout`: by slot,
    /// whether it answered (`None`: not running). A runtime being started
    /// (its slot held) counts as not running: the probe does not wait for a
    /// start.
    pub(super) async fn ping_all(&self, timeout: Duration) -> Vec<Option<Result<(), CheckFailed>>> {
        let live: Vec<_> = self
            .runtimes
            .iter()
            .map(|r| {
                r.try_lock()
                    .ok()
                    .and_then(|g| open_runtime(&g).map(|l| l.conn.clone()))
            })
            .collect();
        let pings = live.into_iter().map(|conn| async move {
            let conn = conn?;
            Some(ping(&conn, timeout).await)
        });
        futures_util::future::join_all(pings).await
    }

    /// Each runtime's process id, by slot (None before it starts, or over TCP).
    pub(super) async fn pids(&self) -> Vec<Option<u32>> {
        let mut out = Vec::new();
        for r in &self.runtimes {
            let g = r.lock().await;
            out.push(
                g.as_ref()
                    .and_then(|l| l.child.as_ref().and_then(|c| c.id())),
            );
        }
        out
    }

    /// After runtime `slot` of `generation` was lost: a hung one is still
    /// running and is killed, then a new one is started, backing off while
    /// starting fails.
    /// Gives up once the owner is gone.
    pub(super) async fn replace(&self, slot: usize, generation: u64, owner: Weak<dyn Starts>) {
        {
            let mut g = self.runtimes[slot].lock().await;
            if g.as_ref().is_some_and(|l| l.generation == generation) {
                if let Some(mut child) = g.take().and_then(|l| l.child) {
                    let _ = child.start_kill();
                }
            }
        }
        let mut backoff = Duration::from_millis(200);
        loop {
            tokio::time::sleep(backoff).await;
            if self.is_stopping() || owner.strong_count() == 0 {
                return;
            }
            match self.runtime(slot, owner.clone()).await {
                Ok(_) => {
                    metrics().runtime_restarted(slot);
                    return;
                }
                Err(e) => {
                    warn!(
                        "runtime restart failed: {}; retrying in {backoff:?}",
                        Causes(&e)
                    );
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                }
            }
        }
    }

    /// Stops every runtime of the pool, at once.
    pub(super) async fn stop_all(&self) {
        self.stop_starting();
        let stops = (0..self.runtimes.len()).map(|slot| self.stop(slot));
        futures_util::future::join_all(stops).await;
    }

    /// Stops one runtime: SIGTERM, then SIGKILL after a grace.
    async fn stop(&self, slot: usize) {
        let Some(live) = self.runtimes[slot].lock().await.take() else {
            return;
        };
        live.conn.close();
        let Some(mut child) = live.child else {
            return;
        };
        if let Some(pid) = child.id() {
            // SAFETY: kill(2) with a pid we spawned and still own (not yet reaped).
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
        }
        match tokio::time::timeout(RUNTIME_EXIT_GRACE, child.wait()).await {
            Ok(status) => info!(?status, "runtime stopped"),
            Err(_) => {
                warn!(
                    "the runtime did not exit within {RUNTIME_EXIT_GRACE:?} of SIGTERM; killing it"
                );
                let _ = child.kill().await;
            }
        }
    }
}

/// Pings the runtime every `interval`; one unanswered within `timeout` means
/// it hangs (alive but deaf), and the connection is closed so that the runtime
/// is replaced like one that exited. An error answer is still an answer.
async fn watchdog(conn: Arc<RuntimeConn>, slot: usize, interval: Duration, timeout: Duration) {
    if interval.is_zero() {
        return;
    }
    loop {
        tokio::select! {
            _ = conn.closed() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        match conn.ping(timeout).await {
            Ok(_) | Err(CallError::Rpc(_)) => metrics().runtime_up(slot, true),
            Err(CallError::Closed) => return,
            Err(CallError::Timeout(t)) => {
                metrics().runtime_up(slot, false);
                warn!(
                    runtime = slot,
                    "the runtime did not answer a ping within {t:?}; restarting it"
                );
                conn.close();
                return;
            }
        }
    }
}
