//! `[customizations]`: the containers the host provides to every session
//! (directories of one kind, plugin packages on disk, MCP servers it
//! starts), and `[policy.customizations]`: what clients may publish.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::{bad, ConfigError};

/// What a directory container holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Contents {
    Skill,
    Agent,
    Prompt,
    Rule,
}

/// `[[customizations.directories]]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirectoryConfig {
    pub path: PathBuf,
    pub contents: Contents,
    /// Shown to clients; default: the directory's own name.
    pub name: Option<String>,
}

/// `[[customizations.plugins]]`: an Agent Plugins (or Open Plugins) package.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginConfig {
    pub path: PathBuf,
}

/// `[customizations.mcp_servers.NAME]`: a stdio MCP server the runtime
/// starts for each session. Clients see its name and state, never this.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub cwd: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CustomizationsConfig {
    pub directories: Vec<DirectoryConfig>,
    pub plugins: Vec<PluginConfig>,
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
}

/// May clients publish plugins at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ClientPlugins {
    /// Principals with the `customize` role may publish plugins.
    #[default]
    Allow,
    /// Nobody may: every client plugin is refused.
    Deny,
}

/// Which MCP servers a client plugin may bring: none, or those whose
/// `command` is on the list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ClientMcpServers {
    #[default]
    Deny,
    Allow(Vec<String>),
}

impl<'de> Deserialize<'de> for ClientMcpServers {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Word(String),
            List(Vec<String>),
        }
        match Raw::deserialize(d)? {
            Raw::Word(w) if w == "deny" => Ok(Self::Deny),
            Raw::Word(w) => Err(serde::de::Error::custom(format!(
                "{w:?}: expected \"deny\" or a list of allowed commands"
            ))),
            Raw::List(commands) => Ok(Self::Allow(commands)),
        }
    }
}

/// `[policy.customizations]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CustomizationPolicy {
    pub client_plugins: ClientPlugins,
    pub client_mcp_servers: ClientMcpServers,
    /// The most bytes of one client plugin, all its files together.
    pub max_plugin_bytes: u64,
    /// The most files of one plugin (a client's or the host's).
    pub max_plugin_files: usize,
}

impl Default for CustomizationPolicy {
    fn default() -> Self {
        Self {
            client_plugins: ClientPlugins::Allow,
            client_mcp_servers: ClientMcpServers::Deny,
            max_plugin_bytes: 4 * 1024 * 1024,
            max_plugin_files: 500,
        }
    }
}

impl CustomizationPolicy {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_plugin_bytes == 0 {
            return Err(bad(
                "policy.customizations.max_plugin_bytes",
                "must be more than 0",
            ));
        }
        if self.max_plugin_files == 0 {
            return Err(bad(
                "policy.customizations.max_plugin_files",
                "must be more than 0",
            ));
        }
        if let ClientMcpServers::Allow(list) = &self.client_mcp_servers {
            if let Some(i) = list.iter().position(|c| c.trim().is_empty()) {
                return Err(bad(
                    &format!("policy.customizations.client_mcp_servers[{i}]"),
                    "must not be empty",
                ));
            }
        }
        Ok(())
    }
}

/// A safe container or server name: shown to clients, used in paths.
fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.')
}

impl CustomizationsConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (i, d) in self.directories.iter().enumerate() {
            if !d.path.is_absolute() {
                return Err(bad(
                    &format!("customizations.directories[{i}].path"),
                    "must be an absolute path",
                ));
            }
        }
        for (i, p) in self.plugins.iter().enumerate() {
            if !p.path.is_absolute() {
                return Err(bad(
                    &format!("customizations.plugins[{i}].path"),
                    "must be an absolute path",
                ));
            }
        }
        for (name, s) in &self.mcp_servers {
            let key = format!("customizations.mcp_servers.{name}");
            if !plain_name(name) {
                return Err(bad(
                    &key,
                    "the name must be 1 to 64 letters, digits, `-`, `_` or `.`",
                ));
            }
            if s.command.trim().is_empty() {
                return Err(bad(&format!("{key}.command"), "must not be empty"));
            }
        }
        Ok(())
    }
}

/// One container the host provides, as every session gets it: a stable
/// id (the same in every session and across restarts), a name, and where
/// it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostContainer {
    pub id: String,
    pub name: String,
    pub source: HostSource,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostSource {
    Directory {
        path: PathBuf,
        contents: Contents,
    },
    Plugin {
        path: PathBuf,
    },
    McpServer {
        name: String,
        server: McpServerConfig,
    },
}

/// The last component of `path`, for a name.
fn base_name(path: &std::path::Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

impl CustomizationsConfig {
    /// Every configured container, in config order: directories, plugins,
    /// MCP servers.
    pub fn containers(&self) -> Vec<HostContainer> {
        let dirs = self
            .directories
            .iter()
            .enumerate()
            .map(|(i, d)| HostContainer {
                id: format!("host-dir-{i}"),
                name: d.name.clone().unwrap_or_else(|| base_name(&d.path)),
                source: HostSource::Directory {
                    path: d.path.clone(),
                    contents: d.contents,
                },
            });
        let plugins = self.plugins.iter().enumerate().map(|(i, p)| HostContainer {
            id: format!("host-plugin-{i}"),
            name: base_name(&p.path),
            source: HostSource::Plugin {
                path: p.path.clone(),
            },
        });
        let servers = self.mcp_servers.iter().map(|(name, s)| HostContainer {
            id: format!("host-mcp-{name}"),
            name: name.clone(),
            source: HostSource::McpServer {
                name: name.clone(),
                server: s.clone(),
            },
        });
        dirs.chain(plugins).chain(servers).collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    use super::*;

    #[test]
    fn containers_and_the_policy_parse_and_bad_keys_are_named() {
        let c = Config::parse(
            "[[customizations.directories]]\npath = \"/srv/skills\"\ncontents = \"skill\"\n\
             [[customizations.plugins]]\npath = \"/srv/plug\"\n\
             [customizations.mcp_servers.echo]\ncommand = \"python3\"\nargs = [\"e.py\"]\n\
             [policy.customizations]\nclient_mcp_servers = [\"python3\"]\n",
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.customizations.directories[0].contents, Contents::Skill);
        assert_eq!(c.customizations.mcp_servers["echo"].args, ["e.py"]);
        assert_eq!(
            c.policy.customizations.client_mcp_servers,
            ClientMcpServers::Allow(vec!["python3".into()])
        );
        assert_eq!(
            Config::parse("")
                .unwrap()
                .policy
                .customizations
                .client_mcp_servers,
            ClientMcpServers::Deny
        );
        let e =
            Config::parse("[[customizations.directories]]\npath = \"rel\"\ncontents = \"rule\"\n")
                .unwrap()
                .validate()
                .unwrap_err();
        assert_eq!(e.key, "customizations.directories[0].path");
        assert!(Config::parse(
            "[[customizations.directories]]\npath = \"/x\"\ncontents = \"hook\"\n"
        )
        .is_err());
        assert!(
            Config::parse("[policy.customizations]\nclient_mcp_servers = \"maybe\"\n").is_err()
        );
        let e = Config::parse("[customizations.mcp_servers.\"a b\"]\ncommand = \"x\"\n")
            .unwrap()
            .validate()
            .unwrap_err();
        assert_eq!(e.key, "customizations.mcp_servers.a b");
    }
}
