//! One typed configuration, read from TOML. Every key has a default that works
//! on a developer's machine; validation names the bad key and says why. Who
//! may connect is in [`principals`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::sections::SECTION_CATALOGUE;

mod audit;
mod policy_rules;
mod principals;
pub use audit::{AuditConfig, FsyncPolicy, OnFailure, SyslogConfig, SyslogTarget};
pub use policy_rules::{compile_pattern, Access, EffectiveSection, Mode, SectionRuleConfig};
pub use principals::{PrincipalConfig, Role, Visibility, TOKEN_PRINCIPAL};
mod pool;
pub use pool::{RuntimeAddresses, MAX_PROCESSES};
mod state;
pub use state::{StateConfig, DEFAULT_STATE_FILE};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub server: ServerConfig,
    /// Who may connect, and what each may do. Empty (and no `[server] token`):
    /// no authentication, loopback only, everyone may do everything.
    pub principals: Vec<PrincipalConfig>,
    pub runtime: RuntimeConfig,
    pub policy: PolicyConfig,
    pub audit: AuditConfig,
    pub state: StateConfig,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address to listen on. Loopback unless a token is set.
    pub listen: SocketAddr,
    /// Bearer token required in the WebSocket upgrade; env AHP_BRIDGE_TOKEN also sets it.
    pub token: Option<String>,
    /// Origins a browser may connect from (`scheme://host:*` for any port); any other Origin gets 403.
    pub allowed_origins: Vec<String>,
    pub max_frame_bytes: usize,
    pub max_json_depth: usize,
    /// Actions kept for `reconnect` replay.
    pub replay_buffer: usize,
    /// Messages queued for one client before it is dropped as too slow.
    pub outbound_queue: usize,
    /// Subscriptions one connection may hold.
    pub max_subscriptions: usize,
    #[serde(deserialize_with = "duration")]
    pub client_grace: Duration,
    /// Who sees a session: only the principal that created it ("owner"), or every principal ("all").
    pub session_visibility: Visibility,
    /// Deadline for the WebSocket upgrade and for `initialize` after it.
    #[serde(deserialize_with = "duration")]
    pub handshake_timeout: Duration,
    /// Connections held at once; more are closed as soon as they are accepted.
    pub max_connections: usize,
    /// Connections held at once from one peer address.
    pub max_connections_per_ip: usize,
    /// Bytes of actions kept for `reconnect` replay (besides `replay_buffer`, a count).
    pub replay_buffer_bytes: usize,
    /// Bytes queued for one client before it is dropped as too slow (besides `outbound_queue`).
    pub outbound_queue_bytes: usize,
    /// A client action larger than this (serialized) is refused.
    pub max_action_bytes: usize,
    /// How long a graceful shutdown (SIGTERM, SIGINT) may take before the process exits anyway.
    #[serde(deserialize_with = "duration")]
    pub shutdown_timeout: Duration,
    /// The largest file `resourceRead` returns; a larger one is refused (never truncated).
    pub max_resource_bytes: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8421)),
            token: None,
            allowed_origins: Vec::new(),
            max_frame_bytes: 4 * 1024 * 1024,
            max_json_depth: 128,
            replay_buffer: 4096,
            outbound_queue: 1024,
            max_subscriptions: 256,
            client_grace: Duration::from_secs(30),
            session_visibility: Visibility::Owner,
            handshake_timeout: Duration::from_secs(10),
            max_connections: 1024,
            max_connections_per_ip: 256,
            replay_buffer_bytes: 16 * 1024 * 1024,
            outbound_queue_bytes: 16 * 1024 * 1024,
            max_action_bytes: 256 * 1024,
            shutdown_timeout: Duration::from_secs(10),
            max_resource_bytes: 1024 * 1024,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeConfig {
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
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyConfig {
    /// Sections no client may transform.
    pub restricted: Vec<String>,
    #[serde(deserialize_with = "duration")]
    pub transform_timeout: Duration,
    /// A client answer with more sections than this is refused whole.
    pub max_sections: usize,
    /// A client answer larger than this (serialized) is refused whole.
    pub max_response_bytes: usize,
    /// Operator overrides, fixed for every session.
    pub overrides: BTreeMap<String, OverrideConfig>,
    /// Per-section rules (`[policy.sections.ID]`), in [`policy_rules`].
    pub sections: BTreeMap<String, SectionRuleConfig>,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            restricted: vec!["safety".into()],
            transform_timeout: Duration::from_secs(5),
            max_sections: 32,
            max_response_bytes: 256 * 1024,
            overrides: BTreeMap::new(),
            sections: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverrideConfig {
    pub action: OverrideAction,
    #[serde(default)]
    pub content: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OverrideAction {
    Append,
    Prepend,
    Replace,
    Remove,
}

impl OverrideAction {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Append => "append",
            Self::Prepend => "prepend",
            Self::Replace => "replace",
            Self::Remove => "remove",
        }
    }
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    humantime::parse_duration(&s)
        .map_err(|e| serde::de::Error::custom(format!("{s:?} is not a duration like \"5s\": {e}")))
}

/// A config problem, naming the key.
#[derive(Debug, thiserror::Error)]
#[error("config {key}: {reason}")]
pub struct ConfigError {
    pub key: String,
    pub reason: String,
}

fn bad(key: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.into(),
        reason: reason.into(),
    }
}

impl Config {
    /// Reads and validates a file; the env token fills in a missing `[server] token`.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read config {}: {e}", path.display()))?;
        let mut cfg = Self::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        cfg.apply_env();
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|e| e.to_string().trim().replace('\n', " "))
    }

    pub fn apply_env(&mut self) {
        if self.server.token.is_none() {
            self.server.token = std::env::var("AHP_BRIDGE_TOKEN")
                .ok()
                .filter(|t| !t.is_empty());
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let s = &self.server;
        if s.token.is_none() && self.principals.is_empty() && !s.listen.ip().is_loopback() {
            return Err(bad(
                "server.listen",
                format!(
                    "{} is not a loopback address and no token is set; add [[principals]], set [server] token (or env AHP_BRIDGE_TOKEN), or listen on 127.0.0.1",
                    s.listen
                ),
            ));
        }
        if matches!(&s.token, Some(t) if t.len() < 16) {
            return Err(bad("server.token", "must be at least 16 characters"));
        }
        if s.max_frame_bytes < 1024 {
            return Err(bad("server.max_frame_bytes", "must be at least 1024"));
        }
        if s.max_json_depth == 0 {
            return Err(bad("server.max_json_depth", "must be at least 1"));
        }
        if s.replay_buffer == 0 {
            return Err(bad("server.replay_buffer", "must be at least 1"));
        }
        if s.outbound_queue < 16 {
            return Err(bad("server.outbound_queue", "must be at least 16"));
        }
        for o in &s.allowed_origins {
            let is_origin = o.split_once("://").is_some_and(|(scheme, rest)| {
                !scheme.is_empty() && !rest.is_empty() && !rest.contains('/')
            });
            if !is_origin {
                return Err(bad(
                    "server.allowed_origins",
                    format!("{o:?} is not an origin: scheme://host, scheme://host:port, or scheme://host:* for any port"),
                ));
            }
        }
        if s.shutdown_timeout.is_zero() {
            return Err(bad("server.shutdown_timeout", "must be more than 0s"));
        }
        if s.handshake_timeout.is_zero() {
            return Err(bad("server.handshake_timeout", "must be more than 0s"));
        }
        for (key, v, min) in [
            ("server.max_connections", s.max_connections, 1),
            ("server.max_connections_per_ip", s.max_connections_per_ip, 1),
            (
                "server.replay_buffer_bytes",
                s.replay_buffer_bytes,
                64 * 1024,
            ),
            (
                "server.outbound_queue_bytes",
                s.outbound_queue_bytes,
                64 * 1024,
            ),
            ("server.max_action_bytes", s.max_action_bytes, 1024),
            ("server.max_resource_bytes", s.max_resource_bytes, 1),
        ] {
            if v < min {
                return Err(bad(key, format!("must be at least {min}")));
            }
        }
        // A file goes out in one message, escaped (JSON text, up to 6 bytes a
        // byte) or base64: it must fit a client's outbound queue with room to spare.
        if s.max_resource_bytes > s.outbound_queue_bytes / 8 {
            return Err(bad(
                "server.max_resource_bytes",
                format!(
                    "must be at most server.outbound_queue_bytes / 8 ({}), so a file fits a client's outbound queue",
                    s.outbound_queue_bytes / 8
                ),
            ));
        }
        self.validate_principals()?;
        self.audit.validate()?;
        let r = &self.runtime;
        if r.connect.is_none() && r.command.is_empty() {
            return Err(bad(
                "runtime.command",
                "must name a program (or set runtime.connect)",
            ));
        }
        r.validate_pool()?;
        if !r.health_interval.is_zero() && r.health_timeout.is_zero() {
            return Err(bad(
                "runtime.health_timeout",
                "must be more than 0s while runtime.health_interval is on",
            ));
        }
        if r.client_tool_timeout.is_zero() {
            return Err(bad("runtime.client_tool_timeout", "must be more than 0s"));
        }
        if r.model.trim().is_empty() {
            return Err(bad("runtime.model", "must not be empty"));
        }
        if let Some(p) = &r.provider {
            if p.kind.trim().is_empty() {
                return Err(bad(
                    "runtime.provider.type",
                    "must not be empty (e.g. \"openai\")",
                ));
            }
            if !(p.base_url.starts_with("http://") || p.base_url.starts_with("https://")) {
                return Err(bad(
                    "runtime.provider.base_url",
                    "must be an http:// or https:// URL",
                ));
            }
            if p.api_key.is_some() && p.api_key_env.is_some() {
                return Err(bad(
                    "runtime.provider",
                    "set api_key or api_key_env, not both",
                ));
            }
        }
        let p = &self.policy;
        for id in &p.restricted {
            if !SECTION_CATALOGUE.iter().any(|s| s.id == id) {
                return Err(bad(
                    "policy.restricted",
                    format!("{id:?} is not a known section id"),
                ));
            }
        }
        if p.transform_timeout.is_zero() {
            return Err(bad("policy.transform_timeout", "must be more than 0"));
        }
        if p.max_sections == 0 {
            return Err(bad("policy.max_sections", "must be at least 1"));
        }
        for (id, o) in &p.overrides {
            let key = format!("policy.overrides.{id}");
            if !SECTION_CATALOGUE.iter().any(|s| s.id == id) {
                return Err(bad(&key, "not a known section id"));
            }
            match (o.action, &o.content) {
                (OverrideAction::Remove, Some(_)) => {
                    return Err(bad(&key, "action \"remove\" takes no content"))
                }
                (OverrideAction::Remove, None) => {}
                (_, None) => {
                    return Err(bad(
                        &key,
                        format!("action {:?} needs content", o.action.as_str()),
                    ))
                }
                _ => {}
            }
        }
        self.validate_policy_rules()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_loopback() {
        let c = Config::parse("").unwrap();
        c.validate().unwrap();
        assert!(c.server.listen.ip().is_loopback());
        assert_eq!(c.policy.restricted, vec!["safety"]);
        assert_eq!(c.policy.transform_timeout, Duration::from_secs(5));
    }

    #[test]
    fn bad_keys_are_named() {
        let e = Config::parse("[server]\nlisten = \"0.0.0.0:1\"")
            .unwrap()
            .validate()
            .unwrap_err();
        assert_eq!(e.key, "server.listen");
        assert!(e.reason.contains("token"));
        let e = Config::parse("[server]\nbogus = 1").unwrap_err();
        assert!(e.contains("bogus"), "{e}");
        let e = Config::parse("[policy]\ntransform_timeout = \"soon\"").unwrap_err();
        assert!(e.contains("transform_timeout") || e.contains("soon"), "{e}");
        let e = Config::parse("[policy.overrides.tone]\naction = \"append\"")
            .unwrap()
            .validate()
            .unwrap_err();
        assert_eq!(e.key, "policy.overrides.tone");
        let e = Config::parse("[policy]\nrestricted = [\"nope\"]")
            .unwrap()
            .validate()
            .unwrap_err();
        assert_eq!(e.key, "policy.restricted");
        for bad in ["0", "2097153"] {
            let e = Config::parse(&format!("[server]\nmax_resource_bytes = {bad}"))
                .unwrap()
                .validate()
                .unwrap_err();
            assert_eq!(e.key, "server.max_resource_bytes", "{bad}");
        }
        for bad in ["localhost:5173", "http://x/", "*"] {
            let e = Config::parse(&format!("[server]\nallowed_origins = [{bad:?}]"))
                .unwrap()
                .validate()
                .unwrap_err();
            assert_eq!(e.key, "server.allowed_origins", "{bad}");
        }
    }

    #[test]
    fn durations_parse() {
        let c = Config::parse("[server]\nclient_grace = \"250ms\"").unwrap();
        assert_eq!(c.server.client_grace, Duration::from_millis(250));
    }
}
