//! The bridge in front of the real CLI as an AHP host (`[runtime] protocol
//! = "ahp"`), offline: the scripted model answers Copilot's API, and a
//! loopback fake answers GitHub's, knowing one token.

use std::sync::Arc;

use ahp_bridge_join::config::{Config, RuntimeProtocol};
use ahp_bridge_join::GitHubFake;
use ahp_bridge_join::ScriptedModel;
use ahp_bridge_join::{Agent, Running};

use super::e2e::Contract;
use super::test_config;

/// The token the GitHub fake knows.
pub(crate) const GITHUB_TOKEN: &str = "ghu_bridge0identity0for0tests0000001";

pub(crate) struct AgentHostStack {
    pub model: ScriptedModel,
    pub github: GitHubFake,
    pub bridge: Running,
    pub cfg: Arc<Config>,
    pub dir: tempfile::TempDir,
    pub contract: Contract,
}

/// The config of a bridge in front of a host it starts, on `model` and
/// `github`, its files under `dir`.
pub(crate) fn agent_host_config(
    model: &ScriptedModel,
    github: &GitHubFake,
    dir: &std::path::Path,
) -> Config {
    let mut cfg = test_config();
    cfg.runtime.protocol = RuntimeProtocol::Ahp;
    cfg.runtime.working_directory = Some(dir.to_owned());
    let copilot_api = format!("http://{}", model.addr);
    for (k, v) in [
        ("COPILOT_GH_HOST", github.url()),
        ("COPILOT_DEBUG_GITHUB_API_URL", github.url()),
        ("COPILOT_API_URL", copilot_api),
    ] {
        cfg.runtime.env.insert(k.into(), v);
    }
    let token = dir.join("github-token");
    std::fs::write(&token, format!("{GITHUB_TOKEN}\n")).unwrap();
    cfg.runtime.ahp.github_token_file = Some(token);
    // The state store, the audit log and the host's HOME under `dir`.
    cfg.audit.path = Some(dir.join("audit.jsonl"));
    cfg
}

/// The scripted model (Copilot's API) and a GitHub fake pointing at it.
pub(crate) async fn start_fakes() -> (ScriptedModel, GitHubFake) {
    let model = ScriptedModel::start().await.unwrap();
    let github = GitHubFake::start(GITHUB_TOKEN, &format!("http://{}", model.addr))
        .await
        .unwrap();
    (model, github)
}

/// The whole config file of the bridge binary in front of a host it
/// starts, on `model` and `github`, its files under `dir` (the GitHub
/// token written there); `server`, `runtime` and `ahp` are more keys of
/// `[server]`, `[runtime]` and `[runtime.ahp]`.
pub(crate) fn agent_host_toml(
    model: &ScriptedModel,
    github: &GitHubFake,
    dir: &std::path::Path,
    (server, runtime, ahp): (&str, &str, &str),
) -> String {
    std::fs::write(dir.join("github-token"), GITHUB_TOKEN).unwrap();
    format!(
        "[admin]\nlisten = \"127.0.0.1:0\"\n[server]\nlisten = \"127.0.0.1:0\"\ndrain = \"0s\"\n\
         reload_on_change = false\n{server}\n{principal}\n[audit]\npath = {audit:?}\n\
         [runtime]\nprotocol = \"ahp\"\nworking_directory = {work:?}\n{runtime}\n\
         [runtime.env]\nCOPILOT_GH_HOST = {gh:?}\nCOPILOT_DEBUG_GITHUB_API_URL = {gh:?}\nCOPILOT_API_URL = {api:?}\n\
         [runtime.ahp]\ngithub_token_file = {token:?}\n{ahp}\n",
        principal = super::process::ide_principal(),
        audit = dir.join("audit.jsonl").display().to_string(),
        work = dir.display().to_string(),
        gh = github.url(),
        api = format!("http://{}", model.addr),
        token = dir.join("github-token").display().to_string(),
    )
}

/// Starts the fakes and the bridge; `tune` changes the config first.
pub(crate) async fn start_agent_host_stack(tune: impl FnOnce(&mut Config)) -> AgentHostStack {
    let (model, github) = start_fakes().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = agent_host_config(&model, &github, dir.path());
    tune(&mut cfg);
    let cfg = Arc::new(cfg);
    let bridge = ahp_bridge_join::start(cfg.clone(), Agent::Copilot)
        .await
        .expect("bridge starts in front of the agent host");
    AgentHostStack {
        model,
        github,
        bridge,
        cfg,
        dir,
        contract: Contract,
    }
}
