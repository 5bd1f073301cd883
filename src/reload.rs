//! SIGHUP: re-read the config file and swap in its policy, atomically. A file
//! that does not load keeps the old policy, and the log says why, naming the
//! key. Only `[policy]` is taken from the new file: principals, listeners and
//! the runtime are read at start (a restart applies them). The new policy
//! applies to the next render: each session re-binds before its next turn
//! (its binding names the policy hash), so the runtime renders again.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::signal::unix::{signal, SignalKind};
use tracing::{info, warn};

use crate::audit::log::AuditLog;
use crate::config::Config;
use crate::policy::{Policy, PolicySource};

/// The policy of the file at `path`, with the principals of the running config.
pub fn load_policy(path: &Path, running: &Config) -> anyhow::Result<Policy> {
    let cfg = Config::load(path)?;
    let principals = running.transform_principals();
    if cfg.transform_principals() != principals {
        warn!(path = %path.display(), "the file's principals differ from the running ones; principals are read at start only (restart to apply them)");
    }
    Ok(Policy::build(&cfg.policy, principals)?)
}

/// Installs the SIGHUP handler now (so a signal that arrives once this
/// returns is never the default "terminate"), and reloads on each one: the
/// new policy is put in force for every reader of `source` at once, and
/// written to `audit` as a `policy` record.
pub fn on_sighup(
    path: Option<PathBuf>,
    running: Arc<Config>,
    source: Arc<PolicySource>,
    audit: Option<Arc<AuditLog>>,
) -> anyhow::Result<()> {
    let mut hangups = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            let Some(path) = &path else {
                warn!("SIGHUP: serving without --config, there is no file to reload");
                continue;
            };
            match load_policy(path, &running) {
                Ok(policy) => {
                    let sha256 = policy.policy_sha256();
                    let changed = source.replace(policy);
                    info!(path = %path.display(), %sha256, changed, "policy reloaded");
                    // The reload is evidence too: a `policy` record holding it.
                    if let Some(log) = audit.clone() {
                        let current = source.current();
                        let written = tokio::task::spawn_blocking(move || {
                            crate::app::audit_policy(&log, &current)
                        })
                        .await;
                        if let Ok(Err(e)) | Err(e) = written.map_err(anyhow::Error::from) {
                            warn!("the reloaded policy's audit record was not written: {e:#}");
                        }
                    }
                }
                Err(e) => {
                    warn!(path = %path.display(), "policy reload refused, the old policy stays: {e:#}")
                }
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_gives_its_policy_with_the_running_principals_or_a_named_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bridge.toml");
        let sha = "a".repeat(64);
        let running = Config::default();
        std::fs::write(
            &path,
            format!(
                "[[principals]]\nname = \"newcomer\"\ntoken_sha256 = \"{sha}\"\nroles = [\"transform\"]\n\
                 [policy.sections.tone]\ndeny = ['x+']\n"
            ),
        )
        .unwrap();
        let p = load_policy(&path, &running).unwrap();
        assert_eq!(p.rules("tone").deny.len(), 1);
        assert_eq!(
            p.policy_document()["transformPrincipals"],
            serde_json::json!({"local": null}),
            "principals are the running ones"
        );
        std::fs::write(&path, "[policy.sections.tone]\ndeny = ['(']\n").unwrap();
        let e = load_policy(&path, &running).unwrap_err().to_string();
        assert!(e.contains("policy.sections.tone.deny[0]"), "{e}");
        std::fs::remove_file(&path).unwrap();
        assert!(load_policy(&path, &running).is_err(), "a missing file");
    }
}
