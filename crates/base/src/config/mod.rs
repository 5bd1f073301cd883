//! One typed configuration, read from TOML. Every key has a default that works
//! on a developer's machine; validation names the bad key and says why. Who
//! may connect is in [`principal_config`]; how much each may do in [`rate_limits`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};

mod audit;
mod customizations;
mod jwt_config;
mod ops;
mod policy_config;
mod policy_rules;
mod pool_config;
mod principal_config;
mod rate_limits;
mod rego_config;
mod reloadable;
mod runtime;
mod runtime_ahp;
mod sdk;
mod secret;
mod server_config;
mod state;
mod tls_config;
mod watch;
pub use audit::{AuditConfig, FsyncPolicy, OnFailure, SyslogConfig, SyslogTarget};
pub use customizations::{
    ClientMcpServers, ClientPlugins, Contents, CustomizationPolicy, CustomizationsConfig,
    DirectoryConfig, HostContainer, HostSource, McpServerConfig, PluginConfig,
};
pub use jwt_config::{BadJwks, HttpsUrl, JwksSource, JwtConfig};
pub use ops::{AdminConfig, LogConfig, LogFormat, TelemetryConfig, DEFAULT_ADMIN_LISTEN};
pub use policy_config::{OverrideAction, OverrideConfig, PolicyConfig};
pub use policy_rules::{
    compile_pattern, Access, BadPattern, EffectiveSection, Mode, SectionRuleConfig,
};
pub use pool_config::{RuntimeAddresses, MAX_PROCESSES};
pub use principal_config::{CertIdentity, PrincipalConfig, Role, Visibility, TOKEN_PRINCIPAL};
pub use rate_limits::RateLimits;
pub use rego_config::{
    Enforcement, RegoConfig, RegoSources, DEFAULT_REGO_TIMEOUT, MAX_REGO_FILES,
    MAX_REGO_FILE_BYTES, MAX_REGO_TOTAL_BYTES,
};
pub use reloadable::Reloadable;
pub use runtime::{ProviderConfig, RuntimeConfig};
pub use runtime_ahp::{AhpHostConfig, RuntimeProtocol, AHP_HOST_SECTIONS};
pub use sdk::{OnViolation, SdkConfig};
pub use secret::Secret;
pub use server_config::ServerConfig;
pub use state::{StateConfig, DEFAULT_STATE_FILE};
pub use tls_config::{AdminTlsConfig, ClientAuth, TlsConfig};
pub use watch::{watch_files, FolderWatch, Watched};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub server: ServerConfig,
    /// Who may connect, and what each may do. Empty (and no `[server] token`):
    /// no authentication, loopback only, everyone may do everything.
    pub principals: Vec<PrincipalConfig>,
    /// `[[jwt]]`: OIDC issuers whose signed tokens name principals.
    pub jwt: Vec<JwtConfig>,
    pub runtime: RuntimeConfig,
    pub policy: PolicyConfig,
    pub audit: AuditConfig,
    pub state: StateConfig,
    pub admin: AdminConfig,
    pub log: LogConfig,
    pub customizations: CustomizationsConfig,
    pub telemetry: TelemetryConfig,
    /// `[sdk]`: apps on the official Copilot SDKs, through the policy too.
    pub sdk: Option<SdkConfig>,
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

/// A config file that is not the TOML of a config (one line).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SyntaxError(pub String);

fn bad(key: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.into(),
        reason: reason.into(),
    }
}

/// Why a config file could not be used: unreadable, not TOML of this
/// shape, or a value validation refuses.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read config {}: {reason}", path.display())]
    Read { path: PathBuf, reason: String },
    #[error("{}: {error}", path.display())]
    Syntax { path: PathBuf, error: SyntaxError },
    #[error(transparent)]
    Invalid(#[from] ConfigError),
}

impl Config {
    /// Reads and validates a file; the env token fills in a missing `[server] token`.
    pub fn load(path: &Path) -> Result<Self, LoadError> {
        let text = std::fs::read_to_string(path).map_err(|e| LoadError::Read {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        let mut cfg = Self::parse(&text).map_err(|e| LoadError::Syntax {
            path: path.to_owned(),
            error: e,
        })?;
        cfg.resolve_paths(path.parent().unwrap_or(Path::new(".")));
        cfg.apply_env();
        cfg.validate()?;
        Ok(cfg)
    }

    /// Parses TOML; an error is one line naming the key and the position.
    pub fn parse(text: &str) -> Result<Self, SyntaxError> {
        toml::from_str(text).map_err(|e| SyntaxError(e.to_string().trim().replace('\n', " ")))
    }

    /// The paths a file names relative to its own folder (`[policy.rego]`'s
    /// modules and data), made relative to `base` instead of the cwd.
    pub fn resolve_paths(&mut self, base: &Path) {
        if let Some(r) = &mut self.policy.rego {
            r.resolve(base);
        }
    }

    pub fn apply_env(&mut self) {
        if self.server.token.is_none() {
            self.server.token = std::env::var("AHP_BRIDGE_TOKEN")
                .ok()
                .filter(|t| !t.is_empty());
        }
    }

    /// Every section, then what needs more than one: names the first bad key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        // Each section checks itself; a rule that spans sections is given
        // what it reads. The order is the order the first fault is named in.
        let token_set = self.server.token.is_some();
        let others = !self.principals.is_empty() || !self.jwt.is_empty();
        self.server.validate(others)?;
        PrincipalConfig::validate_all(&self.principals, token_set)?;
        JwtConfig::validate_all(&self.jwt, &self.principals, token_set)?;
        RateLimits::validate_all(&self.server, &self.principals)?;
        self.audit.validate()?;
        self.runtime.validate()?;
        AhpHostConfig::validate_mode(self)?;
        self.policy.validate()?;
        self.admin.validate()?;
        TlsConfig::validate_transport(&self.server, &self.admin, &self.principals)?;
        if let Some(sdk) = &self.sdk {
            sdk.validate(&self.principals, self.server.allow_plaintext_remote)?;
        }
        self.customizations.validate()?;
        self.policy.customizations.validate()?;
        self.log.validate()?;
        self.telemetry.validate()?;
        self.policy.validate_sections()
    }

    // What the sections say together.

    /// The effective policy as a table (`config check`): one row per
    /// catalogued section, with who may transform it.
    pub fn policy_table(&self) -> String {
        self.policy.table(&self.transform_principals())
    }

    /// This config's reloadable keys.
    pub fn reloadable(&self) -> Reloadable<'_> {
        Reloadable(self)
    }

    /// Where the state store lives, if anywhere.
    pub fn state_path(&self) -> Option<PathBuf> {
        if !self.state.enabled {
            return None;
        }
        self.state.path.clone().or_else(|| {
            let audit = self.audit.path.as_ref()?;
            let dir = audit.parent().filter(|d| !d.as_os_str().is_empty());
            Some(dir.map_or_else(
                || PathBuf::from(DEFAULT_STATE_FILE),
                |d| d.join(DEFAULT_STATE_FILE),
            ))
        })
    }

    /// The limits of the principal named `name`: its own overrides over the
    /// `[server]` defaults (the token principal and `local` have the defaults).
    pub fn rate_limits(&self, name: &str) -> RateLimits {
        let defaults = self.default_rate_limits();
        let own = self
            .principals
            .iter()
            .find(|p| p.name == name && name != TOKEN_PRINCIPAL);
        let Some(p) = own else { return defaults };
        RateLimits {
            max_sessions: p.max_sessions.unwrap_or(defaults.max_sessions),
            turns_per_minute: p.turns_per_minute.unwrap_or(defaults.turns_per_minute),
            actions_per_second: p.actions_per_second.unwrap_or(defaults.actions_per_second),
            actions_burst: p.actions_burst.unwrap_or(defaults.actions_burst),
        }
    }

    /// The `[server]` defaults.
    pub fn default_rate_limits(&self) -> RateLimits {
        let s = &self.server;
        RateLimits {
            max_sessions: s.max_sessions,
            turns_per_minute: s.turns_per_minute,
            actions_per_second: s.actions_per_second,
            actions_burst: s.actions_burst,
        }
    }

    /// Every principal's limits, keyed by its name: each `[[principals]]`
    /// entry, the token principal with `[server] token`, and `local` when
    /// there are no credentials at all.
    pub fn all_rate_limits(&self) -> Vec<(String, RateLimits)> {
        let mut out: Vec<(String, RateLimits)> = self
            .principals
            .iter()
            .map(|p| (p.name.clone(), self.rate_limits(&p.name)))
            .collect();
        if self.server.token.is_some() {
            out.push((TOKEN_PRINCIPAL.into(), self.rate_limits(TOKEN_PRINCIPAL)));
        }
        if out.is_empty() {
            out.push(("local".into(), self.rate_limits("local")));
        }
        out
    }

    /// Each principal that may transform, with its allow-list (`None`: any
    /// section the policy allows). Without credentials, everyone (`local`).
    pub fn transform_principals(&self) -> BTreeMap<String, Option<Vec<String>>> {
        let mut out = BTreeMap::new();
        if self.server.token.is_none() && self.principals.is_empty() {
            out.insert("local".to_owned(), None);
        }
        if self.server.token.is_some() {
            out.insert(TOKEN_PRINCIPAL.to_owned(), None);
        }
        for p in self
            .principals
            .iter()
            .filter(|p| p.roles.contains(&Role::Transform))
        {
            out.insert(p.name.clone(), p.sections.clone());
        }
        out
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
        let e = Config::parse("[server]\nbogus = 1").unwrap_err().0;
        assert!(e.contains("bogus"), "{e}");
        let e = Config::parse("[policy]\ntransform_timeout = \"soon\"")
            .unwrap_err()
            .0;
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
    fn an_instance_is_a_name_syslog_and_a_label_take_as_it_is() {
        for bad in ["", "two words", "a/b", &"x".repeat(65)] {
            let e = Config::parse(&format!("[server]\ninstance = {bad:?}"))
                .unwrap()
                .validate()
                .unwrap_err();
            assert_eq!(e.key, "server.instance", "{bad:?}");
        }
        let c = Config::parse("[server]\ninstance = \"bridge-0.eu_1\"").unwrap();
        c.validate().unwrap();
        assert_eq!(c.server.instance(), "bridge-0.eu_1");
        // Unset: the host name, never empty.
        assert!(!Config::default().server.instance().is_empty());
    }

    #[test]
    fn durations_parse() {
        let c = Config::parse("[server]\nclient_grace = \"250ms\"").unwrap();
        assert_eq!(c.server.client_grace, Duration::from_millis(250));
    }
}
