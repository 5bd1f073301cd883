use std::fs;
use std::os::unix::fs::symlink;

use super::*;
use crate::manifest::{MCP_SCHEMA_1, PLUGIN_SCHEMA_1};
use crate::{Child, DiskSource, MemorySource};

/// A package on disk at `<tmp>/pkg`, with `<tmp>/outside` next to it.
fn disk(files: &[(&str, &str)]) -> (tempfile::TempDir, DiskSource) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("pkg");
    fs::create_dir_all(&root).unwrap();
    fs::create_dir_all(tmp.path().join("outside")).unwrap();
    fs::write(
        tmp.path().join("outside/secret.md"),
        "---\ndescription: s\n---\nSECRET",
    )
    .unwrap();
    for (rel, text) in files {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    (tmp, DiskSource::new(root))
}

fn memory(files: &[(&str, &str)]) -> MemorySource {
    files
        .iter()
        .fold(MemorySource::new(), |s, (rel, text)| s.file(rel, *text))
}

fn ap_manifest(extra: &str) -> String {
    format!(r#"{{"$schema": "{PLUGIN_SCHEMA_1}", "name": "plug-a", "version": "1.0.0"{extra}}}"#)
}

const SKILL_A: &str = "---\nname: alpha\ndescription: Use for alpha.\n---\nALPHA\n";

fn child<'a>(pkg: &'a Package, name: &str) -> &'a Child {
    pkg.children
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no child {name} in {pkg:#?}"))
}

fn names(pkg: &Package) -> Vec<(ChildKind, &str)> {
    pkg.children
        .iter()
        .map(|c| (c.kind, c.name.as_str()))
        .collect()
}

fn degraded_with(pkg: &Package, fragment: &str) {
    assert!(
        matches!(&pkg.load, Load::Degraded(m) if m.contains(fragment)),
        "expected degraded with {fragment:?}: {:?}",
        pkg.load
    );
}

fn error_with(pkg: &Package, fragment: &str) {
    assert!(
        matches!(&pkg.load, Load::Error(m) if m.contains(fragment)),
        "expected an error with {fragment:?}: {:?}",
        pkg.load
    );
    assert!(pkg.children.is_empty() && pkg.mcp_servers.is_empty() && pkg.contents.is_empty());
}

#[tokio::test]
async fn an_agent_plugins_package_is_read_whole() {
    let mcp = format!(
        r#"{{"$schema": "{MCP_SCHEMA_1}", "mcpServers": {{"db": {{"type": "stdio", "command": "./bin/db"}}}}}}"#
    );
    let manifest = ap_manifest(r#", "description": "D""#);
    let (_tmp, source) = disk(&[
        ("plugin.json", &manifest),
        ("skills/alpha/SKILL.md", SKILL_A),
        ("skills/alpha/scripts/run.sh", "echo"),
        ("skills/not-a-skill/notes.md", "x"),
        ("mcp.json", &mcp),
        ("bin/db", "#!/bin/sh"),
        (
            "com.github.copilot/agents/rev.agent.md",
            "---\ndescription: Reviews.\n---\nREVIEW",
        ),
        (
            "com.github.copilot/commands/go.md",
            "---\ndescription: Go.\n---\nGO $ARGUMENTS",
        ),
    ]);
    let pkg = read_package(&source, &Bounds::default()).await;
    assert_eq!(pkg.load, Load::Loaded);
    assert_eq!(pkg.layout, Layout::AgentPlugins1);
    assert_eq!(
        (pkg.name.as_str(), pkg.version.as_deref()),
        ("plug-a", Some("1.0.0"))
    );
    assert_eq!(pkg.description.as_deref(), Some("D"));
    assert_eq!(
        names(&pkg),
        [
            (ChildKind::Skill, "alpha"),
            (ChildKind::Agent, "rev"),
            (ChildKind::Skill, "go"),
            (ChildKind::McpServer, "db"),
        ]
    );
    assert_eq!(child(&pkg, "alpha").body, "ALPHA\n");
    assert_eq!(pkg.mcp_servers.len(), 1);
    assert_eq!(pkg.files.len(), 8);
    let run = pkg
        .files
        .iter()
        .find(|f| f.rel_path == "skills/alpha/scripts/run.sh")
        .unwrap();
    assert_eq!(
        (run.size, run.sha256.as_str()),
        (4, digest(b"echo").as_str())
    );
    assert_eq!(pkg.contents["bin/db"], b"#!/bin/sh");
}

#[tokio::test]
async fn agent_plugins_manifest_problems() {
    let unknown = ap_manifest(r#", "agents": "./agents""#);
    let pkg = read_package(&memory(&[("plugin.json", &unknown)]), &Bounds::default()).await;
    degraded_with(&pkg, "plugin.json: unknown field `agents` ignored");
    let root_agents = ap_manifest("");
    let source = memory(&[("plugin.json", &root_agents), ("agents/a.md", "x")]);
    let pkg = read_package(&source, &Bounds::default()).await;
    degraded_with(&pkg, "agents/: not part of Agent Plugins 1.0.0");
    assert!(pkg.children.is_empty());
    let bad_name = format!(r#"{{"$schema": "{PLUGIN_SCHEMA_1}", "name": "Plug A"}}"#);
    let pkg = read_package(&memory(&[("plugin.json", &bad_name)]), &Bounds::default()).await;
    error_with(&pkg, "is not a plugin name");
    assert_eq!(pkg.layout, Layout::AgentPlugins1);
    let pkg = read_package(
        &memory(&[("plugin.json", "{\"name\": \"a\",}")]),
        &Bounds::default(),
    )
    .await;
    error_with(
        &pkg,
        "plugin.json: not valid JSON: trailing comma at line 1 column 14",
    );
    assert_eq!(
        pkg.files.len(),
        1,
        "what was read is still listed for the audit"
    );
}

#[tokio::test]
async fn an_open_plugin_reads_every_component() {
    let source = memory(&[
        (
            ".plugin/plugin.json",
            r#"{"name": "plug-b", "version": "0.1.0"}"#,
        ),
        (
            "skills/bskill/SKILL.md",
            "---\nname: bskill\ndescription: B.\n---\nB",
        ),
        (
            "commands/bcmd.md",
            "---\ndescription: Cmd.\n---\nrun $ARGUMENTS",
        ),
        (
            "agents/bagent.md",
            "---\nname: bagent\ndescription: Agent.\ntools: Read, Grep\n---\nAGENT",
        ),
        (
            "rules/r1.mdc",
            "---\nalwaysApply: true\ndescription: x\n---\nRULE",
        ),
        ("rules/r2.md", "---\nglobs: \"**/*.py\"\n---\nPY"),
        ("hooks/hooks.json", r#"{"hooks": {}}"#),
        (
            ".mcp.json",
            r#"{"mcpServers": {"bmcp": {"command": "python3", "args": ["s.py"]}}}"#,
        ),
    ]);
    let pkg = read_package(&source, &Bounds::default()).await;
    assert_eq!(pkg.layout, Layout::OpenPlugin);
    assert_eq!(
        names(&pkg),
        [
            (ChildKind::Skill, "bskill"),
            (ChildKind::Skill, "bcmd"),
            (ChildKind::Agent, "bagent"),
            (ChildKind::Rule, "r1"),
            (ChildKind::Rule, "r2"),
            (ChildKind::Hook, "hooks"),
            (ChildKind::McpServer, "bmcp"),
        ]
    );
    assert_eq!(child(&pkg, "r1").always_apply, Some(true));
    assert_eq!(child(&pkg, "r2").globs, Some(vec!["**/*.py".into()]));
    assert_eq!(
        child(&pkg, "bagent").tools,
        Some(vec!["Read".into(), "Grep".into()])
    );
    // Hooks are listed, never run: the package says so.
    degraded_with(&pkg, "hooks are listed, not run");
    assert_eq!(pkg.mcp_servers[0].rel_path, ".mcp.json");
}

#[tokio::test]
async fn the_claude_layout_and_a_bare_root_manifest_read_as_open_plugins() {
    let source = memory(&[
        (".claude-plugin/plugin.json", r#"{"name": "plug-c"}"#),
        ("agents/x.md", "---\ndescription: X.\n---\nX"),
    ]);
    let pkg = read_package(&source, &Bounds::default()).await;
    assert_eq!(
        (pkg.layout, pkg.load.clone()),
        (Layout::ClaudePlugin, Load::Loaded)
    );
    assert_eq!(names(&pkg), [(ChildKind::Agent, "x")]);
    let source = memory(&[
        ("plugin.json", r#"{"name": "plug-e", "version": "0.2.0"}"#),
        ("commands/e.md", "E"),
    ]);
    let pkg = read_package(&source, &Bounds::default()).await;
    assert_eq!(
        (pkg.layout, pkg.load.clone()),
        (Layout::OpenPlugin, Load::Loaded)
    );
    assert_eq!(names(&pkg), [(ChildKind::Skill, "e")]);
}

#[tokio::test]
async fn a_package_without_a_manifest_is_refused_and_a_missing_skills_folder_is_fine() {
    let pkg = read_package(&memory(&[("SKILL.md", SKILL_A)]), &Bounds::default()).await;
    error_with(
        &pkg,
        "no plugin.json, .plugin/plugin.json or .claude-plugin/plugin.json",
    );
    assert_eq!(pkg.layout, Layout::Unknown);
    let manifest = ap_manifest("");
    let pkg = read_package(&memory(&[("plugin.json", &manifest)]), &Bounds::default()).await;
    assert_eq!((pkg.load.clone(), pkg.children.len()), (Load::Loaded, 0));
}

#[tokio::test]
async fn bad_skills_fail_alone_and_degrade_the_package() {
    let manifest = ap_manifest("");
    let source = memory(&[
        ("plugin.json", &manifest),
        ("skills/alpha/SKILL.md", SKILL_A),
        ("skills/nofm/SKILL.md", "no frontmatter here"),
        (
            "skills/mismatch/SKILL.md",
            "---\nname: other-name\ndescription: d\n---\nM",
        ),
    ]);
    let pkg = read_package(&source, &Bounds::default()).await;
    assert_eq!(child(&pkg, "alpha").load, Load::Loaded);
    assert!(matches!(child(&pkg, "nofm").load, Load::Error(_)));
    let renamed = child(&pkg, "other-name");
    assert_eq!(renamed.rel_path, "skills/mismatch/SKILL.md");
    assert!(matches!(renamed.load, Load::Error(_)));
    degraded_with(
        &pkg,
        "skill \"nofm\" (skills/nofm/SKILL.md): no frontmatter",
    );
    degraded_with(
        &pkg,
        "skill \"other-name\" (skills/mismatch/SKILL.md): its name",
    );
}

#[tokio::test]
async fn a_symlink_out_of_the_root_fails_the_narrowest_thing_it_is_in() {
    let manifest = ap_manifest("");
    let (tmp, source) = disk(&[
        ("plugin.json", &manifest),
        ("skills/alpha/SKILL.md", SKILL_A),
        (
            "skills/beta/SKILL.md",
            "---\nname: beta\ndescription: B.\n---\nB",
        ),
    ]);
    let outside = tmp.path().join("outside");
    let root = source.root().to_owned();
    symlink(&outside, root.join("skills/escape")).unwrap();
    symlink(outside.join("secret.md"), root.join("skills/beta/leak.md")).unwrap();
    symlink(outside.join("secret.md"), root.join("notes.md")).unwrap();
    let pkg = read_package(&source, &Bounds::default()).await;
    assert_eq!(child(&pkg, "alpha").load, Load::Loaded);
    assert_eq!(
        child(&pkg, "beta").load,
        Load::Error("skills/beta/leak.md: a symlink leading outside the package".into())
    );
    assert_eq!(
        child(&pkg, "escape").load,
        Load::Error("a symlink leading outside the package".into())
    );
    degraded_with(
        &pkg,
        "notes.md: a symlink leading outside the package; left out",
    );
    assert!(!pkg.contents.values().any(|b| b.ends_with(b"SECRET")));
    fs::remove_file(root.join("plugin.json")).unwrap();
    fs::write(outside.join("plugin.json"), &manifest).unwrap();
    symlink(outside.join("plugin.json"), root.join("plugin.json")).unwrap();
    let pkg = read_package(&source, &Bounds::default()).await;
    error_with(&pkg, "plugin.json: a symlink leading outside the package");
}

#[tokio::test]
async fn a_file_over_the_bound_is_refused_without_being_read() {
    let manifest = ap_manifest("");
    let (_tmp, source) = disk(&[("plugin.json", &manifest)]);
    let big = fs::File::create(source.root().join("big.bin")).unwrap();
    big.set_len(50 * 1024 * 1024).unwrap();
    let pkg = read_package(&source, &Bounds::default()).await;
    error_with(&pkg, "big.bin: larger than 1048576 bytes (max_file_bytes)");
}

#[tokio::test]
async fn ten_thousand_files_are_refused_at_the_bound() {
    let manifest = ap_manifest("");
    let (_tmp, source) = disk(&[("plugin.json", &manifest)]);
    let many = source.root().join("skills/many");
    fs::create_dir_all(&many).unwrap();
    for i in 0..10_000 {
        fs::write(many.join(format!("f{i}")), "").unwrap();
    }
    let started = std::time::Instant::now();
    let pkg = read_package(&source, &Bounds::default()).await;
    error_with(&pkg, "more than 1000 files and folders (max_files)");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[tokio::test]
async fn an_unknown_server_type_is_skipped_and_degrades_the_package() {
    let manifest = ap_manifest("");
    let mcp = format!(
        r#"{{"$schema": "{MCP_SCHEMA_1}", "mcpServers": {{"ok": {{"command": "a"}}, "odd": {{"type": "ws", "command": "b"}}}}}}"#
    );
    let source = memory(&[("plugin.json", &manifest), ("mcp.json", &mcp)]);
    let pkg = read_package(&source, &Bounds::default()).await;
    assert_eq!(
        pkg.mcp_servers
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
        ["ok"]
    );
    degraded_with(&pkg, "mcpServer \"odd\" (mcp.json): unknown type \"ws\"");
}

#[tokio::test]
async fn a_second_child_of_one_name_is_left_out() {
    let source = memory(&[
        (".plugin/plugin.json", r#"{"name": "p"}"#),
        ("commands/dup.md", "A"),
        (
            "skills/dup/SKILL.md",
            "---\nname: dup\ndescription: d\n---\nB",
        ),
        ("rules/dup.mdc", "C"),
        (".mcp.json", r#"{"mcpServers": {"s": {"command": "x"}}}"#),
        ("more.json", r#"{"mcpServers": {"s": {"command": "y"}}}"#),
    ]);
    let pkg = read_package(&source, &Bounds::default()).await;
    let dups: Vec<&Load> = pkg
        .children
        .iter()
        .filter(|c| c.name == "dup")
        .map(|c| &c.load)
        .collect();
    assert_eq!(dups.len(), 3);
    assert_eq!(
        (dups[0], dups[2]),
        (&Load::Loaded, &Load::Loaded),
        "a rule may share a skill's name"
    );
    assert!(matches!(dups[1], Load::Error(m) if m.contains("another skill is named \"dup\"")));
    let source = memory(&[
        (
            ".plugin/plugin.json",
            r#"{"name": "p", "mcpServers": ["./a.json", "./b.json"]}"#,
        ),
        ("a.json", r#"{"mcpServers": {"s": {"command": "x"}}}"#),
        ("b.json", r#"{"mcpServers": {"s": {"command": "y"}}}"#),
    ]);
    let pkg = read_package(&source, &Bounds::default()).await;
    assert_eq!(pkg.mcp_servers.len(), 1);
    assert_eq!(pkg.mcp_servers[0].command, "x");
}

#[tokio::test]
async fn directory_containers_read_their_one_kind() {
    let skills = memory(&[
        ("alpha/SKILL.md", SKILL_A),
        ("alpha/scripts/run.sh", "echo"),
        ("README.md", "not a skill"),
    ]);
    let pkg = read_directory(&skills, ChildKind::Skill, &Bounds::default()).await;
    assert_eq!(
        (pkg.layout, pkg.name.as_str()),
        (Layout::Directory(ChildKind::Skill), "")
    );
    assert_eq!(
        (names(&pkg), pkg.load.clone()),
        (vec![(ChildKind::Skill, "alpha")], Load::Loaded)
    );
    let agents = memory(&[
        (
            "filer.agent.md",
            "---\nname: filer\ndescription: F.\n---\nF",
        ),
        ("plain.md", "---\ndescription: P.\n---\nP"),
        ("nofm.agent.md", "no frontmatter"),
        ("notes.txt", "ignored"),
    ]);
    let pkg = read_directory(&agents, ChildKind::Agent, &Bounds::default()).await;
    assert_eq!(
        names(&pkg),
        [
            (ChildKind::Agent, "filer"),
            (ChildKind::Agent, "nofm"),
            (ChildKind::Agent, "plain")
        ]
    );
    degraded_with(&pkg, "agent \"nofm\" (nofm.agent.md): no frontmatter");
    let prompts = memory(&[("fix.prompt.md", "Fix it."), ("plan.md", "Plan it.")]);
    let pkg = read_directory(&prompts, ChildKind::Prompt, &Bounds::default()).await;
    assert_eq!(
        names(&pkg),
        [(ChildKind::Prompt, "fix"), (ChildKind::Prompt, "plan")]
    );
    let rules = memory(&[
        ("all.instructions.md", "---\napplyTo: \"**\"\n---\nALL"),
        (
            "sub/py.instructions.md",
            "---\napplyTo: \"**/*.py\"\n---\nPY",
        ),
        ("c.mdc", "C"),
    ]);
    let pkg = read_directory(&rules, ChildKind::Rule, &Bounds::default()).await;
    assert_eq!(
        names(&pkg),
        [
            (ChildKind::Rule, "all"),
            (ChildKind::Rule, "c"),
            (ChildKind::Rule, "py")
        ]
    );
    assert_eq!(child(&pkg, "py").rel_path, "sub/py.instructions.md");
    let servers = memory(&[(".mcp.json", r#"{"mcpServers": {"m": {"command": "x"}}}"#)]);
    let pkg = read_directory(&servers, ChildKind::McpServer, &Bounds::default()).await;
    assert_eq!(pkg.mcp_servers.len(), 1);
}

#[tokio::test]
async fn a_long_list_of_problems_is_summed_up() {
    let files: Vec<(String, &str)> = (0..8).map(|i| (format!("a{i}.agent.md"), "nofm")).collect();
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), *t)).collect();
    let pkg = read_directory(&memory(&refs), ChildKind::Agent, &Bounds::default()).await;
    let Load::Degraded(summary) = &pkg.load else {
        panic!("{:?}", pkg.load)
    };
    assert!(summary.ends_with("; and 3 more"), "{summary}");
    assert_eq!(summary.matches("no frontmatter").count(), 5);
}

#[tokio::test]
async fn a_root_that_is_not_there_is_an_error() {
    let pkg = read_directory(
        &DiskSource::new("/nonexistent/x"),
        ChildKind::Skill,
        &Bounds::default(),
    )
    .await;
    error_with(&pkg, "the package cannot be listed: not found");
    assert_eq!(pkg.layout, Layout::Directory(ChildKind::Skill));
}
