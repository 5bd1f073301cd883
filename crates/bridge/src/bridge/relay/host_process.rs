//! The host the bridge started (without `[runtime] connect`): started
//! when a link needs it and it is not running, stopped with the bridge.

use std::path::Path;
use std::time::Duration;

use tokio::sync::Mutex;
use tracing::warn;

use super::relay_error::RelayError;
use crate::config::{RuntimeConfig, Secret};
use crate::runtime::{spawn_ahp_host, AhpHostProcess};

/// How long a host the bridge started has to exit after SIGTERM.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// The one host process, if the bridge runs it.
#[derive(Default)]
pub(super) struct HostProcess {
    process: Mutex<Option<AhpHostProcess>>,
}

impl HostProcess {
    /// The URL and token of the host, started (again) when it is not
    /// running.
    pub(super) async fn running(
        &self,
        cfg: &RuntimeConfig,
        home: &Path,
    ) -> Result<(String, Secret), RelayError> {
        let mut process = self.process.lock().await;
        if let Some(p) = process.as_mut() {
            if matches!(p.child.try_wait(), Ok(None)) {
                return Ok((p.url.clone(), p.token.clone()));
            }
            warn!("the agent host exited; starting it again");
        }
        let started = spawn_ahp_host(cfg, home).await?;
        let found = (started.url.clone(), started.token.clone());
        *process = Some(started);
        Ok(found)
    }

    /// The host's pid, while the bridge runs it.
    pub(super) async fn pid(&self) -> Option<u32> {
        self.process
            .lock()
            .await
            .as_ref()
            .and_then(|p| p.child.id())
    }

    /// Stops it: SIGTERM, then a kill after [`STOP_WAIT`].
    pub(super) async fn stop(&self) {
        let Some(mut p) = self.process.lock().await.take() else {
            return;
        };
        if let Some(pid) = p.child.id() {
            // SAFETY: a plain signal to the child this process spawned and
            // has not reaped yet (its pid cannot have been reused).
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGTERM);
            }
        }
        if tokio::time::timeout(STOP_WAIT, p.child.wait())
            .await
            .is_err()
        {
            let _ = p.child.kill().await;
        }
    }
}
