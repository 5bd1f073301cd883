//! The Copilot CLI started as an AHP host (`copilot --ahp-host`) for the
//! bridge to stand in front of: on a free loopback port, with a connection
//! token made here, the feature flag that turns the host on, and a HOME of
//! its own (the host keeps one catalog of sessions per HOME, and refuses a
//! second host on it). It dies with the bridge ([`crate::process`]'s
//! spawner). Nothing here speaks AHP: this is the process.

use std::path::{Path, PathBuf};

use ahp_bridge_base::config::{RuntimeConfig, Secret};
use tokio::process::Child;
use tracing::info;

use crate::process::{ended, port_line, resolve_program, spawn_piped, Env};
use crate::runtime_error::RuntimeError;

/// The flag the CLI 1.0.102 host needs ("AHP hosting requires the
/// AHP_CLIENT feature").
const FEATURE_FLAGS: (&str, &str) = ("COPILOT_CLI_ENABLED_FEATURE_FLAGS", "AHP_CLIENT");

/// What the host prints once it listens: `AHP 1.0 endpoint: ws://HOST:PORT/?tkn=...`.
const ENDPOINT_LINE: &str = "AHP 1.0 endpoint: ";

/// The variables that place the host's state; each set under `home`
/// unless `[runtime.env]` sets it.
const PLACES: &[(&str, &str)] = &[
    ("HOME", "home"),
    ("COPILOT_HOME", "copilot"),
    ("XDG_CONFIG_HOME", "config"),
    ("XDG_STATE_HOME", "state"),
    ("XDG_CACHE_HOME", "cache"),
];

/// A host the bridge started.
pub struct AhpHostProcess {
    pub child: Child,
    /// `ws://127.0.0.1:PORT/`, without the token.
    pub url: String,
    /// The connection token it takes.
    pub token: Secret,
}

/// Starts `cfg.ahp_command()` as an AHP host with its state under `home`,
/// and waits (within `call_timeout`) for the line saying where it listens.
/// A host that exits first fails with its own last words (stderr).
pub async fn spawn_ahp_host(
    cfg: &RuntimeConfig,
    home: &Path,
) -> Result<AhpHostProcess, RuntimeError> {
    let argv = cfg.ahp_command();
    let program = resolve_program(&argv[0]);
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| RuntimeError::NoRandomness(e.to_string()))?;
    let token = hex::encode(bytes);
    let mut args: Vec<String> = argv[1..].to_vec();
    args.extend(
        [
            "--ahp-host",
            "--listen",
            "127.0.0.1:0",
            "--ahp-host-token",
            &token,
        ]
        .map(String::from),
    );
    if let Some(dir) = &cfg.working_directory {
        args.extend(["--workspace".to_owned(), dir.display().to_string()]);
    }
    let env = host_env(&cfg.env, home)?;
    let (mut child, stderr) = spawn_piped(&program, &args, &env, Some(&token)).await?;
    let secret = token.clone();
    let shown = move |line: &str| line.replace(&secret, "[redacted]");
    match port_line(cfg, &program, &mut child, ENDPOINT_LINE, port_of, shown).await {
        Ok(port) => {
            let url = format!("ws://127.0.0.1:{port}/");
            info!(program = %program.display(), pid = child.id(), %url, "agent host started");
            Ok(AhpHostProcess {
                child,
                url,
                token: Secret(token),
            })
        }
        Err(e) => Err(ended(e, &mut child, stderr.as_ref()).await),
    }
}

/// `[runtime.env]`, the feature flag, and each place of [`PLACES`] not set
/// there made under `home`.
fn host_env(given: &Env, home: &Path) -> Result<Env, RuntimeError> {
    let mut env = given.clone();
    env.entry(FEATURE_FLAGS.0.into())
        .or_insert_with(|| FEATURE_FLAGS.1.into());
    for (var, sub) in PLACES {
        if env.contains_key(*var) {
            continue;
        }
        let dir: PathBuf = home.join(sub);
        std::fs::create_dir_all(&dir)?;
        env.insert((*var).into(), dir.display().to_string());
    }
    Ok(env)
}

/// The port of `ws://HOST:PORT/...`.
fn port_of(url: &str) -> Option<u16> {
    let authority = url.trim().strip_prefix("ws://")?.split(['/', '?']).next()?;
    authority.rsplit_once(':')?.1.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn the_endpoint_lines_port() {
        assert_eq!(port_of("ws://127.0.0.1:40105/?tkn=abc"), Some(40105));
        assert_eq!(port_of(" ws://[::1]:8765/"), Some(8765));
        assert_eq!(port_of("http://127.0.0.1:1/"), None);
    }

    #[test]
    fn its_own_home_unless_the_operator_names_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut given = BTreeMap::new();
        given.insert("HOME".to_owned(), "/srv/copilot".to_owned());
        let env = host_env(&given, dir.path()).unwrap();
        assert_eq!(env["HOME"], "/srv/copilot");
        assert_eq!(
            env["COPILOT_HOME"],
            dir.path().join("copilot").display().to_string()
        );
        assert_eq!(env["COPILOT_CLI_ENABLED_FEATURE_FLAGS"], "AHP_CLIENT");
        assert!(dir.path().join("cache").is_dir());
    }
}
