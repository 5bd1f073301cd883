//! Customization packages (plugins and directories of skills, agents,
//! prompts, rules), read from a [`PackageSource`], parsed and vetted into a
//! [`Package`], and materialized on disk in the shapes the runtime reads.
//!
//! Pure: no AHP types and nothing of the runtime's wire. The bridge maps a
//! [`Package`] to AHP customizations and a [`Materialized`] to the runtime's
//! session options; this layer only says what a package holds and whether
//! each part of it can be used.
//!
//! The parts:
//! - `source.rs`: where files come from ([`PackageSource`], [`MemorySource`]);
//! - `disk.rs`: [`DiskSource`], confined to its root;
//! - `walk.rs`: reading a whole package within [`Bounds`];
//! - `frontmatter.rs`, `yaml.rs`: the frontmatter of Markdown files, in the
//!   YAML subset these files use;
//! - `names.rs`: which names are safe (path components, the spec's names);
//! - `manifest.rs`: `plugin.json` of each layout;
//! - `mcp.rs`: `mcp.json` / `.mcp.json`;
//! - `children.rs`: one Markdown file to one [`Child`];
//! - `layouts.rs`: where each layout keeps its children;
//! - `package.rs`: [`read_package`], [`read_directory`];
//! - `materialize.rs`: [`materialize`].

use std::collections::BTreeMap;
use std::fmt;

mod children;
mod disk;
mod frontmatter;
mod layouts;
mod manifest;
mod materialize;
mod mcp;
mod names;
mod package;
mod package_source;
mod walk;
mod yaml;

pub use disk::DiskSource;
pub use materialize::{
    materialize, materialize_only, AgentSpec, MaterializeError, Materialized, McpSpec,
};
pub use names::{is_plugin_name, is_safe_name};
pub use package::{read_directory, read_package};
pub use package_source::{
    BoxFuture, EntryKind, MemorySource, PackageSource, SourceEntry, SourceError,
};

/// What a child customization is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChildKind {
    Skill,
    Agent,
    Prompt,
    Rule,
    Hook,
    McpServer,
}

impl ChildKind {
    /// The name AHP gives the kind (`CustomizationType`), for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            ChildKind::Skill => "skill",
            ChildKind::Agent => "agent",
            ChildKind::Prompt => "prompt",
            ChildKind::Rule => "rule",
            ChildKind::Hook => "hook",
            ChildKind::McpServer => "mcpServer",
        }
    }
}

impl fmt::Display for ChildKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A container's or a child's state. The messages are for an operator or a
/// user: they name the file and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Load {
    /// Read whole and usable.
    Loaded,
    /// Usable, with something left out or assumed; the message says what.
    Degraded(String),
    /// Not usable; the message says why.
    Error(String),
}

impl Load {
    /// Whether the thing may be used (loaded or degraded).
    pub fn usable(&self) -> bool {
        !matches!(self, Load::Error(_))
    }
}

/// One customization inside a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Child {
    pub kind: ChildKind,
    /// Skill: frontmatter `name` (the folder's when absent); agent:
    /// frontmatter `name` or the file's stem; rule, prompt, command: the
    /// file's stem; MCP server: its key.
    pub name: String,
    /// The file it comes from, inside the package, `/`-separated.
    pub rel_path: String,
    pub description: Option<String>,
    pub disable_model_invocation: Option<bool>,
    /// From `user-invocable: false`.
    pub disable_user_invocation: Option<bool>,
    /// Rules: `.mdc` `alwaysApply`.
    pub always_apply: Option<bool>,
    /// Rules: `.mdc` `globs`, `*.instructions.md` `applyTo` (comma-split).
    pub globs: Option<Vec<String>>,
    /// Agents: the model to use; absent, the session's.
    pub model: Option<String>,
    /// Agents: the tools it may use; absent, all.
    pub tools: Option<Vec<String>>,
    /// What reaches the model: the file without its frontmatter (empty for
    /// MCP servers and hooks).
    pub body: String,
    /// Hex SHA-256 of the whole file as read (what the audit names).
    pub sha256: String,
    pub load: Load,
}

impl Child {
    /// A child of `kind` with nothing but its name and file filled in.
    pub(crate) fn new(kind: ChildKind, name: &str, rel_path: &str, sha256: &str) -> Self {
        Self {
            kind,
            name: name.to_owned(),
            rel_path: rel_path.to_owned(),
            description: None,
            disable_model_invocation: None,
            disable_user_invocation: None,
            always_apply: None,
            globs: None,
            model: None,
            tools: None,
            body: String::new(),
            sha256: sha256.to_owned(),
            load: Load::Loaded,
        }
    }
}

/// A local (stdio) MCP server a package declares, as written (paths are
/// resolved by [`materialize`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
    /// `mcp.json` or `.mcp.json` (or the manifest, for inline servers).
    pub rel_path: String,
}

/// Where a container keeps its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Agent Plugins 1.0.0: `plugin.json` at the root with its `$schema`,
    /// `skills/<name>/SKILL.md`, `mcp.json`.
    AgentPlugins1,
    /// Open Plugins 1.0.0: `.plugin/plugin.json`, `skills/`, `commands/`,
    /// `agents/`, `rules/`, `hooks/hooks.json`, `.mcp.json`.
    OpenPlugin,
    /// The same layout under `.claude-plugin/plugin.json`.
    ClaudePlugin,
    /// A directory holding customizations of one kind.
    Directory(ChildKind),
    /// Not known: the package was refused before its manifest was read
    /// (over a bound, no manifest, a manifest that is not JSON).
    Unknown,
}

/// One file read from a package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageFile {
    pub rel_path: String,
    pub size: u64,
    /// Hex SHA-256 of its bytes.
    pub sha256: String,
}

/// One container, read, parsed and vetted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    /// The manifest's `name`; empty for a directory container (its caller
    /// names it).
    pub name: String,
    pub version: Option<String>,
    pub description: Option<String>,
    pub layout: Layout,
    /// Every child found, usable or not (each says which in its `load`).
    pub children: Vec<Child>,
    /// The usable MCP servers (their children are in `children` too).
    pub mcp_servers: Vec<McpServer>,
    /// Every file read, by path.
    pub files: Vec<PackageFile>,
    /// The bytes of every file read, by path: what [`materialize`] writes,
    /// so it needs no second read. Take it out once materialized.
    pub contents: BTreeMap<String, Vec<u8>>,
    /// Loaded; Degraded (a summary of what was left out); Error (then
    /// `children` and `mcp_servers` are empty).
    pub load: Load,
}

/// How much of a package is read at most. A package over any of them is
/// refused whole, with the field's name in the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The most entries (files and folders) a package may hold.
    pub max_files: usize,
    /// The most bytes of all its files together.
    pub max_bytes: u64,
    /// The most bytes of one file.
    pub max_file_bytes: u64,
    /// The most folders deep a file may lie (a file at the root is at 0).
    pub max_depth: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            max_files: 1000,
            max_bytes: 8 * 1024 * 1024,
            max_file_bytes: 1024 * 1024,
            max_depth: 8,
        }
    }
}
