//! What `serve` and `demo` do, kept out of main.rs so tests can call it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use crate::app::{self, Agent};
use crate::config::{Config, ProviderConfig};
use crate::demo::model::ScriptedModel;
use crate::demo::try_policy::{TryPolicy, TryPolicyError};
use crate::start_error::StartError;

/// Why `serve` or `demo` stopped before a signal asked it to.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Start(#[from] StartError),
    #[error("cannot install the SIGHUP handler")]
    Hangup(#[source] std::io::Error),
    #[error("cannot install the SIGTERM and SIGINT handlers")]
    Signals(#[source] std::io::Error),
    #[error(transparent)]
    Policy(#[from] TryPolicyError),
    #[error("the scripted model does not start")]
    Model(#[source] std::io::Error),
}

/// Runs the host in front of the runtime until SIGTERM or SIGINT, then
/// shuts down gracefully within `[server] shutdown_timeout`; SIGHUP reloads
/// what a `Reloadable` reads of `config_path` (the file `cfg` was read
/// from): the policy, the principals and issuers, the rate limits and the
/// customizations.
/// `say` prints where it listens for the person starting it (main.rs:
/// plain, or one JSON log line with `[log] format = "json"`).
pub async fn serve(
    cfg: Arc<Config>,
    config_path: Option<PathBuf>,
    say: impl Fn(String),
) -> Result<(), RunError> {
    let (limit, drain) = (cfg.server.shutdown_timeout, cfg.server.drain);
    let running = app::start(cfg.clone(), Agent::Copilot).await?;
    if running.bridge.is_some() {
        let targets = crate::reload::Targets {
            host: running.host.clone(),
            bridge: running.bridge.clone(),
            policy: running.policy.clone(),
            audit: running.audit.as_ref().map(|a| a.log.clone()),
            tls: running
                .tls
                .iter()
                .chain(&running.admin_tls)
                .cloned()
                .collect(),
            on_disk: running.on_disk.clone(),
        };
        crate::reload::start(config_path, cfg, targets, running.shutdown.clone())
            .map_err(RunError::Hangup)?;
    }
    if let Some(admin) = running.admin_url() {
        say(format!("admin on {admin} (/healthz, /readyz, /metrics)"));
    }
    if let Some(sdk) = running.sdk_url() {
        say(format!("SDK apps on {sdk} (the runtime's JSON-RPC)"));
    }
    say(format!("listening on {}", running.ws_url()));
    let signal = stop_signal().await.map_err(RunError::Signals)?;
    tracing::info!(signal, "shutting down");
    // SIGTERM (systemd, Kubernetes) drains first; Ctrl-C stops at once.
    let drain = match signal {
        "SIGTERM" => drain,
        _ => std::time::Duration::ZERO,
    };
    running.drain_then_stop(drain, limit).await;
    Ok(())
}

/// Waits for SIGTERM (systemd's stop) or SIGINT (Ctrl-C); names which.
async fn stop_signal() -> std::io::Result<&'static str> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    })
}

/// The runtime config that points the real CLI at a local OpenAI-compatible model.
pub fn offline_runtime(cfg: &mut Config, base_url: &str, state_dir: &std::path::Path) {
    let env = &mut cfg.runtime.env;
    for (k, v) in [
        ("COPILOT_OFFLINE", "true".to_string()),
        ("COPILOT_PROVIDER_BASE_URL", base_url.to_string()),
        ("COPILOT_PROVIDER_API_KEY", "sk-offline".to_string()),
        ("COPILOT_MODEL", cfg.runtime.model.clone()),
    ] {
        env.insert(k.into(), v);
    }
    // Its own HOME and XDG dirs, so it never shares state with anything else.
    for (k, sub) in [
        ("HOME", "home"),
        ("COPILOT_HOME", "copilot"),
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_CACHE_HOME", "cache"),
    ] {
        let d = state_dir.join(sub);
        let _ = std::fs::create_dir_all(&d);
        env.insert(k.into(), d.display().to_string());
    }
    cfg.runtime.provider = Some(ProviderConfig {
        kind: "openai".into(),
        base_url: base_url.into(),
        api_key: Some("sk-offline".into()),
        api_key_env: None,
    });
}

/// Browser origins the demo allows without being asked: loopback, any port
/// (a web UI's dev server on `http://localhost:5173`, ...).
const LOOPBACK_ORIGINS: &[&str] = &["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"];

/// The demo's `[server] allowed_origins`: loopback on any port, and `extra`
/// (`--allow-origin`). `serve` allows only what its config lists.
pub fn demo_origins(extra: &[String]) -> Vec<String> {
    LOOPBACK_ORIGINS
        .iter()
        .map(|o| o.to_string())
        .chain(extra.iter().cloned())
        .collect()
}

/// The demo's `[policy] transform_timeout`: time to rewrite by hand.
const DEMO_TRANSFORM_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Everything offline: the scripted model, the real CLI pointed at it, the
/// host, which browsers on loopback (and `allow_origins`) may reach.
/// `say` prints its lines for the person who started it.
/// With `policy`, its folder's modules are the demo's `[policy.rego]`.
pub async fn serve_demo(
    listen: SocketAddr,
    allow_origins: &[String],
    policy: Option<&TryPolicy>,
    say: impl Fn(String),
) -> Result<(), RunError> {
    // Read before anything starts: a folder without a module fails at once.
    let rego = policy.map(TryPolicy::rego).transpose()?;
    let model = ScriptedModel::start().await.map_err(RunError::Model)?;
    let state =
        std::env::temp_dir().join(format!("ahp-copilot-bridge-demo-{}", std::process::id()));
    let mut cfg = Config::default();
    cfg.server.listen = listen;
    cfg.server.allowed_origins = demo_origins(allow_origins);
    cfg.audit.path = Some(state.join("audit.jsonl"));
    // Any free port: the demo runs beside whatever else is on this machine.
    cfg.admin.listen = "127.0.0.1:0".parse().ok();
    offline_runtime(&mut cfg, &model.base_url(), &state);
    // A person answers transforms in the console: five seconds is too short.
    cfg.policy.transform_timeout = DEMO_TRANSFORM_TIMEOUT;
    cfg.policy.rego = rego.clone();
    // A module that does not compile fails here, naming its file and line.
    let running = app::start(Arc::new(cfg), Agent::Copilot).await?;
    say(format!("scripted model on {}", model.base_url()));
    if let (Some(p), Some(rego)) = (policy, &rego) {
        let current = running.policy.current();
        let revision = current.rego().map(|r| r.revision()).unwrap_or_default();
        say(p.describe(rego, revision));
    }
    say(format!("in a turn, {}", crate::demo::model::DEMO_HELP));
    say(format!(
        "audit log: {}",
        state.join("audit.jsonl").display()
    ));
    if let Some(admin) = running.admin_url() {
        say(format!("admin on {admin} (/healthz, /readyz, /metrics)"));
    }
    say(format!("listening on {}", running.ws_url()));
    say(format!(
        "open http://{}/ (the web console), or connect an AHP client to ws://{}; Ctrl-C stops",
        running.addr, running.addr
    ));
    stop_signal().await.map_err(RunError::Signals)?;
    running.stop(std::time::Duration::from_secs(10)).await;
    // The runtime unpacks itself (about 235 MB) into its cache: gone with the
    // demo. The audit log and the runtime's sessions stay, to look at.
    let _ = std::fs::remove_dir_all(state.join("cache"));
    Ok(())
}
