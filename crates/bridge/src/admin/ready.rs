//! `/readyz`: whether the bridge can serve now. Each check names itself and,
//! failing, says why; the probe as a whole is bounded by its deadline.

use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use crate::admin::on_disk::OnDisk;
use crate::audit::AuditLog;
use crate::bridge::relay::Relay;
use crate::bridge::Bridge;
use crate::telemetry::CheckFailed;

/// How long the runtime has to answer the probe's ping.
const RUNTIME_PING: Duration = Duration::from_secs(2);

/// What readiness is checked against.
pub(crate) struct Readiness {
    /// Cancelled when a graceful shutdown starts: not ready from then on.
    pub stopping: CancellationToken,
    /// Cancelled when the AHP listener stops accepting.
    pub accepting: CancellationToken,
    pub bridge: Option<Weak<Bridge>>,
    /// In front of the runtime's own AHP host: ready while linked.
    pub relay: Option<Weak<Relay>>,
    pub audit: Option<Arc<AuditLog>>,
    pub state: Option<PathBuf>,
    /// Whether the config file on disk is in force: said, never failed.
    pub on_disk: Arc<OnDisk>,
}

/// Every check's outcome, by name, and whether the config file on disk is
/// in force (which does not decide readiness: the last good one serves).
pub(crate) struct ReadyReport {
    pub checks: Vec<(&'static str, Result<(), CheckFailed>)>,
    pub config_refused: Option<String>,
}

impl ReadyReport {
    pub(crate) fn ready(&self) -> bool {
        self.checks.iter().all(|(_, r)| r.is_ok())
    }

    /// `{"ready": bool, "checks": {"NAME": "ok" | "why not", ...}}`.
    pub(crate) fn to_json(&self) -> Value {
        let checks: Map<String, Value> = self
            .checks
            .iter()
            .map(|(name, r)| {
                let said = match r {
                    Ok(()) => "ok".to_owned(),
                    Err(why) => why.0.clone(),
                };
                ((*name).to_owned(), Value::String(said))
            })
            .collect();
        let config = self.config_refused.as_deref().unwrap_or("in force");
        json!({"ready": self.ready(), "checks": checks, "config": config})
    }
}

impl Readiness {
    pub(crate) async fn check(&self) -> ReadyReport {
        if self.stopping.is_cancelled() {
            let why = Err(CheckFailed("the bridge is shutting down".to_owned()));
            return ReadyReport {
                checks: vec![("shutdown", why)],
                config_refused: self.on_disk.refused(),
            };
        }
        let mut checks = vec![("listener", self.listener())];
        if let Some(bridge) = &self.bridge {
            let runtime = match bridge.upgrade() {
                Some(b) => b.runtime_health(RUNTIME_PING).await,
                None => Err(CheckFailed("the bridge is gone".to_owned())),
            };
            checks.push(("runtime", runtime));
        }
        if let Some(relay) = &self.relay {
            let linked = match relay.upgrade() {
                Some(r) if r.linked() => Ok(()),
                Some(_) => Err(CheckFailed(
                    "the agent host is not linked (the bridge is linking again)".to_owned(),
                )),
                None => Err(CheckFailed("the relay is gone".to_owned())),
            };
            checks.push(("runtime", linked));
        }
        if let Some(log) = &self.audit {
            checks.push(("audit", log.writable()));
        }
        if let Some(path) = &self.state {
            checks.push(("state", crate::telemetry::writable(path)));
        }
        ReadyReport {
            checks,
            config_refused: self.on_disk.refused(),
        }
    }

    fn listener(&self) -> Result<(), CheckFailed> {
        match self.accepting.is_cancelled() {
            false => Ok(()),
            true => Err(CheckFailed("the AHP listener no longer accepts".to_owned())),
        }
    }
}
