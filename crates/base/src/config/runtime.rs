//! `[runtime]`: how the Copilot runtime is started or reached, the model,
//! and the deadlines of what the bridge asks of it; the pool's types are in
//! [`super::pool_config`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::pool_config::MAX_PROCESSES;
use super::runtime_ahp::AHP_DEFAULT_COMMAND;
use super::{bad, duration, AhpHostConfig, ConfigError, RuntimeAddresses, RuntimeProtocol};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeConfig {
    /// Which wire the runtime speaks: its JSON-RPC, or AHP as its own host.
    pub protocol: RuntimeProtocol,
    /// `[runtime.ahp]`: read with `protocol = "ahp"`.
    pub ahp: AhpHostConfig,
    /// argv of the Copilot CLI in server mode; argv[0] is looked up in the
    /// project-local install (.runtime/) first, then PATH.
    pub command: Vec<String>,
    /// Connect to running runtimes over TCP instead of spawning them: one
    /// address, or a list that forms the pool.
    pub connect: Option<RuntimeAddresses>,
    /// How many runtime processes to spawn; each session lives on one.
    pub processes: usize,
    /// Extra environment for the spawned runtime.
    pub env: BTreeMap<String, String>,
    /// The model sessions use.
    pub model: String,
    /// Further models to advertise in the root state.
    pub models: Vec<String>,
    pub provider: Option<ProviderConfig>,
    /// Deadline of every call the bridge makes to the runtime.
    #[serde(deserialize_with = "duration")]
    pub call_timeout: Duration,
    /// Working directory for sessions that name none.
    pub working_directory: Option<PathBuf>,
    /// Largest frame accepted from the runtime.
    pub max_frame_bytes: usize,
    /// How often the bridge pings the runtime; "0s" turns the check off.
    #[serde(deserialize_with = "duration")]
    pub health_interval: Duration,
    /// A ping unanswered this long means the runtime hangs: it is killed and restarted.
    #[serde(deserialize_with = "duration")]
    pub health_timeout: Duration,
    /// A client tool call not completed within this fails, on both sides.
    #[serde(deserialize_with = "duration")]
    pub client_tool_timeout: Duration,
    /// A turn that hears nothing from the runtime for this long (while not
    /// waiting on a client) ends with an error, and the runtime is told to abort.
    #[serde(deserialize_with = "duration")]
    pub turn_inactivity_timeout: Duration,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            protocol: RuntimeProtocol::Jsonrpc,
            ahp: AhpHostConfig::default(),
            command: [
                "copilot",
                "--headless",
                "--stdio",
                "--no-auto-update",
                "--no-auto-login",
            ]
            .map(String::from)
            .to_vec(),
            connect: None,
            processes: 1,
            env: BTreeMap::new(),
            model: "gpt-4.1".into(),
            models: Vec::new(),
            provider: None,
            call_timeout: Duration::from_secs(60),
            working_directory: None,
            max_frame_bytes: 64 * 1024 * 1024,
            health_interval: Duration::from_secs(10),
            health_timeout: Duration::from_secs(10),
            client_tool_timeout: Duration::from_secs(600),
            turn_inactivity_timeout: Duration::from_secs(600),
        }
    }
}

/// A bring-your-own-key model provider, passed to `session.create`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    #[serde(rename = "type")]
    pub kind: String,
    pub base_url: String,
    pub api_key: Option<String>,
    pub api_key_env: Option<String>,
}

impl ProviderConfig {
    pub fn resolved_api_key(&self) -> Option<String> {
        self.api_key.clone().or_else(|| {
            self.api_key_env
                .as_ref()
                .and_then(|v| std::env::var(v).ok())
        })
    }
}

impl RuntimeConfig {
    /// The argv of the AHP host the bridge starts, before the flags it
    /// owns: `command`, or a plain `copilot` when `command` is the JSON-RPC
    /// default.
    pub fn ahp_command(&self) -> Vec<String> {
        if self.command == Self::default().command {
            AHP_DEFAULT_COMMAND.iter().map(|s| s.to_string()).collect()
        } else {
            self.command.clone()
        }
    }

    /// `connect` as the one `ws://` URL of a running AHP host.
    pub fn ahp_url(&self) -> Option<&str> {
        self.connect
            .as_ref()
            .and_then(|a| a.list().first().copied())
    }

    /// How many runtimes serve the sessions.
    pub fn pool_size(&self) -> usize {
        match &self.connect {
            Some(a) => a.list().len(),
            None => self.processes,
        }
    }

    /// The address runtime `slot` is reached at, when the pool is `connect`.
    pub fn address_of(&self, slot: usize) -> Option<&str> {
        self.connect
            .as_ref()
            .and_then(|a| a.list().get(slot).copied())
    }

    pub(super) fn validate_pool(&self) -> Result<(), ConfigError> {
        if self.processes == 0 || self.processes > MAX_PROCESSES {
            return Err(bad(
                "runtime.processes",
                format!("must be between 1 and {MAX_PROCESSES}"),
            ));
        }
        let Some(addrs) = &self.connect else {
            return Ok(());
        };
        let list = addrs.list();
        if list.is_empty() {
            return Err(bad("runtime.connect", "must name at least one address"));
        }
        if self.processes != 1 && self.processes != list.len() {
            return Err(bad(
                "runtime.processes",
                format!(
                    "with runtime.connect the pool is its {} address(es); leave processes unset",
                    list.len()
                ),
            ));
        }
        // An AHP host's URL is checked with the rest of `[runtime.ahp]`.
        let jsonrpc = self.protocol == RuntimeProtocol::Jsonrpc;
        for addr in list.into_iter().filter(|_| jsonrpc) {
            if addr.parse::<std::net::SocketAddr>().is_err() {
                return Err(bad(
                    "runtime.connect",
                    format!("{addr:?} is not host:port, e.g. \"127.0.0.1:3000\""),
                ));
            }
        }
        Ok(())
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.connect.is_none() && self.command.is_empty() {
            return Err(bad(
                "runtime.command",
                "must name a program (or set runtime.connect)",
            ));
        }
        self.validate_pool()?;
        if !self.health_interval.is_zero() && self.health_timeout.is_zero() {
            return Err(bad(
                "runtime.health_timeout",
                "must be more than 0s while runtime.health_interval is on",
            ));
        }
        if self.client_tool_timeout.is_zero() {
            return Err(bad("runtime.client_tool_timeout", "must be more than 0s"));
        }
        if self.turn_inactivity_timeout.is_zero() {
            return Err(bad(
                "runtime.turn_inactivity_timeout",
                "must be more than 0s",
            ));
        }
        if self.model.trim().is_empty() {
            return Err(bad("runtime.model", "must not be empty"));
        }
        self.provider
            .as_ref()
            .map_or(Ok(()), ProviderConfig::validate)
    }
}

impl ProviderConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        if self.kind.trim().is_empty() {
            return Err(bad(
                "runtime.provider.type",
                "must not be empty (e.g. \"openai\")",
            ));
        }
        if !(self.base_url.starts_with("http://") || self.base_url.starts_with("https://")) {
            return Err(bad(
                "runtime.provider.base_url",
                "must be an http:// or https:// URL",
            ));
        }
        if self.api_key.is_some() && self.api_key_env.is_some() {
            return Err(bad(
                "runtime.provider",
                "set api_key or api_key_env, not both",
            ));
        }
        Ok(())
    }
}
