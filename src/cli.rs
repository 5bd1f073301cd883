//! What `serve` and `demo` do, kept out of main.rs so tests can call it.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::app::{self, Agent};
use crate::config::{Config, ProviderConfig};
use crate::demo::model::ScriptedModel;

/// Runs the host in front of the runtime until Ctrl-C.
pub async fn serve(cfg: Arc<Config>) -> anyhow::Result<()> {
    let running = app::start(cfg, Agent::Copilot).await?;
    eprintln!("listening on ws://{}", running.addr);
    stop_signal().await?;
    running.stop().await;
    Ok(())
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

/// Everything offline: the scripted model, the real CLI pointed at it, the host.
pub async fn demo(listen: SocketAddr) -> anyhow::Result<()> {
    let model = ScriptedModel::start().await?;
    let state =
        std::env::temp_dir().join(format!("ahp-copilot-bridge-demo-{}", std::process::id()));
    let mut cfg = Config::default();
    cfg.server.listen = listen;
    cfg.audit.path = Some(state.join("audit.jsonl"));
    offline_runtime(&mut cfg, &model.base_url(), &state);
    let running = app::start(Arc::new(cfg), Agent::Copilot).await?;
    eprintln!("scripted model on {}", model.base_url());
    eprintln!("in a turn, {}", crate::demo::model::DEMO_HELP);
    eprintln!("audit log: {}", state.join("audit.jsonl").display());
    eprintln!("listening on ws://{}", running.addr);
    eprintln!(
        "connect an AHP client to ws://{}; Ctrl-C stops",
        running.addr
    );
    stop_signal().await?;
    running.stop().await;
    Ok(())
}

/// Ctrl-C (SIGINT) or SIGTERM (systemd's stop): either ends the process
/// cleanly, with a last audit checkpoint.
async fn stop_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    Ok(())
}
