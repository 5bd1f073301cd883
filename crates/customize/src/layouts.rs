//! Where each layout keeps its children, found in a walked [`Tree`]. An
//! entry that could not be read (a symlink leading outside, say) fails the
//! narrowest thing it belongs to: the skill whose folder holds it, or the
//! child it would have been; the package only when it belongs to nothing.

use std::collections::BTreeSet;

use super::children::{digest, hooks_child, markdown_child, FileRole};
use super::manifest::{Manifest, McpDeclared};
use super::mcp::{mcp_file, mcp_servers, Declared, Dialect};
use super::walk::{join, Tree};
use super::{Child, ChildKind, Load, McpServer};

/// The extension folder of the runtime's own components in an Agent
/// Plugins package (agents and commands have no place in the spec itself).
const COPILOT_EXTENSION: &str = "com.github.copilot";
const NOT_AGENT_PLUGINS: [&str; 4] = ["agents", "commands", "rules", "hooks"];

/// What a layout found.
#[derive(Debug, Default)]
pub(crate) struct LayoutFound {
    pub children: Vec<Child>,
    pub servers: Vec<McpServer>,
    /// About the package as a whole; each makes it degraded.
    pub warnings: Vec<String>,
    /// Unreadable entries already reported by a child.
    pub claimed: BTreeSet<String>,
}

impl LayoutFound {
    fn add_declared(&mut self, declared: Declared) {
        self.children.extend(declared.children);
        self.servers.extend(declared.servers);
        self.warnings.extend(declared.warnings);
    }
}

/// Agent Plugins 1.0.0: `skills/`, `mcp.json`, and the runtime's extension
/// folder; the open layouts' folders at the root are reported, not read.
pub(crate) fn agent_plugins(tree: &Tree) -> LayoutFound {
    let mut found = LayoutFound::default();
    skills_in(tree, "skills", &mut found);
    let ext_agents = join(COPILOT_EXTENSION, "agents");
    let ext_commands = join(COPILOT_EXTENSION, "commands");
    files_in(tree, &ext_agents, FileRole::Agent, &mut found);
    files_in(tree, &ext_commands, FileRole::Command, &mut found);
    mcp_files(
        tree,
        Dialect::AgentPlugins1,
        &["mcp.json"],
        false,
        &mut found,
    );
    let ignored: Vec<String> = NOT_AGENT_PLUGINS
        .iter()
        .filter(|d| tree.dirs.contains(**d))
        .map(|d| format!("{d}/"))
        .collect();
    if !ignored.is_empty() {
        found.warnings.push(format!(
            "{}: not part of Agent Plugins 1.0.0, ignored (the runtime reads {COPILOT_EXTENSION}/agents and {COPILOT_EXTENSION}/commands)",
            ignored.join(", ")
        ));
    }
    found
}

/// Open Plugins and Claude: the default folders, or those the manifest
/// names; `.mcp.json`, or what the manifest declares.
pub(crate) fn open(tree: &Tree, manifest: &mut Manifest, manifest_rel: &str) -> LayoutFound {
    let mut found = LayoutFound::default();
    for dir in manifest.component_paths("skills", "skills") {
        skills_in(tree, &dir, &mut found);
    }
    for dir in manifest.component_paths("commands", "commands") {
        files_in(tree, &dir, FileRole::Command, &mut found);
    }
    for dir in manifest.component_paths("agents", "agents") {
        files_in(tree, &dir, FileRole::Agent, &mut found);
    }
    for dir in manifest.component_paths("rules", "rules") {
        files_in(tree, &dir, FileRole::Rule, &mut found);
    }
    hooks(tree, manifest, manifest_rel, &mut found);
    match manifest.mcp_declared() {
        McpDeclared::Default => mcp_files(tree, Dialect::Open, &[".mcp.json"], false, &mut found),
        McpDeclared::Files(files) => mcp_files(tree, Dialect::Open, &files, true, &mut found),
        McpDeclared::Inline(map) => {
            let sha = tree
                .files
                .get(manifest_rel)
                .map_or_else(String::new, |b| digest(b));
            found.add_declared(mcp_servers(Dialect::Open, manifest_rel, &sha, &map));
        }
    }
    found.warnings.append(&mut manifest.warnings);
    found
}

/// A directory of one kind of customization.
pub(crate) fn directory(tree: &Tree, kind: ChildKind) -> LayoutFound {
    let mut found = LayoutFound::default();
    match kind {
        ChildKind::Skill => skills_in(tree, "", &mut found),
        ChildKind::Agent => files_in(tree, "", FileRole::Agent, &mut found),
        ChildKind::Prompt => files_in(tree, "", FileRole::Prompt, &mut found),
        ChildKind::Rule => {
            // Instruction folders are read through, as the runtime reads them.
            for dir in tree.dirs.clone() {
                files_in(tree, &dir, FileRole::Rule, &mut found);
            }
        }
        ChildKind::Hook => {
            for rel in matching(tree, "", &[".json"]) {
                hook_file(tree, &rel, &mut found);
            }
        }
        ChildKind::McpServer => {
            let files = ["mcp.json", ".mcp.json"];
            mcp_files(tree, Dialect::Open, &files, false, &mut found);
        }
    }
    found
}

/// Each folder directly in `dir` holding a `SKILL.md`: one skill. Folders
/// without one are not skills and are passed over, as the spec says.
fn skills_in(tree: &Tree, dir: &str, found: &mut LayoutFound) {
    if tree.files.contains_key(dir) {
        found
            .warnings
            .push(format!("{dir}: not a folder; no skills read"));
        return;
    }
    for folder in tree.names_in(dir) {
        let path = join(dir, &folder);
        let skill_md = join(&path, "SKILL.md");
        let child = match (tree.unreadable.get(&path), tree.files.get(&skill_md)) {
            (Some(why), _) => failed(ChildKind::Skill, &folder, &path, why),
            (None, Some(bytes)) => {
                markdown_child(FileRole::Skill { folder: &folder }, &skill_md, bytes)
            }
            (None, None) => match tree.unreadable.get(&skill_md) {
                Some(why) => failed(ChildKind::Skill, &folder, &skill_md, why),
                None => continue,
            },
        };
        found
            .children
            .push(fail_on_unreadable(tree, &path, child, &mut found.claimed));
    }
}

/// A skill is its whole folder: one of its files that could not be read
/// fails the skill (its scripts would be missing).
fn fail_on_unreadable(
    tree: &Tree,
    folder: &str,
    mut child: Child,
    claimed: &mut BTreeSet<String>,
) -> Child {
    let prefix = format!("{folder}/");
    for (rel, why) in &tree.unreadable {
        if rel == folder || rel.starts_with(&prefix) {
            claimed.insert(rel.clone());
            if child.load.usable() {
                child.load = Load::Error(format!("{rel}: {why}"));
            }
        }
    }
    child
}

/// The files directly in `dir` with one of `role`'s suffixes: one child each.
fn files_in(tree: &Tree, dir: &str, role: FileRole<'_>, found: &mut LayoutFound) {
    for rel in matching(tree, dir, role.suffixes()) {
        let child = match (tree.files.get(&rel), tree.unreadable.get(&rel)) {
            (Some(bytes), _) => markdown_child(role, &rel, bytes),
            (None, Some(why)) => {
                found.claimed.insert(rel.clone());
                let name = rel.rsplit('/').next().unwrap_or(&rel);
                let stem = role.suffixes().iter().find_map(|s| name.strip_suffix(s));
                failed(kind_of(role), stem.unwrap_or(name), &rel, why)
            }
            (None, None) => continue,
        };
        found.children.push(child);
    }
}

fn kind_of(role: FileRole<'_>) -> ChildKind {
    match role {
        FileRole::Skill { .. } | FileRole::Command => ChildKind::Skill,
        FileRole::Agent => ChildKind::Agent,
        FileRole::Prompt => ChildKind::Prompt,
        FileRole::Rule => ChildKind::Rule,
    }
}

/// The paths of the entries (files or unreadable ones, not folders)
/// directly in `dir` whose names end with one of `suffixes`.
fn matching(tree: &Tree, dir: &str, suffixes: &[&str]) -> Vec<String> {
    tree.names_in(dir)
        .into_iter()
        .map(|name| join(dir, &name))
        .filter(|rel| !tree.dirs.contains(rel))
        .filter(|rel| suffixes.iter().any(|s| rel.ends_with(s)))
        .collect()
}

fn failed(kind: ChildKind, name: &str, rel: &str, why: &str) -> Child {
    let mut child = Child::new(kind, name, rel, "");
    child.load = Load::Error(why.to_owned());
    child
}

/// Hooks: `hooks/hooks.json`, a file the manifest names, or hooks written
/// in the manifest itself.
fn hooks(tree: &Tree, manifest: &mut Manifest, manifest_rel: &str, found: &mut LayoutFound) {
    if manifest.fields.get("hooks").is_some_and(|h| h.is_object()) {
        let bytes = tree.files.get(manifest_rel).cloned().unwrap_or_default();
        let mut child = hooks_child(manifest_rel, &bytes);
        child.load = Load::Degraded("hooks are listed, not run by this bridge".into());
        found.children.push(child);
        return;
    }
    for path in manifest.component_paths("hooks", "hooks") {
        let file = if tree.dirs.contains(&path) {
            join(&path, "hooks.json")
        } else {
            path
        };
        if tree.has(&file) {
            hook_file(tree, &file, found);
        }
    }
}

fn hook_file(tree: &Tree, rel: &str, found: &mut LayoutFound) {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let stem = name.strip_suffix(".json").unwrap_or(name);
    let child = match (tree.files.get(rel), tree.unreadable.get(rel)) {
        (Some(bytes), _) => Child {
            name: stem.to_owned(),
            ..hooks_child(rel, bytes)
        },
        (None, Some(why)) => {
            found.claimed.insert(rel.to_owned());
            failed(ChildKind::Hook, stem, rel, why)
        }
        (None, None) => return,
    };
    found.children.push(child);
}

/// The servers of each file in `files`; a missing one is reported when it
/// was named (by the manifest), passed over when it was only a default.
fn mcp_files(
    tree: &Tree,
    dialect: Dialect,
    files: &[impl AsRef<str>],
    named: bool,
    found: &mut LayoutFound,
) {
    for rel in files.iter().map(AsRef::as_ref) {
        match (tree.files.get(rel), tree.unreadable.get(rel)) {
            (Some(bytes), _) => found.add_declared(mcp_file(dialect, rel, bytes)),
            (None, Some(why)) => {
                found.claimed.insert(rel.to_owned());
                found
                    .warnings
                    .push(format!("{rel}: {why}; no MCP servers read"));
            }
            (None, None) if named => found.warnings.push(format!("{rel}: not found")),
            (None, None) => {}
        }
    }
}
