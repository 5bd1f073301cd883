//! A session's enabled containers, written in the shapes the runtime reads
//! and folded into its `session.create` / `session.resume` fields, with
//! what the audit records of each. Each container is written under a
//! folder named by the digest of its files and its enabled children: a
//! change is a new path, so the binding differs and the session re-binds.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use tracing::warn;

use super::catalog::package_digest;
use super::shape::child_id;
use crate::audit::{ChildDigest, McpServerDigest, Source};
use crate::config::McpServerConfig;
use crate::customize::{materialize_only, ChildKind, Materialized, Package};
use crate::runtime::{CustomAgent, McpServerSpec, RuntimeCustomizations};

/// What one container gives the runtime.
#[derive(Debug, Clone)]
pub(crate) enum RuntimeContents {
    Package(Arc<Package>),
    /// A host MCP server, as configured.
    Server(String, McpServerConfig),
}

/// One enabled container of a session, with who it comes from.
#[derive(Debug, Clone)]
pub(crate) struct Contribution {
    pub id: String,
    pub name: String,
    pub source: Source,
    pub client_id: Option<String>,
    pub principal: Option<String>,
    pub contents: RuntimeContents,
    /// Its children the session's clients turned off, by child id.
    pub disabled: BTreeSet<String>,
}

/// A container that reached the runtime, as the audit records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Applied {
    pub id: String,
    /// Changes when what reaches the runtime does.
    pub key: String,
    pub children: Vec<ChildDigest>,
    pub servers: Vec<McpServerDigest>,
}

/// The runtime's fields, what reached it, and the containers that could
/// not be written (id, why).
#[derive(Debug, Default)]
pub(crate) struct Mapped {
    pub runtime: RuntimeCustomizations,
    pub applied: Vec<Applied>,
    pub failed: Vec<(String, String)>,
}

/// A short hex digest (64 bits of SHA-256): for folder names.
pub(crate) fn short(bytes: impl AsRef<[u8]>) -> String {
    hex::encode(&Sha256::digest(bytes)[..8])
}

/// What was written where, by this process (its folder is its own, so a
/// folder is never written twice: it holds the digest it is named by).
pub(crate) type Written = BTreeMap<PathBuf, Materialized>;

/// Writes every contribution under `dir` (blocking file I/O) and folds
/// them. The selected agent is not among them: it is chosen per turn.
pub(crate) fn map(contributions: &[Contribution], dir: &Path, written: &mut Written) -> Mapped {
    let mut out = Mapped::default();
    for c in contributions {
        match &c.contents {
            RuntimeContents::Server(name, server) => add_server(&mut out, c, name, server),
            RuntimeContents::Package(pkg) => add_package(&mut out, c, pkg, dir, written),
        }
    }
    out
}

fn add_server(out: &mut Mapped, c: &Contribution, name: &str, s: &McpServerConfig) {
    let spec = McpServerSpec {
        command: s.command.clone(),
        args: s.args.clone(),
        env: s.env.clone(),
        cwd: s.cwd.as_ref().map(|p| p.display().to_string()),
    };
    let key = short(format!("{name}\0{}\0{:?}", s.command, s.args));
    insert_server(&mut out.runtime.mcp_servers, name, spec);
    out.applied.push(Applied {
        id: c.id.clone(),
        key,
        children: vec![],
        servers: vec![McpServerDigest {
            name: name.to_owned(),
            command: s.command.clone(),
            args: s.args.clone(),
        }],
    });
}

fn insert_server(into: &mut BTreeMap<String, McpServerSpec>, name: &str, spec: McpServerSpec) {
    if into.contains_key(name) {
        warn!(
            server = name,
            "two containers bring an MCP server of this name; the first is kept"
        );
        return;
    }
    into.insert(name.to_owned(), spec);
}

fn add_package(
    out: &mut Mapped,
    c: &Contribution,
    pkg: &Package,
    dir: &Path,
    written: &mut Written,
) {
    let keep = |child: &crate::customize::Child| !c.disabled.contains(&child_id(&c.id, child));
    let enabled: Vec<&str> = pkg
        .children
        .iter()
        .filter(|ch| ch.load.usable() && keep(ch))
        .map(|ch| ch.rel_path.as_str())
        .collect();
    if enabled.is_empty() {
        return;
    }
    let key = short(format!("{}\0{}", package_digest(pkg), enabled.join("\0")));
    let dest = dir.join(short(&c.id)).join(&key);
    let written = match written.get(&dest) {
        Some(m) => Ok(m.clone()),
        None => {
            // Written by a bind that overlapped this one: the same files,
            // but not known here, so this one writes its own copy.
            let fresh = match dest.exists() {
                true => dest.with_extension(uuid::Uuid::new_v4().simple().to_string()),
                false => dest.clone(),
            };
            materialize_only(pkg, &fresh, keep).inspect(|m| {
                written.insert(dest.clone(), m.clone());
            })
        }
    };
    match written {
        Ok(m) => {
            let applied = digests(c, pkg, &m, key, &keep);
            fold(&mut out.runtime, m);
            out.applied.push(applied);
        }
        Err(e) => out.failed.push((c.id.clone(), e.to_string())),
    }
}

fn digests(
    c: &Contribution,
    pkg: &Package,
    m: &Materialized,
    key: String,
    keep: &impl Fn(&crate::customize::Child) -> bool,
) -> Applied {
    Applied {
        id: c.id.clone(),
        key,
        children: pkg
            .children
            .iter()
            .filter(|ch| ch.load.usable() && keep(ch) && ch.kind != ChildKind::McpServer)
            .map(|ch| ChildDigest {
                kind: ch.kind.to_string(),
                name: ch.name.clone(),
                sha256: ch.sha256.clone(),
            })
            .collect(),
        servers: m
            .mcp_servers
            .iter()
            .map(|s| McpServerDigest {
                name: s.name.clone(),
                command: s.command.clone(),
                args: s.args.clone(),
            })
            .collect(),
    }
}

fn fold(into: &mut RuntimeCustomizations, m: Materialized) {
    let shown = |p: PathBuf| p.display().to_string();
    into.skill_directories.extend(m.skills_dir.map(shown));
    into.instruction_directories
        .extend(m.instructions_dir.map(shown));
    for a in m.agents {
        into.custom_agents.push(CustomAgent {
            name: a.name,
            display_name: a.display_name,
            description: a.description,
            prompt: a.prompt,
            tools: a.tools,
            model: a.model,
            disable_model_invocation: a.disable_model_invocation.unwrap_or(false),
        });
    }
    for s in m.mcp_servers {
        let spec = McpServerSpec {
            command: s.command,
            args: s.args,
            env: s.env,
            cwd: Some(shown(s.cwd)),
        };
        insert_server(&mut into.mcp_servers, &s.name, spec);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::customize::{read_directory, Bounds, MemorySource};

    async fn skills() -> Arc<Package> {
        let src = MemorySource::new()
            .file("a/SKILL.md", "---\nname: a\ndescription: A.\n---\nx")
            .file("b/SKILL.md", "---\nname: b\ndescription: B.\n---\ny");
        Arc::new(read_directory(&src, ChildKind::Skill, &Bounds::default()).await)
    }

    fn contribution(pkg: Arc<Package>, disabled: &[&str]) -> Contribution {
        Contribution {
            id: "host-dir-0".into(),
            name: "skills".into(),
            source: Source::HostDirectory,
            client_id: None,
            principal: None,
            contents: RuntimeContents::Package(pkg),
            disabled: disabled.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[tokio::test]
    async fn a_disabled_child_is_left_out_and_changes_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let mut written = Written::new();
        let all = map(
            &[contribution(skills().await, &[])],
            dir.path(),
            &mut written,
        );
        let some = map(
            &[contribution(skills().await, &["host-dir-0/skill/b"])],
            dir.path(),
            &mut written,
        );
        assert_eq!(all.applied[0].children.len(), 2);
        assert_eq!(some.applied[0].children.len(), 1);
        assert_ne!(all.applied[0].key, some.applied[0].key);
        assert_ne!(
            all.runtime.skill_directories,
            some.runtime.skill_directories
        );
        let listed = std::fs::read_dir(&some.runtime.skill_directories[0])
            .unwrap()
            .count();
        assert_eq!(listed, 1);
    }

    #[tokio::test]
    async fn an_overlapping_bind_that_does_not_know_the_folder_writes_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let c = [contribution(skills().await, &[])];
        let first = map(&c, dir.path(), &mut Written::new());
        let second = map(&c, dir.path(), &mut Written::new());
        assert!(
            first.failed.is_empty() && second.failed.is_empty(),
            "{:?}",
            second.failed
        );
        assert_eq!(first.applied, second.applied);
        assert_ne!(
            first.runtime.skill_directories,
            second.runtime.skill_directories
        );
    }
}
