//! `[runtime] protocol` and `[runtime.ahp]`: the bridge in front of the
//! runtime's own AHP host (`copilot --ahp-host`) instead of its JSON-RPC.
//! What that host cannot take (a model provider, SDK apps, the bridge's
//! customization packages, a section replaced or removed, a section it has
//! no hook for) is refused here, by key, rather than dropped at run time.

use std::path::PathBuf;

use serde::Deserialize;

use super::{bad, Config, ConfigError, OverrideAction};

/// Which wire the bridge speaks to the runtime.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeProtocol {
    /// The runtime's private JSON-RPC (`copilot --headless --stdio`).
    #[default]
    Jsonrpc,
    /// AHP 1.0, served by the runtime itself (`copilot --ahp-host`).
    Ahp,
}

/// The section ids the runtime's AHP host lets a session add text to
/// (`createSession`'s `config.systemMessageSections`), append or prepend only.
pub const AHP_HOST_SECTIONS: &[&str] = &[
    "environment_context",
    "custom_instructions",
    "runtime_instructions",
];

/// `[runtime.ahp]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AhpHostConfig {
    /// With `[runtime] connect`: the file holding that host's connection
    /// token (`--ahp-host-token`). Unset: the host takes none. A host the
    /// bridge starts gets a fresh token, so this must then be unset.
    pub connection_token_file: Option<PathBuf>,
    /// The file holding the GitHub token the bridge authenticates with.
    pub github_token_file: Option<PathBuf>,
    /// Or the environment variable holding it.
    pub github_token_env: Option<String>,
}

/// The argv the bridge starts an AHP host with when `[runtime] command` is
/// left at its JSON-RPC default: the bridge adds the host's own flags.
pub(super) const AHP_DEFAULT_COMMAND: &[&str] = &["copilot", "--no-auto-update"];

/// Flags the bridge sets on a host it starts; a `command` naming one would
/// fight it.
const OWNED_FLAGS: &[&str] = &[
    "--stdio",
    "--headless",
    "--port",
    "--listen",
    "--ahp-host",
    "--ahp-host-token",
    "--ahp-host-disable-token",
];

impl AhpHostConfig {
    /// Under `protocol = "ahp"`, what that host can be reached with and
    /// take; under `"jsonrpc"`, that `[runtime.ahp]` is not set for nothing.
    /// A rule over the whole config: the host's mode rules out keys of
    /// other sections.
    pub(super) fn validate_mode(c: &Config) -> Result<(), ConfigError> {
        let rt = &c.runtime;
        let ahp = &rt.ahp;
        if rt.protocol == RuntimeProtocol::Jsonrpc {
            let set = ahp.connection_token_file.is_some()
                || ahp.github_token_file.is_some()
                || ahp.github_token_env.is_some();
            if set {
                return Err(bad(
                    "runtime.ahp",
                    "is read only with runtime.protocol = \"ahp\"",
                ));
            }
            if c.policy.auto_approve_read_only {
                return Err(bad(
                    "policy.auto_approve_read_only",
                    "applies in front of the runtime's AHP host (runtime.protocol = \"ahp\")",
                ));
            }
            return Ok(());
        }
        match (&ahp.github_token_file, &ahp.github_token_env) {
            (Some(_), Some(_)) => {
                return Err(bad(
                    "runtime.ahp",
                    "set github_token_file or github_token_env, not both",
                ))
            }
            (None, None) => {
                return Err(bad(
                    "runtime.ahp",
                    "needs github_token_file or github_token_env: the GitHub identity the bridge signs in to the host with",
                ))
            }
            _ => {}
        }
        if let Some(e) = &ahp.github_token_env {
            if e.trim().is_empty() {
                return Err(bad("runtime.ahp.github_token_env", "must name a variable"));
            }
        }
        if let Some(addrs) = &rt.connect {
            let list = addrs.list();
            let [url] = list.as_slice() else {
                return Err(bad(
                    "runtime.connect",
                    "with protocol = \"ahp\" names one host: a ws:// URL",
                ));
            };
            check_ws_url(url)?;
        } else {
            if ahp.connection_token_file.is_some() {
                return Err(bad(
                    "runtime.ahp.connection_token_file",
                    "is for runtime.connect: a host the bridge starts gets a fresh token",
                ));
            }
            if let Some(flag) = rt
                .ahp_command()
                .iter()
                .find(|a| OWNED_FLAGS.contains(&a.split('=').next().unwrap_or(a)))
            {
                return Err(bad(
                    "runtime.command",
                    format!("{flag} is set by the bridge with protocol = \"ahp\""),
                ));
            }
        }
        if rt.processes != 1 {
            return Err(bad(
                "runtime.processes",
                "with protocol = \"ahp\" the bridge runs one host",
            ));
        }
        if rt.provider.is_some() {
            return Err(bad(
                "runtime.provider",
                "the AHP host runs Copilot sessions only; it takes no model provider",
            ));
        }
        if !rt.models.is_empty() {
            return Err(bad(
                "runtime.models",
                "the AHP host picks its model (auto); it takes no list",
            ));
        }
        if c.sdk.is_some() {
            return Err(bad(
                "sdk",
                "SDK apps speak the runtime's JSON-RPC; the AHP host has none",
            ));
        }
        let custom = &c.customizations;
        if !(custom.directories.is_empty()
            && custom.plugins.is_empty()
            && custom.mcp_servers.is_empty())
        {
            return Err(bad(
                "customizations",
                "the AHP host takes no customizations from the bridge",
            ));
        }
        for (id, o) in &c.policy.overrides {
            let key = format!("policy.overrides.{id}");
            if !AHP_HOST_SECTIONS.contains(&id.as_str()) {
                return Err(bad(
                    &key,
                    format!(
                        "the AHP host adds text only to {}",
                        AHP_HOST_SECTIONS.join(", ")
                    ),
                ));
            }
            if !matches!(o.action, OverrideAction::Append | OverrideAction::Prepend) {
                return Err(bad(
                    &key,
                    "the AHP host only appends or prepends to a section",
                ));
            }
        }
        Ok(())
    }
}

/// A `ws://` URL on a loopback address: the host's connection token rides
/// in its query, so plaintext leaves no machine.
fn check_ws_url(url: &str) -> Result<(), ConfigError> {
    let Some(rest) = url.strip_prefix("ws://") else {
        return Err(bad(
            "runtime.connect",
            format!("{url:?} is not a ws:// URL, e.g. \"ws://127.0.0.1:8765\""),
        ));
    };
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let addr: std::net::SocketAddr = authority.parse().map_err(|_| {
        bad(
            "runtime.connect",
            format!("{authority:?} is not ip:port, e.g. \"ws://127.0.0.1:8765\""),
        )
    })?;
    if !addr.ip().is_loopback() {
        return Err(bad(
            "runtime.connect",
            "a ws:// host must be on loopback: its token travels in plaintext",
        ));
    }
    if rest.contains('?') {
        return Err(bad(
            "runtime.connect",
            "carries no query: put the token in runtime.ahp.connection_token_file",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn check(toml: &str) -> Result<Config, String> {
        let c = Config::parse(toml).map_err(|e| e.0)?;
        c.validate().map_err(|e| e.key)?;
        Ok(c)
    }

    const AHP: &str =
        "[runtime]\nprotocol = \"ahp\"\n[runtime.ahp]\ngithub_token_env = \"GH_TOKEN\"\n";

    #[test]
    fn a_started_host_and_a_connected_one() {
        let c = check(AHP).unwrap();
        assert_eq!(c.runtime.ahp_command(), ["copilot", "--no-auto-update"]);
        let c = check(
            "[runtime]\nprotocol = \"ahp\"\nconnect = \"ws://127.0.0.1:8765\"\n[runtime.ahp]\ngithub_token_file = \"/t\"\nconnection_token_file = \"/c\"\n"
        )
        .unwrap();
        assert_eq!(c.runtime.ahp_url(), Some("ws://127.0.0.1:8765"));
        // The JSON-RPC default is unchanged.
        assert_eq!(
            check("").unwrap().runtime.protocol,
            super::RuntimeProtocol::Jsonrpc
        );
    }

    #[test]
    fn what_the_host_cannot_take_is_refused_by_key() {
        let conn = "[runtime]\nprotocol = \"ahp\"\nconnect = ";
        for (toml, key) in [
            ("[runtime]\nprotocol = \"ahp\"\n", "runtime.ahp"),
            (&format!("{AHP}github_token_file = \"/t\"\n"), "runtime.ahp"),
            ("[runtime.ahp]\ngithub_token_env = \"X\"\n", "runtime.ahp"),
            ("[policy]\nauto_approve_read_only = true\n", "policy.auto_approve_read_only"),
            (&format!("{conn}\"ws://10.0.0.1:1\"\n[runtime.ahp]\ngithub_token_env = \"X\"\n"), "runtime.connect"),
            (&format!("{conn}\"127.0.0.1:1\"\n[runtime.ahp]\ngithub_token_env = \"X\"\n"), "runtime.connect"),
            (&format!("{conn}\"ws://127.0.0.1:1/?tkn=abc\"\n[runtime.ahp]\ngithub_token_env = \"X\"\n"), "runtime.connect"),
            (&format!("{conn}[\"ws://127.0.0.1:1\", \"ws://127.0.0.1:2\"]\n[runtime.ahp]\ngithub_token_env = \"X\"\n"), "runtime.connect"),
            (&format!("{AHP}connection_token_file = \"/c\"\n"), "runtime.ahp.connection_token_file"),
            ("[runtime]\nprotocol = \"ahp\"\ncommand = [\"copilot\", \"--stdio\"]\n[runtime.ahp]\ngithub_token_env = \"X\"\n", "runtime.command"),
            ("[runtime]\nprotocol = \"ahp\"\ncommand = [\"copilot\", \"--listen=1\"]\n[runtime.ahp]\ngithub_token_env = \"X\"\n", "runtime.command"),
            ("[runtime]\nprotocol = \"ahp\"\nprocesses = 2\n[runtime.ahp]\ngithub_token_env = \"X\"\n", "runtime.processes"),
            ("[runtime]\nprotocol = \"ahp\"\nmodels = [\"a\"]\n[runtime.ahp]\ngithub_token_env = \"X\"\n", "runtime.models"),
            (&format!("{AHP}[runtime.provider]\ntype = \"openai\"\nbase_url = \"http://x\"\n"), "runtime.provider"),
            (&format!("{AHP}[policy.overrides.tone]\naction = \"append\"\ncontent = \"x\"\n"), "policy.overrides.tone"),
            (&format!("{AHP}[policy.overrides.custom_instructions]\naction = \"replace\"\ncontent = \"x\"\n"), "policy.overrides.custom_instructions"),
        ] {
            assert_eq!(check(toml).err().as_deref(), Some(key), "{toml}");
        }
        check(&format!(
            "{AHP}[policy.overrides.custom_instructions]\naction = \"append\"\ncontent = \"x\"\n"
        ))
        .unwrap();
    }
}
