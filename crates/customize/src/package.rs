//! A container read whole: walked within its bounds, its layout told by its
//! manifest, its children found and vetted, and its state summed up. Never
//! fails and never panics: what cannot be used says why in a [`Load`].

use std::collections::BTreeMap;

use super::children::digest;
use super::layouts::{self, LayoutFound};
use super::manifest::{self, Manifest, RootManifest};
use super::package_source::PackageSource;
use super::walk::{walk, Tree};
use super::{Bounds, ChildKind, Layout, Load, Package, PackageFile};

/// How many problems a package's summary names before it counts the rest.
const SUMMARY_ITEMS: usize = 5;

/// The plugin at `source`: its layout told by its manifest (`plugin.json`
/// with the Agent Plugins 1.0.0 `$schema`, `.plugin/plugin.json`,
/// `.claude-plugin/plugin.json`, or a root `plugin.json` without that
/// schema, read as an Open Plugin as the runtime does).
pub async fn read_package(source: &dyn PackageSource, bounds: &Bounds) -> Package {
    match walk(source, bounds).await {
        Ok(tree) => plugin(tree),
        Err(e) => refused(Layout::Unknown, e.to_string(), &Tree::default()),
    }
}

/// The directory at `source`, holding customizations of one kind: skill
/// folders (`<name>/SKILL.md`), agents (`*.agent.md`, `*.md`), prompts
/// (`*.prompt.md`, `*.md`), rules (`*.instructions.md`, `*.mdc`, `*.md`, in
/// every folder), hooks (`*.json`), or MCP servers (`mcp.json`,
/// `.mcp.json`). Its `name` is left empty: the caller names it.
pub async fn read_directory(
    source: &dyn PackageSource,
    contents: ChildKind,
    bounds: &Bounds,
) -> Package {
    let layout = Layout::Directory(contents);
    match walk(source, bounds).await {
        Ok(tree) => {
            let found = layouts::directory(&tree, contents);
            assemble(Header::nameless(layout), found, tree)
        }
        Err(e) => refused(layout, e.to_string(), &Tree::default()),
    }
}

/// A container's own fields, before its children.
struct Header {
    name: String,
    version: Option<String>,
    description: Option<String>,
    layout: Layout,
}

impl Header {
    fn nameless(layout: Layout) -> Self {
        Self {
            name: String::new(),
            version: None,
            description: None,
            layout,
        }
    }

    fn of(manifest: &Manifest, layout: Layout) -> Self {
        Self {
            name: manifest.name.clone(),
            version: manifest.version.clone(),
            description: manifest.description.clone(),
            layout,
        }
    }
}

const OPEN_MANIFESTS: [(&str, Layout); 2] = [
    (".plugin/plugin.json", Layout::OpenPlugin),
    (".claude-plugin/plugin.json", Layout::ClaudePlugin),
];

fn plugin(tree: Tree) -> Package {
    let root = match tree
        .files
        .get("plugin.json")
        .map(|b| manifest::root_manifest(b))
    {
        Some(Err(e)) => return refused(Layout::Unknown, e.0, &tree),
        Some(Ok(kind)) => Some(kind),
        None => None,
    };
    if root == Some(RootManifest::AgentPlugins1) {
        return match manifest::agent_plugins(&tree.files["plugin.json"]) {
            Ok(m) => {
                let mut found = layouts::agent_plugins(&tree);
                found.warnings.extend(m.warnings.iter().cloned());
                assemble(Header::of(&m, Layout::AgentPlugins1), found, tree)
            }
            Err(e) => refused(Layout::AgentPlugins1, e.0, &tree),
        };
    }
    let open = OPEN_MANIFESTS
        .into_iter()
        .find(|(rel, _)| tree.has(rel))
        .or(root.map(|_| ("plugin.json", Layout::OpenPlugin)));
    let Some((rel, layout)) = open else {
        let unreadable = ["plugin.json"]
            .into_iter()
            .chain(OPEN_MANIFESTS.map(|(rel, _)| rel))
            .find_map(|m| tree.unreadable.get(m).map(|why| format!("{m}: {why}")));
        let reason = unreadable.unwrap_or_else(|| {
            "no plugin.json, .plugin/plugin.json or .claude-plugin/plugin.json at the package root"
                .into()
        });
        return refused(Layout::Unknown, reason, &tree);
    };
    let Some(bytes) = tree.files.get(rel) else {
        let why = tree
            .unreadable
            .get(rel)
            .map_or("not a file", String::as_str);
        return refused(layout, format!("{rel}: {why}"), &tree);
    };
    match manifest::open_plugin(rel, bytes) {
        Ok(mut m) => {
            let found = layouts::open(&tree, &mut m, rel);
            assemble(Header::of(&m, layout), found, tree)
        }
        Err(e) => refused(layout, e.0, &tree),
    }
}

/// A package refused whole: no children, no contents; the files read so
/// far are listed for the audit.
fn refused(layout: Layout, reason: String, tree: &Tree) -> Package {
    Package {
        name: String::new(),
        version: None,
        description: None,
        layout,
        children: Vec::new(),
        mcp_servers: Vec::new(),
        files: files_of(tree),
        contents: BTreeMap::new(),
        load: Load::Error(reason),
    }
}

fn files_of(tree: &Tree) -> Vec<PackageFile> {
    tree.files
        .iter()
        .map(|(rel, bytes)| PackageFile {
            rel_path: rel.clone(),
            size: bytes.len() as u64,
            sha256: digest(bytes),
        })
        .collect()
}

fn assemble(header: Header, mut found: LayoutFound, tree: Tree) -> Package {
    refuse_duplicates(&mut found);
    for (rel, why) in &tree.unreadable {
        if !found.claimed.contains(rel) {
            found.warnings.push(format!("{rel}: {why}; left out"));
        }
    }
    let load = summary(&found);
    Package {
        name: header.name,
        version: header.version,
        description: header.description,
        layout: header.layout,
        files: files_of(&tree),
        contents: tree.files,
        children: found.children,
        mcp_servers: found.servers,
        load,
    }
}

/// Two usable children of one kind with one name would be one file when
/// materialized, and one name to the runtime: the first found keeps it.
fn refuse_duplicates(found: &mut LayoutFound) {
    let mut first: BTreeMap<(ChildKind, String), String> = BTreeMap::new();
    for child in found.children.iter_mut().filter(|c| c.load.usable()) {
        let key = (child.kind, child.name.clone());
        match first.get(&key) {
            Some(at) => {
                child.load = Load::Error(format!(
                    "another {} is named {:?} ({at}); this one is left out",
                    child.kind, child.name
                ));
            }
            None => {
                first.insert(key, child.rel_path.clone());
            }
        }
    }
    let children = &found.children;
    found.servers.retain(|s| {
        children.iter().any(|c| {
            c.kind == ChildKind::McpServer
                && c.name == s.name
                && c.rel_path == s.rel_path
                && c.load.usable()
        })
    });
}

/// Loaded when nothing was left out or assumed; otherwise degraded, with
/// the first few problems named by file.
fn summary(found: &LayoutFound) -> Load {
    let mut problems: Vec<String> = found.warnings.clone();
    for child in &found.children {
        match &child.load {
            Load::Loaded => {}
            Load::Degraded(m) | Load::Error(m) => {
                problems.push(format!(
                    "{} {:?} ({}): {m}",
                    child.kind, child.name, child.rel_path
                ));
            }
        }
    }
    if problems.is_empty() {
        return Load::Loaded;
    }
    let more = problems.len().saturating_sub(SUMMARY_ITEMS);
    problems.truncate(SUMMARY_ITEMS);
    let mut text = problems.join("; ");
    if more > 0 {
        text.push_str(&format!("; and {more} more"));
    }
    Load::Degraded(text)
}

#[cfg(test)]
#[path = "package_tests.rs"]
mod tests;
