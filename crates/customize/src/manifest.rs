//! `plugin.json`, the manifest of a plugin, by layout. Agent Plugins 1.0.0
//! is closed and strict: a field of the wrong type refuses the plugin, an
//! unknown one is reported and ignored. Open Plugins (and the Claude
//! layout) are open: any field may be there, and the component paths
//! (`skills`, `commands`, `agents`, `rules`, `hooks`, `mcpServers`) may move
//! a component away from its default folder.

use serde_json::{Map, Value};

use super::names::{is_plugin_name, is_safe_name, unsafe_name_reason};

/// The `$schema` of an Agent Plugins 1.0.0 manifest (never fetched).
pub(crate) const PLUGIN_SCHEMA_1: &str =
    "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json";
/// The `$schema` of an Agent Plugins 1.0.0 `mcp.json`.
pub(crate) const MCP_SCHEMA_1: &str = "https://agent-plugins.org/schemas/1.0.0/mcp.schema.json";
const AGENT_PLUGINS_SCHEMAS: &str = "https://agent-plugins.org/schemas/";

const AGENT_PLUGINS_FIELDS: [&str; 10] = [
    "$schema",
    "name",
    "version",
    "description",
    "author",
    "homepage",
    "repository",
    "license",
    "keywords",
    "extensions",
];

/// A manifest that can be used, with what was ignored in it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Manifest {
    pub name: String,
    pub version: Option<String>,
    pub description: Option<String>,
    /// Reported and ignored: each makes the package degraded.
    pub warnings: Vec<String>,
    /// The whole object, for the component paths of the open layouts.
    pub fields: Map<String, Value>,
}

/// Why a manifest refuses its plugin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ManifestError(pub String);

/// Which manifest a root `plugin.json` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RootManifest {
    /// It declares the Agent Plugins 1.0.0 `$schema`.
    AgentPlugins1,
    /// No Agent Plugins `$schema`: read like an Open Plugins manifest, as
    /// the runtime does.
    Open,
}

fn object(rel: &str, bytes: &[u8]) -> Result<Map<String, Value>, ManifestError> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ManifestError(format!("{rel}: not a JSON object"))),
        Err(e) => Err(ManifestError(format!("{rel}: not valid JSON: {e}"))),
    }
}

/// What kind of manifest the root `plugin.json` is; an Agent Plugins
/// version this reader does not know refuses the plugin, as the spec says.
pub(crate) fn root_manifest(bytes: &[u8]) -> Result<RootManifest, ManifestError> {
    let map = object("plugin.json", bytes)?;
    match map.get("$schema") {
        Some(Value::String(s)) if s == PLUGIN_SCHEMA_1 => Ok(RootManifest::AgentPlugins1),
        Some(Value::String(s)) if s.starts_with(AGENT_PLUGINS_SCHEMAS) => Err(ManifestError(
            format!("plugin.json: `$schema` {s:?} is an Agent Plugins version this bridge does not read (it reads 1.0.0)"),
        )),
        _ => Ok(RootManifest::Open),
    }
}

/// An Agent Plugins 1.0.0 `plugin.json`.
pub(crate) fn agent_plugins(bytes: &[u8]) -> Result<Manifest, ManifestError> {
    let rel = "plugin.json";
    let fields = object(rel, bytes)?;
    let fail = |m: String| ManifestError(format!("{rel}: {m}"));
    let name = match fields.get("name") {
        Some(Value::String(n)) if is_plugin_name(n) => n.clone(),
        Some(Value::String(n)) => return Err(fail(format!(
            "`name` {n:?} is not a plugin name: 1 to 64 of a-z, 0-9, '.' and '-', starting and ending with a letter or digit, no '--' or '..'"
        ))),
        Some(_) => return Err(fail("`name` is not a string".into())),
        None => return Err(fail("no `name`".into())),
    };
    for key in [
        "version",
        "description",
        "homepage",
        "repository",
        "license",
    ] {
        if fields.get(key).is_some_and(|v| !v.is_string()) {
            return Err(fail(format!("`{key}` is not a string")));
        }
    }
    check_author(fields.get("author")).map_err(|e| fail(e.to_string()))?;
    let keywords_ok = fields
        .get("keywords")
        .is_none_or(|k| k.as_array().is_some_and(|a| a.iter().all(Value::is_string)));
    if !keywords_ok {
        return Err(fail("`keywords` is not a list of strings".into()));
    }
    let mut warnings: Vec<String> = fields
        .keys()
        .filter(|k| !AGENT_PLUGINS_FIELDS.contains(&k.as_str()))
        .map(|k| format!("{rel}: unknown field `{k}` ignored"))
        .collect();
    if fields.get("extensions").is_some_and(|e| !e.is_object()) {
        warnings.push(format!("{rel}: `extensions` is not an object; ignored"));
    }
    Ok(with_texts(name, warnings, fields))
}

/// Why a manifest's `author` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum AuthorFault {
    #[error("`author` is not an object")]
    NotAnObject,
    #[error("`author` has an unknown field `{0}`")]
    UnknownField(String),
    #[error("`author.{0}` is not a string")]
    NotAString(String),
}

fn check_author(author: Option<&Value>) -> Result<(), AuthorFault> {
    let Some(author) = author else { return Ok(()) };
    let Some(map) = author.as_object() else {
        return Err(AuthorFault::NotAnObject);
    };
    for (k, v) in map {
        if !["name", "email", "url"].contains(&k.as_str()) {
            return Err(AuthorFault::UnknownField(k.clone()));
        }
        if !v.is_string() {
            return Err(AuthorFault::NotAString(k.clone()));
        }
    }
    Ok(())
}

/// The manifest of `fields`, its version and description read from them.
fn with_texts(name: String, warnings: Vec<String>, fields: Map<String, Value>) -> Manifest {
    Manifest {
        name,
        version: text(&fields, "version"),
        description: text(&fields, "description"),
        warnings,
        fields,
    }
}

fn text(fields: &Map<String, Value>, key: &str) -> Option<String> {
    fields.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// An Open Plugins (or Claude) `plugin.json` at `rel`.
pub(crate) fn open_plugin(rel: &str, bytes: &[u8]) -> Result<Manifest, ManifestError> {
    let fields = object(rel, bytes)?;
    let name = match fields.get("name") {
        Some(Value::String(n)) if is_safe_name(n) => n.clone(),
        Some(Value::String(n)) => {
            return Err(ManifestError(format!("{rel}: {}", unsafe_name_reason(n))))
        }
        Some(_) => return Err(ManifestError(format!("{rel}: `name` is not a string"))),
        None => return Err(ManifestError(format!("{rel}: no `name`"))),
    };
    let mut warnings = Vec::new();
    if !is_plugin_name(&name) {
        warnings.push(format!(
            "{rel}: the name {name:?} is not a spec plugin name (lowercase letters, digits, '.', '-'); used as is"
        ));
    }
    for key in ["version", "description"] {
        if fields.get(key).is_some_and(|v| !v.is_string()) {
            warnings.push(format!("{rel}: `{key}` is not a string; ignored"));
        }
    }
    Ok(with_texts(name, warnings, fields))
}

/// Where an open layout keeps its MCP servers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum McpDeclared {
    /// `.mcp.json` at the root.
    Default,
    /// The files named in `mcpServers`.
    Files(Vec<String>),
    /// Servers written in the manifest itself.
    Inline(Map<String, Value>),
}

impl Manifest {
    /// The folders a component lives in: the manifest's `field` (a path or
    /// a list of them, each `./`-relative and inside), else `default`. A
    /// bad value is reported and the default used.
    pub(crate) fn component_paths(&mut self, field: &str, default: &str) -> Vec<String> {
        match self.fields.get(field).map(declared_paths) {
            None => vec![default.to_owned()],
            Some(Ok(paths)) => paths,
            Some(Err(e)) => {
                self.warnings
                    .push(format!("manifest `{field}`: {e}; {default} used instead"));
                vec![default.to_owned()]
            }
        }
    }

    /// Where the MCP servers are declared.
    pub(crate) fn mcp_declared(&mut self) -> McpDeclared {
        let Some(value) = self.fields.get("mcpServers").cloned() else {
            return McpDeclared::Default;
        };
        let declared = match value {
            Value::Object(mut map) => match (map.remove("paths"), map.remove("mcpServers")) {
                (Some(paths), _) => declared_paths(&paths).map(McpDeclared::Files),
                (None, Some(Value::Object(inline))) => Ok(McpDeclared::Inline(inline)),
                (None, Some(_)) => Err(DeclaredFault::InlineNotAnObject),
                (None, None) => Ok(McpDeclared::Inline(map)),
            },
            other => declared_paths(&other).map(McpDeclared::Files),
        };
        declared.unwrap_or_else(|e| {
            self.warnings.push(format!(
                "manifest `mcpServers`: {e}; .mcp.json used instead"
            ));
            McpDeclared::Default
        })
    }
}

/// Why a manifest's declared places are not used (the default is, reported).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum DeclaredFault {
    #[error("not a path or a list of paths")]
    NotPaths,
    #[error(transparent)]
    Path(#[from] PathError),
    #[error("`mcpServers.mcpServers` is not an object")]
    InlineNotAnObject,
}

/// A path or list of paths from a manifest, each made package-relative.
fn declared_paths(value: &Value) -> Result<Vec<String>, DeclaredFault> {
    let items: Vec<&Value> = match value {
        Value::Array(items) => items.iter().collect(),
        one => vec![one],
    };
    items
        .into_iter()
        .map(|v| {
            v.as_str()
                .ok_or(DeclaredFault::NotPaths)
                .and_then(|p| Ok(package_path(p)?))
        })
        .collect()
}

/// Why a declared path cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PathError {
    #[error("{0:?} does not start with ./")]
    NotRelative(String),
    #[error("{0:?} leads outside the package")]
    Outside(String),
}

/// `./a/b/` as `a/b`; a path not starting with `./`, or leaving the
/// package, is refused.
pub(crate) fn package_path(declared: &str) -> Result<String, PathError> {
    let rest = declared
        .strip_prefix("./")
        .ok_or_else(|| PathError::NotRelative(declared.to_owned()))?;
    let parts: Vec<&str> = rest
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.contains(&"..") {
        return Err(PathError::Outside(declared.to_owned()));
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
#[path = "manifest_tests.rs"]
mod tests;
