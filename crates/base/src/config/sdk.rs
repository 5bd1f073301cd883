//! `[sdk]`: a listener for apps built on the official Copilot SDKs, which
//! speak the runtime's own JSON-RPC. Their connections reach a runtime of
//! the pool through the bridge, under the operator's prompt policy and the
//! audit, as the principal `principal` names.

use std::net::SocketAddr;

use serde::Deserialize;

use super::tls_config::TlsConfig;
use super::{bad, ConfigError, PrincipalConfig};

/// What a `session.create` or `session.resume` that breaks the policy gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnViolation {
    /// An error naming the rule; nothing is created.
    #[default]
    Refuse,
    /// The offending override, server or agent dropped, the rest kept.
    Strip,
}

impl OnViolation {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Refuse => "refuse",
            Self::Strip => "strip",
        }
    }
}

/// `[sdk]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SdkConfig {
    /// Where SDK apps connect (the address they give as the CLI's URI).
    pub listen: SocketAddr,
    /// The environment variable holding the connection token apps give
    /// (`connect {token}`); without one, loopback only.
    pub token_env: Option<String>,
    /// The `[[principals]]` entry SDK connections act as.
    pub principal: String,
    #[serde(default)]
    pub on_violation: OnViolation,
    pub tls: Option<TlsConfig>,
}

impl SdkConfig {
    /// The token apps must give, read from `token_env` now.
    pub fn token(&self) -> Option<String> {
        let name = self.token_env.as_deref()?;
        std::env::var(name).ok().filter(|t| !t.is_empty())
    }
}

impl SdkConfig {
    /// `[sdk]`: its principal one of `principals`, and off loopback a token
    /// and TLS (or the operator's word that a terminator is in front).
    pub(super) fn validate(
        &self,
        principals: &[PrincipalConfig],
        allow_plaintext_remote: bool,
    ) -> Result<(), ConfigError> {
        let sdk = self;
        if let Some(t) = &sdk.tls {
            t.validate("sdk.tls")?;
        }
        if !principals.iter().any(|p| p.name == sdk.principal) {
            return Err(bad(
                "sdk.principal",
                format!(
                    "{:?} is not the name of a [[principals]] entry; SDK connections act as one",
                    sdk.principal
                ),
            ));
        }
        let remote = !sdk.listen.ip().is_loopback();
        match &sdk.token_env {
            None if remote => {
                return Err(bad(
                    "sdk.token_env",
                    format!(
                        "{} is not a loopback address: apps off this machine must give a connection token; name the environment variable holding it",
                        sdk.listen
                    ),
                ))
            }
            Some(name) if sdk.token().is_none() => {
                return Err(bad(
                    "sdk.token_env",
                    format!("the environment variable {name} is not set (or empty)"),
                ))
            }
            _ => {}
        }
        if remote && sdk.tls.is_none() && !allow_plaintext_remote {
            return Err(bad(
                "sdk.tls",
                format!(
                    "{} is not a loopback address: connection tokens, prompts and rewrites would cross the network in clear; add [sdk.tls] cert and key, or set [server] allow_plaintext_remote = true when a TLS terminator in front of the bridge is the only way in",
                    sdk.listen
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn refusal(toml: &str) -> Option<String> {
        Config::parse(toml)
            .unwrap()
            .validate()
            .err()
            .map(|e| format!("{}: {}", e.key, e.reason))
    }

    fn with_principal(sdk: &str) -> String {
        let sha = "a".repeat(64);
        format!("[[principals]]\nname = \"apps\"\ntoken_sha256 = \"{sha}\"\nroles = [\"observe\"]\n[sdk]\n{sdk}")
    }

    #[test]
    fn sdk_listeners_follow_the_off_loopback_rules_naming_the_key() {
        let ok = with_principal("listen = \"127.0.0.1:8422\"\nprincipal = \"apps\"\n");
        assert_eq!(refusal(&ok), None);
        let nobody = with_principal("listen = \"127.0.0.1:8422\"\nprincipal = \"nobody\"\n");
        assert!(refusal(&nobody).unwrap().starts_with("sdk.principal:"));
        let remote = with_principal("listen = \"0.0.0.0:8422\"\nprincipal = \"apps\"\n");
        assert!(refusal(&remote).unwrap().starts_with("sdk.token_env:"));
        let unset = with_principal(
            "listen = \"127.0.0.1:8422\"\nprincipal = \"apps\"\ntoken_env = \"AHP_TEST_SDK_NEVER_SET\"\n",
        );
        assert!(refusal(&unset).unwrap().contains("AHP_TEST_SDK_NEVER_SET"));
        // PATH is set wherever tests run: a token, off loopback, in clear.
        let clear = with_principal(
            "listen = \"0.0.0.0:8422\"\nprincipal = \"apps\"\ntoken_env = \"PATH\"\n",
        );
        assert!(refusal(&clear).unwrap().starts_with("sdk.tls:"));
        let terminated = format!("[server]\nallow_plaintext_remote = true\n{clear}");
        assert_eq!(refusal(&terminated), None);
        let bad = with_principal(
            "listen = \"127.0.0.1:8422\"\nprincipal = \"apps\"\non_violation = \"ignore\"\n",
        );
        assert!(Config::parse(&bad).is_err());
    }
}
