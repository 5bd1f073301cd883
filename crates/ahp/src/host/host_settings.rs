//! The host's settings: the parts of the config it reads, taken once when
//! it is built. All of them are start-only: a reload (SIGHUP) hands the
//! host new principals, limits and policy through their own owners
//! ([`super::credentials`], the policy reader), never these. Beside them,
//! the session settings the backend offers ([`BackendConfig`]), which it
//! gives when it links.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::Duration;

use ahp_types::state::{SessionConfigPropertySchema, SessionModelInfo};
use serde_json::Value;

use super::sessions::PROVIDER;
use super::window::WindowBounds;
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
    backend: BackendConfig,
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
            backend: BackendConfig::default(),
        }
    }

    /// The session settings the backend offers beside the host's own.
    pub fn backend_config(&self) -> &BackendConfig {
        &self.backend
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
    pub(super) fn window(&self) -> WindowBounds {
        WindowBounds {
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

/// Why a client's value of a backend setting is refused, in words for the
/// client.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SettingRefused(pub(crate) String);

/// The session settings the backend offers beside the host's own (in
/// front of the runtime's AHP host: its `mode`, ...): their schema as the
/// backend gave it when it linked, offered by `resolveSessionConfig`, and
/// the check of a client's value against it, at creation and at
/// `configChanged`. Empty until the backend says.
#[derive(Debug, Default)]
pub struct BackendConfig {
    properties: RwLock<BTreeMap<String, SessionConfigPropertySchema>>,
}

impl BackendConfig {
    /// The settings the backend offers now (each link may say anew).
    pub fn set(&self, properties: BTreeMap<String, SessionConfigPropertySchema>) {
        *self.properties.write().unwrap_or_else(|e| e.into_inner()) = properties;
    }

    pub fn properties(&self) -> BTreeMap<String, SessionConfigPropertySchema> {
        self.properties
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The schema of setting `key`, if it is one of them.
    pub fn property(&self, key: &str) -> Option<SessionConfigPropertySchema> {
        self.properties
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
    }

    /// `value` for `key` against its schema: `Ok(false)` when `key` is not
    /// one of them; `changing`: after the session's creation, when only a
    /// session-mutable setting may change.
    pub(crate) fn check(
        &self,
        key: &str,
        value: &Value,
        changing: bool,
    ) -> Result<bool, SettingRefused> {
        let properties = self.properties.read().unwrap_or_else(|e| e.into_inner());
        let Some(p) = properties.get(key) else {
            return Ok(false);
        };
        if p.read_only == Some(true) {
            return Err(SettingRefused(format!("config.{key} is read-only")));
        }
        if changing && p.session_mutable != Some(true) {
            return Err(SettingRefused(format!(
                "config.{key} is fixed when the session is created"
            )));
        }
        let typed = match p.r#type.as_str() {
            "string" => value.is_string(),
            "boolean" => value.is_boolean(),
            "number" => value.is_number(),
            "integer" => value.is_i64() || value.is_u64(),
            other => {
                return Err(SettingRefused(format!(
                    "config.{key} is of type {other}, which is not taken"
                )))
            }
        };
        if !typed {
            return Err(SettingRefused(format!(
                "config.{key} must be a {}",
                p.r#type
            )));
        }
        if let Some(allowed) = &p.r#enum {
            if !allowed.contains(value) {
                return Err(SettingRefused(format!(
                    "config.{key} must be one of {}",
                    Value::from(allowed.clone())
                )));
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_value_is_held_to_the_schema_the_backend_gave() {
        let b = BackendConfig::default();
        assert_eq!(
            b.check("mode", &json!("plan"), false),
            Ok(false),
            "none yet"
        );
        let mode: SessionConfigPropertySchema = serde_json::from_value(json!({
            "type": "string", "title": "Mode", "enum": ["interactive", "plan"],
            "default": "interactive", "sessionMutable": true
        }))
        .unwrap();
        let image: SessionConfigPropertySchema = serde_json::from_value(
            json!({"type": "boolean", "title": "Images", "sessionMutable": false}),
        )
        .unwrap();
        b.set(BTreeMap::from([
            ("mode".into(), mode),
            ("image".into(), image),
        ]));
        assert_eq!(b.check("mode", &json!("plan"), true), Ok(true));
        assert!(b
            .check("mode", &json!("autopilot"), false)
            .unwrap_err()
            .0
            .contains("one of"));
        assert!(b
            .check("mode", &json!(1), false)
            .unwrap_err()
            .0
            .contains("a string"));
        assert_eq!(b.check("image", &json!(true), false), Ok(true));
        assert!(b
            .check("image", &json!(true), true)
            .unwrap_err()
            .0
            .contains("fixed"));
        assert_eq!(b.check("other", &json!(1), false), Ok(false));
    }
}
