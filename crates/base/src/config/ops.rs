//! `[admin]` (the health and metrics listener), `[log]` and `[telemetry]`
//! (the trace exporter).

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
    /// `https://` on `listen`, with this certificate (no client certificates).
    pub tls: Option<super::AdminTlsConfig>,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_ADMIN_LISTEN.parse().ok(),
            expose: false,
            tls: None,
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
    /// A filter such as "info" or "info,ahp_bridge_join::bridge=debug";
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

/// `[telemetry]`: traces over OTLP/HTTP (protobuf). Nothing is built or
/// exported while `otlp_endpoint` is unset.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// The collector's base URL, e.g. "http://127.0.0.1:4318"; spans go to
    /// its `/v1/traces`. Plain `http://` only.
    pub otlp_endpoint: Option<String>,
    /// The resource's `service.name`.
    pub service_name: String,
    /// The share of turns traced when no client sent a sampled
    /// `traceparent`, 0.0 to 1.0 (a client's decision is followed).
    pub sample_ratio: f64,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            otlp_endpoint: None,
            service_name: "ahp-copilot-bridge".into(),
            sample_ratio: 1.0,
        }
    }
}

impl TelemetryConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(e) = &self.otlp_endpoint {
            check_endpoint(e).map_err(|why| bad("telemetry.otlp_endpoint", why.to_string()))?;
        }
        if self.service_name.trim().is_empty() {
            return Err(bad("telemetry.service_name", "is empty"));
        }
        if !(0.0..=1.0).contains(&self.sample_ratio) {
            return Err(bad(
                "telemetry.sample_ratio",
                format!("{} is not between 0.0 and 1.0", self.sample_ratio),
            ));
        }
        Ok(())
    }

    /// Where spans are posted: the endpoint's `/v1/traces`; `None`: nowhere.
    pub fn traces_url(&self) -> Option<String> {
        let base = self.otlp_endpoint.as_deref()?;
        Some(format!("{}/v1/traces", base.trim_end_matches('/')))
    }
}

/// Why a telemetry endpoint is refused.
#[derive(Debug, thiserror::Error)]
enum EndpointError {
    #[error("{0:?} is not a URL like \"http://127.0.0.1:4318\" (only plain http: send to a local collector)")]
    NotHttp(String),
    #[error("{0:?} is not a URL like \"http://127.0.0.1:4318\"")]
    Malformed(String),
}

/// An endpoint the bridge can post to: `http://HOST[:PORT][/PATH]`.
fn check_endpoint(e: &str) -> Result<(), EndpointError> {
    let Some(rest) = e.strip_prefix("http://") else {
        return Err(EndpointError::NotHttp(e.to_owned()));
    };
    let authority = rest.split('/').next().unwrap_or_default();
    // `[::1]:4318`, `host:4318`, `host`.
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((h, tail)) => (h, tail.strip_prefix(':')),
            None => ("", None),
        },
        None => match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        },
    };
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok());
    if host.is_empty() || !port_ok || rest.contains(['?', '#', ' ', '@']) {
        return Err(EndpointError::Malformed(e.to_owned()));
    }
    Ok(())
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
        // Exposed, it is TLS or a terminator's word (see config/tls_config.rs).
        Config::parse(
            "[server]\nallow_plaintext_remote = true\n[admin]\nlisten = \"0.0.0.0:8422\"\nexpose = true",
        )
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

    #[test]
    fn telemetry_is_off_unless_an_http_endpoint_is_set() {
        let c = Config::parse("").unwrap();
        assert_eq!(c.telemetry.otlp_endpoint, None);
        assert_eq!(c.telemetry.traces_url(), None);
        assert_eq!(c.telemetry.service_name, "ahp-copilot-bridge");
        assert_eq!(c.telemetry.sample_ratio, 1.0);
        let c = Config::parse("[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318/\"").unwrap();
        c.validate().unwrap();
        assert_eq!(
            c.telemetry.traces_url().as_deref(),
            Some("http://127.0.0.1:4318/v1/traces")
        );
        for ok in [
            "http://collector",
            "http://[::1]:4318",
            "http://c:4318/otlp",
        ] {
            let c = Config::parse(&format!("[telemetry]\notlp_endpoint = {ok:?}")).unwrap();
            c.validate().unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for (key, text) in [
            (
                "telemetry.otlp_endpoint",
                "otlp_endpoint = \"https://c:4318\"",
            ),
            (
                "telemetry.otlp_endpoint",
                "otlp_endpoint = \"127.0.0.1:4318\"",
            ),
            (
                "telemetry.otlp_endpoint",
                "otlp_endpoint = \"http://:4318\"",
            ),
            (
                "telemetry.otlp_endpoint",
                "otlp_endpoint = \"http://c:port\"",
            ),
            ("telemetry.sample_ratio", "sample_ratio = 1.5"),
            ("telemetry.sample_ratio", "sample_ratio = -0.1"),
            ("telemetry.service_name", "service_name = \" \""),
        ] {
            let e = Config::parse(&format!("[telemetry]\n{text}"))
                .unwrap()
                .validate()
                .unwrap_err();
            assert_eq!(e.key, key, "{text}");
        }
    }
}
