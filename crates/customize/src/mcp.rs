//! MCP servers a package declares: Agent Plugins 1.0.0 `mcp.json` (closed:
//! an unknown field makes that server invalid) or the open layouts'
//! `.mcp.json` and inline `mcpServers` (open: unknown fields are reported
//! and ignored). Each server is a child; one that cannot be used is skipped
//! with its reason, the others still load. Only local (stdio) servers are
//! run; a remote one is listed as not supported.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::children::digest;
use super::manifest::{package_path, PathError, MCP_SCHEMA_1};
use super::names::{is_safe_name, unsafe_name_reason};
use super::{Child, ChildKind, Load, McpServer};

/// Which rules a server declaration is read by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    AgentPlugins1,
    Open,
}

const STDIO_FIELDS: [&str; 5] = ["type", "command", "args", "env", "cwd"];
/// Fields the runtime reads that change nothing the bridge decides.
const TOLERATED_FIELDS: [&str; 4] = ["tools", "timeout", "displayName", "description"];
const REMOTE_TYPES: [&str; 4] = ["streamable-http", "sse", "http", "remote"];

/// What one declaration of servers holds.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Declared {
    pub children: Vec<Child>,
    pub servers: Vec<McpServer>,
    /// About the file as a whole; each makes the package degraded.
    pub warnings: Vec<String>,
}

/// The servers of the file at `rel`.
pub(crate) fn mcp_file(dialect: Dialect, rel: &str, bytes: &[u8]) -> Declared {
    let mut out = Declared::default();
    let map = match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => map,
        Ok(_) => {
            return warned(
                out,
                format!("{rel}: not a JSON object; no MCP servers read"),
            )
        }
        Err(e) => {
            return warned(
                out,
                format!("{rel}: not valid JSON: {e}; no MCP servers read"),
            )
        }
    };
    if dialect == Dialect::AgentPlugins1 {
        let schema = map.get("$schema").and_then(Value::as_str);
        if schema != Some(MCP_SCHEMA_1) {
            return warned(out, format!(
                "{rel}: `$schema` is {schema:?}, not plugin.json's version ({MCP_SCHEMA_1}); MCP servers disabled"
            ));
        }
        for key in map.keys().filter(|k| *k != "$schema" && *k != "mcpServers") {
            out.warnings
                .push(format!("{rel}: unknown field `{key}` ignored"));
        }
    }
    match map.get("mcpServers") {
        Some(Value::Object(servers)) => {
            let declared = mcp_servers(dialect, rel, &digest(bytes), servers);
            out.warnings.extend(declared.warnings);
            out.children = declared.children;
            out.servers = declared.servers;
            out
        }
        Some(_) => warned(out, format!("{rel}: `mcpServers` is not an object")),
        None => warned(out, format!("{rel}: no `mcpServers`")),
    }
}

fn warned(mut out: Declared, warning: String) -> Declared {
    out.warnings.push(warning);
    out
}

/// The servers of a `mcpServers` object found in `rel` (a file whose
/// digest is `sha256`, or the manifest for inline servers).
pub(crate) fn mcp_servers(
    dialect: Dialect,
    rel: &str,
    sha256: &str,
    servers: &Map<String, Value>,
) -> Declared {
    let mut out = Declared::default();
    for (name, decl) in servers {
        let mut child = Child::new(ChildKind::McpServer, name, rel, sha256);
        match server(dialect, name, decl) {
            Ok((server, warnings)) => {
                if !warnings.is_empty() {
                    child.load = Load::Degraded(warnings.join("; "));
                }
                out.servers.push(McpServer {
                    rel_path: rel.to_owned(),
                    ..server
                });
            }
            Err(e) => child.load = Load::Error(e.to_string()),
        }
        out.children.push(child);
    }
    out
}

/// Why a declared server cannot be used: its load status says it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum McpFault {
    #[error("{}", unsafe_name_reason(.0))]
    UnsafeName(String),
    #[error("not a JSON object")]
    NotAnObject,
    #[error("a remote server (type {0:?}); this bridge runs local (stdio) servers only")]
    Remote(String),
    #[error("unknown type {0:?}")]
    UnknownType(String),
    #[error("`type` is {0}, not a string")]
    TypeNotAString(Value),
    #[error("unknown field `{0}`")]
    UnknownField(String),
    #[error("`command` is not a non-empty string")]
    CommandNotAString,
    #[error("no `command`")]
    NoCommand,
    #[error("`{0}` is not a list of strings")]
    NotStrings(&'static str),
    #[error("`env` is not an object")]
    EnvNotAnObject,
    #[error("`env.{0}` is not a string")]
    EnvValueNotAString(String),
    #[error("`cwd` is not a string")]
    CwdNotAString,
    #[error("`command`: {0}")]
    CommandPath(#[source] PathError),
    #[error("`cwd`: {0}")]
    CwdPath(#[source] PathError),
    #[error("`cwd`: {0:?} is not ./-relative, ${{PLUGIN_ROOT}} or ${{PLUGIN_DATA}}")]
    CwdNotRelative(String),
    #[error("`command` is one program, not a command line; put arguments in `args`")]
    CommandLine,
    #[error("`command` is a bare program name or ./-relative to the plugin")]
    CommandElsewhere,
    #[error("`env` may not set {0}: the client sets it")]
    EnvSetsPluginVariable(String),
}

/// One server, with what was ignored in it, or why it cannot be used.
fn server(
    dialect: Dialect,
    name: &str,
    decl: &Value,
) -> Result<(McpServer, Vec<String>), McpFault> {
    if !is_safe_name(name) {
        return Err(McpFault::UnsafeName(name.to_owned()));
    }
    let map = decl.as_object().ok_or(McpFault::NotAnObject)?;
    check_type(dialect, map.get("type"))?;
    let warnings = unknown_fields(dialect, map)?;
    let command = match map.get("command") {
        Some(Value::String(c)) if !c.trim().is_empty() => c.clone(),
        Some(_) => return Err(McpFault::CommandNotAString),
        None => return Err(McpFault::NoCommand),
    };
    let server = McpServer {
        name: name.to_owned(),
        command,
        args: strings(map.get("args"), "args")?,
        env: env(map.get("env"))?,
        cwd: match map.get("cwd") {
            None => None,
            Some(Value::String(c)) => Some(c.clone()),
            Some(_) => return Err(McpFault::CwdNotAString),
        },
        rel_path: String::new(),
    };
    check_paths(dialect, &server)?;
    Ok((server, warnings))
}

fn check_type(dialect: Dialect, kind: Option<&Value>) -> Result<(), McpFault> {
    match kind.map(|k| (k, k.as_str())) {
        None | Some((_, Some("stdio"))) => Ok(()),
        Some((_, Some("local"))) if dialect == Dialect::Open => Ok(()),
        Some((_, Some(t))) if REMOTE_TYPES.contains(&t) => Err(McpFault::Remote(t.to_owned())),
        Some((_, Some(t))) => Err(McpFault::UnknownType(t.to_owned())),
        Some((k, None)) => Err(McpFault::TypeNotAString(k.clone())),
    }
}

/// Fields neither of a local server nor tolerated: an Agent Plugins server
/// with one is invalid (the spec's variants are closed); an open one
/// ignores them, reported.
fn unknown_fields(dialect: Dialect, map: &Map<String, Value>) -> Result<Vec<String>, McpFault> {
    let unknown: Vec<&String> = map
        .keys()
        .filter(|k| !STDIO_FIELDS.contains(&k.as_str()))
        .filter(|k| dialect == Dialect::AgentPlugins1 || !TOLERATED_FIELDS.contains(&k.as_str()))
        .collect();
    match (dialect, unknown.first()) {
        (_, None) => Ok(Vec::new()),
        (Dialect::AgentPlugins1, Some(k)) => Err(McpFault::UnknownField((*k).clone())),
        (Dialect::Open, Some(_)) => Ok(unknown
            .iter()
            .map(|k| format!("unknown field `{k}` ignored"))
            .collect()),
    }
}

fn strings(value: Option<&Value>, field: &'static str) -> Result<Vec<String>, McpFault> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    value
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .map(|i| i.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
        })
        .ok_or(McpFault::NotStrings(field))
}

fn env(value: Option<&Value>) -> Result<BTreeMap<String, String>, McpFault> {
    let Some(value) = value else {
        return Ok(BTreeMap::new());
    };
    let map = value.as_object().ok_or(McpFault::EnvNotAnObject)?;
    map.iter()
        .map(|(k, v)| match v.as_str() {
            Some(v) => Ok((k.clone(), v.to_owned())),
            None => Err(McpFault::EnvValueNotAString(k.clone())),
        })
        .collect()
}

/// The variables a package's server may name in its paths.
pub(crate) const PLUGIN_ROOT: &str = "${PLUGIN_ROOT}";
pub(crate) const PLUGIN_DATA: &str = "${PLUGIN_DATA}";

/// A command and working directory that stay inside the package (or its
/// data folder); Agent Plugins allows nothing else.
fn check_paths(dialect: Dialect, s: &McpServer) -> Result<(), McpFault> {
    if s.command.starts_with("./") {
        package_path(&s.command).map_err(McpFault::CommandPath)?;
    }
    if let Some(cwd) = &s.cwd {
        check_cwd(dialect, cwd)?;
    }
    if dialect == Dialect::Open {
        return Ok(());
    }
    if s.command.contains(char::is_whitespace) {
        return Err(McpFault::CommandLine);
    }
    if !s.command.starts_with("./") && s.command.contains('/') {
        return Err(McpFault::CommandElsewhere);
    }
    if let Some(k) = s
        .env
        .keys()
        .find(|k| *k == "PLUGIN_ROOT" || *k == "PLUGIN_DATA")
    {
        return Err(McpFault::EnvSetsPluginVariable(k.clone()));
    }
    Ok(())
}

fn check_cwd(dialect: Dialect, cwd: &str) -> Result<(), McpFault> {
    let under_variable = [PLUGIN_ROOT, PLUGIN_DATA]
        .iter()
        .find_map(|v| cwd.strip_prefix(v))
        .filter(|rest| rest.is_empty() || rest.starts_with('/'));
    let relative = |rest: &str| {
        package_path(&format!("./{}", rest.trim_start_matches("./")))
            .map(|_| ())
            .map_err(McpFault::CwdPath)
    };
    match under_variable {
        Some(rest) => relative(rest.trim_start_matches('/')),
        None if cwd.starts_with('/') && dialect == Dialect::Open => Ok(()),
        None if cwd.starts_with("./") || dialect == Dialect::Open => relative(cwd),
        None => Err(McpFault::CwdNotRelative(cwd.to_owned())),
    }
}

#[cfg(test)]
#[path = "mcp_tests.rs"]
mod tests;
