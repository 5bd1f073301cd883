//! A vetted package written out in the shapes the runtime reads: a skills
//! folder (`<name>/SKILL.md` and the skill's other files), an instructions
//! folder (`<name>.instructions.md` with `applyTo`), custom agents as values,
//! and MCP servers with their paths resolved against a copy of the package.
//!
//! What the runtime reads is regenerated from the parsed values (quoted),
//! never the original frontmatter: what reaches the model is what was
//! vetted, whatever a YAML parser would make of the original. Commands and
//! prompts become skills (the runtime's slash commands are skills); a prompt
//! is for users, so it is not offered to the model unless it says so.
//!
//! Blocking filesystem work: the caller runs it off the async threads.

use std::collections::BTreeMap;
use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::mcp::{PLUGIN_DATA, PLUGIN_ROOT};
use super::names::{is_safe_file_name, is_safe_name};
use super::{Child, ChildKind, Load, McpServer, Package};

/// A custom agent, as the runtime's `customAgents` takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSpec {
    pub name: String,
    pub display_name: String,
    pub description: String,
    /// Its instructions: the agent file's body.
    pub prompt: String,
    pub tools: Option<Vec<String>>,
    pub model: Option<String>,
    pub disable_model_invocation: Option<bool>,
}

/// A local MCP server, as the runtime's `mcpServers` takes it, every path
/// resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpSpec {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    /// The package's `env`, with `PLUGIN_ROOT` and `PLUGIN_DATA` set.
    pub env: BTreeMap<String, String>,
    pub cwd: PathBuf,
}

/// What was written, for the runtime's session options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Materialized {
    /// `dest/skills`, for `skillDirectories`, when there are skills.
    pub skills_dir: Option<PathBuf>,
    /// `dest/instructions`, for `instructionDirectories`, when there are rules.
    pub instructions_dir: Option<PathBuf>,
    pub agents: Vec<AgentSpec>,
    pub mcp_servers: Vec<McpSpec>,
    /// `dest/root`: the whole package (its `PLUGIN_ROOT`), written only
    /// when it has MCP servers to run from it.
    pub package_root: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum MaterializeError {
    #[error("the package is not usable: {0}")]
    Refused(String),
    #[error("{0}: not an empty folder")]
    NotEmpty(PathBuf),
    #[error("{0:?}: not safe as a file name")]
    UnsafeName(String),
    #[error("{0}: its bytes were not read with the package")]
    Missing(String),
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> MaterializeError + '_ {
    move |source| MaterializeError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Every usable child of `pkg` written under `dest` (absent or empty).
pub fn materialize(pkg: &Package, dest: &Path) -> Result<Materialized, MaterializeError> {
    materialize_only(pkg, dest, |_| true)
}

/// The usable children of `pkg` that `keep` accepts (the enabled ones,
/// say) written under `dest`.
pub fn materialize_only(
    pkg: &Package,
    dest: &Path,
    keep: impl Fn(&Child) -> bool,
) -> Result<Materialized, MaterializeError> {
    if let Load::Error(why) = &pkg.load {
        return Err(MaterializeError::Refused(why.clone()));
    }
    if let Some(f) = pkg
        .files
        .iter()
        .find(|f| !pkg.contents.contains_key(&f.rel_path))
    {
        return Err(MaterializeError::Missing(f.rel_path.clone()));
    }
    empty_folder(dest)?;
    let kept: Vec<&Child> = pkg
        .children
        .iter()
        .filter(|c| c.load.usable() && keep(c))
        .collect();
    let mut out = Materialized::default();
    for child in &kept {
        match child.kind {
            ChildKind::Skill | ChildKind::Prompt => {
                let dir = dest.join("skills");
                write_skill(pkg, child, &dir)?;
                out.skills_dir = Some(dir);
            }
            ChildKind::Rule => {
                let dir = dest.join("instructions");
                write_rule(child, &dir)?;
                out.instructions_dir = Some(dir);
            }
            ChildKind::Agent => out.agents.push(agent(child)),
            ChildKind::Hook | ChildKind::McpServer => {}
        }
    }
    let servers: Vec<&McpServer> = pkg
        .mcp_servers
        .iter()
        .filter(|s| kept.iter().any(|c| is_child_of(c, s)))
        .collect();
    if !servers.is_empty() {
        let (root, data) = (dest.join("root"), dest.join("data"));
        write_package(pkg, &root)?;
        make_dir(&data)?;
        for server in servers {
            out.mcp_servers.push(mcp_spec(server, &root, &data)?);
        }
        out.package_root = Some(root);
    }
    Ok(out)
}

fn is_child_of(child: &Child, server: &McpServer) -> bool {
    child.kind == ChildKind::McpServer
        && child.name == server.name
        && child.rel_path == server.rel_path
}

fn empty_folder(dest: &Path) -> Result<(), MaterializeError> {
    match fs::read_dir(dest).map(|mut entries| entries.next().is_none()) {
        Ok(true) => Ok(()),
        Ok(false) => Err(MaterializeError::NotEmpty(dest.to_owned())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => make_dir(dest),
        Err(e) => Err(io_at(dest)(e)),
    }
}

/// A folder only this user may read: what is written may be a client's.
fn make_dir(dir: &Path) -> Result<(), MaterializeError> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io_at(dir))
}

/// A new file (never one already there, never through a symlink).
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), MaterializeError> {
    if let Some(dir) = path.parent() {
        make_dir(dir)?;
    }
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io_at(path))?;
    file.write_all(bytes).map_err(io_at(path))
}

/// `rel` (a package path) under `base`, each component checked again.
fn under(base: &Path, rel: &str) -> Result<PathBuf, MaterializeError> {
    let mut path = base.to_owned();
    for part in rel.split('/') {
        if !is_safe_file_name(part) {
            return Err(MaterializeError::UnsafeName(rel.to_owned()));
        }
        path.push(part);
    }
    Ok(path)
}

fn named(base: &Path, name: &str) -> Result<PathBuf, MaterializeError> {
    if !is_safe_name(name) {
        return Err(MaterializeError::UnsafeName(name.to_owned()));
    }
    Ok(base.join(name))
}

/// `skills/<name>/SKILL.md`, regenerated, and for a skill folder its other
/// files as read.
fn write_skill(pkg: &Package, child: &Child, skills: &Path) -> Result<(), MaterializeError> {
    let dir = named(skills, &child.name)?;
    if let Some(folder) = child.rel_path.strip_suffix("/SKILL.md") {
        let prefix = format!("{folder}/");
        for (rel, bytes) in pkg.contents.range(prefix.clone()..) {
            let Some(inner) = rel.strip_prefix(&prefix) else {
                break;
            };
            if inner != "SKILL.md" {
                write_new(&under(&dir, inner)?, bytes)?;
            }
        }
    }
    write_new(&dir.join("SKILL.md"), skill_md(child).as_bytes())
}

fn skill_md(child: &Child) -> String {
    let description = child.description.as_deref().unwrap_or(&child.name);
    let mut head = format!(
        "name: {}\ndescription: {}\n",
        quote(&child.name),
        quote(description)
    );
    let for_users_only = child.kind == ChildKind::Prompt;
    if child.disable_model_invocation.unwrap_or(for_users_only) {
        head.push_str("disable-model-invocation: true\n");
    }
    if child.disable_user_invocation == Some(true) {
        head.push_str("user-invocable: false\n");
    }
    format!("---\n{head}---\n{}", child.body)
}

/// `instructions/<name>.instructions.md`: the runtime reads `applyTo`; a
/// rule that always applies, or names no files, applies to all (`**`).
fn write_rule(child: &Child, dir: &Path) -> Result<(), MaterializeError> {
    let globs = child.globs.as_deref().unwrap_or_default();
    let apply_to = if child.always_apply == Some(true) || globs.is_empty() {
        "**".to_owned()
    } else {
        globs.join(", ")
    };
    let text = format!("---\napplyTo: {}\n---\n{}", quote(&apply_to), child.body);
    named(dir, &child.name)?;
    let path = dir.join(format!("{}.instructions.md", child.name));
    write_new(&path, text.as_bytes())
}

fn agent(child: &Child) -> AgentSpec {
    AgentSpec {
        name: child.name.clone(),
        display_name: child.name.clone(),
        description: child.description.clone().unwrap_or_default(),
        prompt: child.body.clone(),
        tools: child.tools.clone(),
        model: child.model.clone(),
        disable_model_invocation: child.disable_model_invocation,
    }
}

/// A YAML double-quoted scalar: nothing in it can end the value early.
pub(crate) fn quote(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Every file of the package under `root`, for its servers to run from.
fn write_package(pkg: &Package, root: &Path) -> Result<(), MaterializeError> {
    make_dir(root)?;
    for (rel, bytes) in &pkg.contents {
        write_new(&under(root, rel)?, bytes)?;
    }
    Ok(())
}

fn mcp_spec(server: &McpServer, root: &Path, data: &Path) -> Result<McpSpec, MaterializeError> {
    let (root_s, data_s) = (root.to_string_lossy(), data.to_string_lossy());
    let expand = |text: &str| expand(text, &root_s, &data_s);
    let command = match server.command.strip_prefix("./") {
        Some(rel) => {
            let path = under(root, rel.trim_end_matches('/'))?;
            // Sources carry no file modes: the declared program is made runnable.
            fs::set_permissions(&path, fs::Permissions::from_mode(0o700)).map_err(io_at(&path))?;
            path.to_string_lossy().into_owned()
        }
        None => expand(&server.command),
    };
    let cwd = match server.cwd.as_deref().map(expand) {
        None => root.to_owned(),
        Some(c) if Path::new(&c).is_absolute() => PathBuf::from(c),
        Some(c) => root.join(c.trim_start_matches("./")),
    };
    let mut env: BTreeMap<String, String> = server
        .env
        .iter()
        .map(|(k, v)| (k.clone(), expand(v)))
        .collect();
    env.insert("PLUGIN_ROOT".into(), root_s.clone().into_owned());
    env.insert("PLUGIN_DATA".into(), data_s.clone().into_owned());
    Ok(McpSpec {
        name: server.name.clone(),
        command,
        args: server.args.iter().map(|a| expand(a)).collect(),
        env,
        cwd,
    })
}

/// `${PLUGIN_ROOT}` and `${PLUGIN_DATA}` replaced, in one pass (what they
/// expand to is not expanded again).
fn expand(text: &str, root: &str, data: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    loop {
        let next = [(PLUGIN_ROOT, root), (PLUGIN_DATA, data)]
            .into_iter()
            .filter_map(|(var, value)| rest.find(var).map(|at| (at, var, value)))
            .min_by_key(|(at, _, _)| *at);
        let Some((at, var, value)) = next else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..at]);
        out.push_str(value);
        rest = &rest[at + var.len()..];
    }
}

#[cfg(test)]
#[path = "materialize_tests.rs"]
mod tests;
