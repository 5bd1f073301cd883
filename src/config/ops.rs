//! `[admin]` (the health and metrics listener) and `[log]`.

use std::net::SocketAddr;

use serde::{Deserialize, Deserializer};

use super::{bad, ConfigError};

/// The port `[admin] listen` uses by default.
pub const DEFAULT_ADMIN_LISTEN: &str = "127.0.0.1:8422";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// Where `/healthz`, `/readyz` and `/metrics` are served; `""`: nowhere.
    #[serde(deserialize_with = "optional_addr")]
    pub listen: Option<SocketAddr>,
    /// Allow a non-loopback `listen`: the admin listener has no token (it
    /// serves nothing that names a session, client, principal or prompt).
    pub expose: bool,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_ADMIN_LISTEN.parse().ok(),
            expose: false,
        }
    }
}

fn optional_addr<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
    let s = String::deserialize(d)?;
    if s.trim().is_empty() {
        return Ok(None);
    }
    s.parse().map(Some).map_err(|e| {
        serde::de::Error::custom(format!(
            "{s:?} is not an address like \"127.0.0.1:8422\": {e}"
        ))
    })
}

impl AdminConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self.listen {
            Some(a) if !a.ip().is_loopback() && !self.expose => Err(bad(
                "admin.listen",
                "is not a loopback address; the admin listener has no token: set [admin] expose = true to serve it there anyway",
            )),
            _ => Ok(()),
        }
    }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    pub format: LogFormat,
    /// A filter such as "info" or "info,ahp_copilot_bridge::bridge=debug";
    /// the environment variable AHP_BRIDGE_LOG, when set, wins.
    pub level: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            format: LogFormat::Text,
            level: "info".into(),
        }
    }
}

impl LogConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        tracing_subscriber::EnvFilter::try_new(&self.level)
            .map(drop)
            .map_err(|e| {
                bad(
                    "log.level",
                    format!("{:?} is not a log filter: {e}", self.level),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn the_admin_listener_stays_on_loopback_unless_exposed() {
        let c = Config::parse("").unwrap();
        assert_eq!(c.admin.listen, "127.0.0.1:8422".parse().ok());
        let off = Config::parse("[admin]\nlisten = \"\"").unwrap();
        assert_eq!(off.admin.listen, None);
        let e = Config::parse("[admin]\nlisten = \"0.0.0.0:8422\"")
            .unwrap()
            .validate()
            .unwrap_err();
        assert_eq!(e.key, "admin.listen");
        Config::parse("[admin]\nlisten = \"0.0.0.0:8422\"\nexpose = true")
            .unwrap()
            .validate()
            .unwrap();
    }

    #[test]
    fn log_format_and_level_are_checked() {
        let c = Config::parse("[log]\nformat = \"json\"\nlevel = \"debug\"").unwrap();
        assert_eq!(c.log.format, super::LogFormat::Json);
        assert!(Config::parse("[log]\nformat = \"xml\"").is_err());
        let e = Config::parse("[log]\nlevel = \"[[\"")
            .unwrap()
            .validate()
            .unwrap_err();
        assert_eq!(e.key, "log.level");
    }
}
