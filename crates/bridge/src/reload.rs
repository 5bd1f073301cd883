//! SIGHUP, or a change of the file (`[server] reload_on_change`): re-read
//! the config file and put in force, each at once, its
//! `[policy]`, its `[[principals]]`, `[server] token` and
//! `session_visibility` and `[[jwt]]` (who may connect, and what each may
//! do), the rate limits (`[server]` defaults and each principal's own) and
//! `[customizations]`: what a `Reloadable` reads. The `[policy.rego]` modules and data are read again
//! with it, and their changes are watched as the file's are. A file (or a
//! module) that does not load changes nothing, and the log says why, naming
//! the key (and a module's file and line). Listeners, the runtime and every other key
//! are read at start (a restart applies them).
//!
//! The new policy applies to the next render: each session re-binds before
//! its next turn (its binding names the policy hash), so the runtime renders
//! again. New principals apply to the next upgrade; a connection whose
//! credential no longer stands closes once its running turn ends (see
//! `crates/ahp/src/host/credentials.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::admin::on_disk::OnDisk;
use crate::ahp::tls::{Tls, POLL};
use crate::ahp::Host;
use crate::ahp::Principals;
use crate::audit::AuditLog;
use crate::config::{watch_files, Watched};
use crate::config::{Config, ConfigError, LoadError};
use crate::policy::{Policy, PolicySource};
use crate::telemetry::{metrics, Causes};

/// What a reload puts in force: the file's config (its principals and
/// limits) and its policy, built with those principals.
pub(crate) struct Reloaded {
    pub cfg: Config,
    pub policy: Policy,
}

/// The file at `path`, checked as at startup against the address the
/// bridge listens on now (`running`'s): a file that would leave a
/// non-loopback listener without credentials is refused.
pub(crate) fn load(path: &Path, running: &Config) -> Result<Reloaded, ReloadError> {
    let mut cfg = Config::load(path)?;
    cfg.server.listen = running.server.listen;
    cfg.validate()?;
    let policy = Policy::from_config(&cfg)?;
    Ok(Reloaded { cfg, policy })
}

/// Why a file is not put in force: it does not load, or it is not valid
/// (a key, or a Rego module, named in the error's own words).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReloadError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// What SIGHUP changes, and where the outcome is written.
pub(crate) struct Targets {
    pub host: Arc<Host>,
    /// Its customizations are reloaded too.
    pub bridge: Option<Arc<crate::bridge::Bridge>>,
    pub policy: Arc<PolicySource>,
    pub audit: Option<Arc<AuditLog>>,
    /// The listeners' certificates: read again too (they are also watched).
    pub tls: Vec<Arc<Tls>>,
    /// Whether the file on disk is in force (`/healthz` says).
    pub on_disk: Arc<OnDisk>,
}

/// Why the file is read again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    Hangup,
    /// The file (or its folder: a rename over it, a ConfigMap's `..data`
    /// swap) changed, or the fallback look found it changed.
    Change,
}

/// Installs the SIGHUP handler now (so a signal that arrives once this
/// returns is never the default "terminate"), and, with `[server]
/// reload_on_change`, watches the file and its Rego files ([`watched`]);
/// reloads on each: the new principals and limits are put in force in the
/// host, the new policy for every reader of the policy source at once,
/// written to the audit log as a `policy` record. A change reloads only
/// when the bytes differ from the last ones read (a mount's `..data` swap
/// that changed another file, the 5 s look); SIGHUP always reloads. Until
/// `stop`.
pub(crate) fn start(
    path: Option<PathBuf>,
    running: Arc<Config>,
    targets: Targets,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let mut hangups = signal(SignalKind::hangup())?;
    let (tx, mut changes) = mpsc::unbounded_channel();
    // Without a watcher the sender stays here, so `changes` never ends.
    let mut unwatched = Some(tx);
    if let (true, Some(p)) = (running.server.reload_on_change, &path) {
        let watched = watched(p, &running);
        let tx = unwatched.take();
        watch_files(watched, POLL, "config", stop.clone(), move || {
            tx.as_ref().is_some_and(|t| t.send(()).is_ok())
        });
    }
    // What was loaded, taken now: a change right after start is a change.
    let mut last = path.as_deref().and_then(digest);
    tokio::spawn(async move {
        let _unwatched = unwatched;
        loop {
            let cause = tokio::select! {
                _ = stop.cancelled() => return,
                s = hangups.recv() => match s {
                    Some(()) => Cause::Hangup,
                    None => return,
                },
                c = changes.recv() => match c {
                    Some(()) => Cause::Change,
                    None => return,
                },
            };
            if cause == Cause::Hangup {
                for tls in &targets.tls {
                    tls.reload();
                }
            }
            let Some(path) = &path else {
                warn!("SIGHUP: serving without --config, there is no file to reload");
                continue;
            };
            let now = digest(path);
            if cause == Cause::Change && now == last {
                continue;
            }
            last = now;
            match load(path, &running) {
                Ok(new) => {
                    info!(path = %path.display(), ?cause, "config reloaded");
                    targets.on_disk.in_force();
                    apply(path, new, &targets).await
                }
                Err(e) => {
                    metrics().config_reload_failed();
                    targets.on_disk.refuse(path, &Causes(&e).to_string());
                    error!(path = %path.display(), ?cause, "reload refused, nothing changed: {}", Causes(&e))
                }
            }
        }
    });
    Ok(())
}

/// What a change is: the file, the Rego modules and data files it names,
/// and any `.rego` or `.json` file in a folder of modules it names by the
/// folder or a glob (a module added there is read at the next reload).
/// Nothing else in their folders: a log written beside the file would
/// otherwise keep the watcher from ever settling.
fn watched(path: &Path, running: &Config) -> Watched {
    let mut watched = Watched::files(&[path.to_owned()]);
    let Some(rego) = &running.policy.rego else {
        return watched;
    };
    for file in rego.files() {
        watched.file(&file);
    }
    for module in &rego.modules {
        let globbed = module
            .file_name()
            .is_some_and(|n| n.to_string_lossy().contains(['*', '?']));
        if globbed {
            let folder = module.parent().filter(|p| !p.as_os_str().is_empty());
            watched.any_in(folder.unwrap_or(Path::new(".")), &["rego", "json"]);
        } else if module.is_dir() {
            watched.any_in(module, &["rego", "json"]);
        }
    }
    watched
}

/// The file's bytes, hashed (through its links: a ConfigMap's file is a
/// link into `..data`), with the bytes of each `[policy.rego]` module and
/// data file it names: a change of one of those reloads too. `None` when
/// the file cannot be read.
fn digest(path: &Path) -> Option<[u8; 32]> {
    use sha2::{Digest, Sha256};
    let bytes = std::fs::read(path).ok()?;
    let mut h = Sha256::new();
    h.update(&bytes);
    for file in rego_files(path, &bytes) {
        h.update(file.to_string_lossy().as_bytes());
        if let Ok(b) = std::fs::read(&file) {
            h.update(Sha256::digest(b));
        }
    }
    Some(h.finalize().into())
}

/// The Rego files a config's text names (none when it does not parse: the
/// reload says why).
fn rego_files(path: &Path, bytes: &[u8]) -> Vec<PathBuf> {
    let Some(mut cfg) = std::str::from_utf8(bytes)
        .ok()
        .and_then(|t| Config::parse(t).ok())
    else {
        return vec![];
    };
    cfg.resolve_paths(path.parent().unwrap_or(Path::new(".")));
    cfg.policy.rego.map(|r| r.files()).unwrap_or_default()
}

/// Puts a loaded file in force: principals and limits first (a revoked
/// token stops working at once), then the policy.
async fn apply(path: &Path, new: Reloaded, targets: &Targets) {
    let principals = Principals::reloaded(new.cfg.reloadable(), &targets.host.principals());
    let names = principals.names();
    let done = targets
        .host
        .connections()
        .replace_credentials(principals, new.cfg.reloadable());
    info!(path = %path.display(), ?names, closing = done.closing, "principals reloaded");
    let sha256 = new.policy.policy_sha256();
    let changed = targets.policy.replace(new.policy);
    targets.host.publish_policy_loaded();
    if let Some(b) = &targets.bridge {
        b.reload_customizations(new.cfg.reloadable()).await;
    }
    // The reload is evidence too: a `policy` record holding it.
    if let Some(log) = targets.audit.clone() {
        let current = targets.policy.current();
        let written =
            tokio::task::spawn_blocking(move || crate::app::audit_policy(&log, &current)).await;
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => warn!(
                "the reloaded policy's audit record was not written: {}",
                Causes(&e)
            ),
            Err(e) => warn!("the reloaded policy's audit record was not written: {e}"),
        }
    }
    // Said last: an operator (or a test) reading this line finds the new
    // policy in force, the customizations re-read and the record written.
    info!(path = %path.display(), %sha256, changed, "policy reloaded");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_in_use_keeps_needing_credentials() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bridge.toml");
        let sha = "a".repeat(64);
        std::fs::write(
            &path,
            format!(
                "[server]\nallow_plaintext_remote = true\n[[principals]]\nname = \"ide\"\ntoken_sha256 = \"{sha}\"\nroles = [\"observe\"]\n"
            ),
        )
        .unwrap();
        let mut running = Config::default();
        running.server.listen = "0.0.0.0:8421".parse().unwrap();
        assert!(load(&path, &running).is_ok());
        // Every credential removed: the file alone would listen on loopback.
        std::fs::write(&path, "[server]\nlisten = \"127.0.0.1:8421\"\n").unwrap();
        let e = load(&path, &running).err().expect("refused").to_string();
        assert!(e.contains("server.listen"), "{e}");
    }

    #[test]
    fn a_file_gives_its_policy_with_its_own_principals_or_a_named_error() {
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
        let new = load(&path, &running).unwrap();
        assert_eq!(new.policy.rules("tone").deny.len(), 1);
        assert_eq!(
            new.policy.policy_document()["transformPrincipals"],
            serde_json::json!({"newcomer": null}),
            "the file's principals"
        );
        assert_eq!(new.cfg.principals[0].name, "newcomer");
        std::fs::write(&path, "[policy.sections.tone]\ndeny = ['(']\n").unwrap();
        let e = load(&path, &running).err().expect("refused").to_string();
        assert!(e.contains("policy.sections.tone.deny[0]"), "{e}");
        std::fs::remove_file(&path).unwrap();
        assert!(load(&path, &running).is_err(), "a missing file");
    }
}
