//! The host's settings: the parts of the config it reads, taken once when
//! it is built. All of them are start-only: a reload (SIGHUP) hands the
//! host new principals, limits and policy through their own owners
//! ([`super::credentials`], the policy reader), never these.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ahp_types::state::SessionModelInfo;

use super::sessions::PROVIDER;
use super::window::Bounds;
use ahp_bridge_base::config::{Config, RuntimeProtocol, ServerConfig};

#[derive(Debug)]
pub struct HostSettings {
    server: ServerConfig,
    /// `[runtime]`'s pool size, for the readiness status.
    pool_size: usize,
    /// `[runtime] turn_inactivity_timeout`: how long a revoked connection's
    /// running turn may go quiet before it is closed anyway.
    turn_inactivity_timeout: Duration,
    /// `[runtime] working_directory`: the default directory clients are told.
    working_directory: Option<PathBuf>,
    /// The models this host offers, the default first, each once
    /// (`[runtime] model`, `models`).
    models: Vec<String>,
    /// No `[runtime] provider`: the runtime signs in to GitHub, so the host
    /// advertises GitHub's API as a protected resource. Not in front of the
    /// runtime's AHP host: the bridge is its one GitHub identity.
    github_sign_in: bool,
    /// `[runtime] protocol = "ahp"`: a session takes section text at its
    /// creation (`config.systemMessageSections`), and no transform opt-in.
    additions: bool,
}

impl HostSettings {
    pub fn from_config(cfg: &Config) -> Self {
        let ahp = cfg.runtime.protocol == RuntimeProtocol::Ahp;
        Self {
            server: cfg.server.clone(),
            pool_size: cfg.runtime.pool_size(),
            turn_inactivity_timeout: cfg.runtime.turn_inactivity_timeout,
            working_directory: cfg.runtime.working_directory.clone(),
            github_sign_in: cfg.runtime.provider.is_none() && !ahp,
            models: configured_models(cfg),
            additions: ahp,
        }
    }

    pub fn server(&self) -> &ServerConfig {
        &self.server
    }

    /// `(total, per IP)`: `[server]`'s, or what the descriptor limit
    /// leaves now with this pool's runtimes.
    pub fn connection_limits(&self) -> (usize, usize) {
        self.server.connection_limits(self.pool_size)
    }

    pub fn pool_size(&self) -> usize {
        self.pool_size
    }

    pub fn turn_inactivity_timeout(&self) -> Duration {
        self.turn_inactivity_timeout
    }

    pub fn working_directory(&self) -> Option<&Path> {
        self.working_directory.as_deref()
    }

    pub fn github_sign_in(&self) -> bool {
        self.github_sign_in
    }

    /// Whether sessions take section text at creation (in front of the
    /// runtime's AHP host) rather than transforms.
    pub fn additions(&self) -> bool {
        self.additions
    }

    pub fn models(&self) -> &[String] {
        &self.models
    }

    /// How much of a chat stays in memory (`[server] turn_window`, `turn_window_bytes`).
    pub(super) fn window(&self) -> Bounds {
        Bounds {
            turns: self.server.turn_window,
            bytes: self.server.turn_window_bytes,
        }
    }
}

/// A model as the root state lists it.
pub(super) fn model_info(id: &str) -> SessionModelInfo {
    SessionModelInfo {
        id: id.to_owned(),
        provider: PROVIDER.into(),
        name: id.to_owned(),
        max_context_window: None,
        max_output_tokens: None,
        max_prompt_tokens: None,
        supports_vision: None,
        policy_state: None,
        config_schema: None,
        meta: None,
    }
}

fn configured_models(cfg: &Config) -> Vec<String> {
    let mut models = vec![cfg.runtime.model.clone()];
    for m in &cfg.runtime.models {
        if !models.contains(m) {
            models.push(m.clone());
        }
    }
    models
}
