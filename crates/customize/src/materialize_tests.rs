use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::manifest::{MCP_SCHEMA_1, PLUGIN_SCHEMA_1};
use crate::{read_directory, read_package, Bounds, MemorySource};

fn memory(files: &[(&str, &str)]) -> MemorySource {
    files
        .iter()
        .fold(MemorySource::new(), |s, (rel, text)| s.file(rel, *text))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

async fn open_plugin() -> Package {
    let source = memory(&[
        (".plugin/plugin.json", r#"{"name": "p"}"#),
        (
            "skills/alpha/SKILL.md",
            "---\nname: alpha\ndescription: \"Use: for \\\"alpha\\\"\"\nlicense: MIT\n---\nALPHA\n",
        ),
        ("skills/alpha/scripts/run.sh", "echo run"),
        (
            "commands/go.md",
            "---\ndescription: Go.\ndisable-model-invocation: true\n---\nGO $ARGUMENTS",
        ),
        (
            "agents/rev.md",
            "---\nname: rev\ndescription: Reviews.\ntools: [view]\nmodel: m1\n---\nREVIEW\n",
        ),
        (
            "rules/py.mdc",
            "---\nglobs: [\"**/*.py\", \"*.pyi\"]\n---\nPY\n",
        ),
        (
            "rules/always.mdc",
            "---\nalwaysApply: true\nglobs: \"*.x\"\n---\nALWAYS\n",
        ),
        ("rules/plain.md", "PLAIN\n"),
        ("bin/srv", "#!/bin/sh\n"),
        (
            ".mcp.json",
            r#"{"mcpServers": {"s": {"command": "./bin/srv", "args": ["${PLUGIN_ROOT}/cfg", "${PLUGIN_DATA}"],
                "env": {"K": "${PLUGIN_ROOT}"}, "cwd": "./bin"}}}"#,
        ),
    ]);
    read_package(&source, &Bounds::default()).await
}

#[tokio::test]
async fn skills_are_written_regenerated_with_their_files() {
    let pkg = open_plugin().await;
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("out");
    let m = materialize(&pkg, &dest).unwrap();
    let skills = m.skills_dir.clone().unwrap();
    assert_eq!(skills, dest.join("skills"));
    assert_eq!(
        read(&skills.join("alpha/SKILL.md")),
        "---\nname: \"alpha\"\ndescription: \"Use: for \\\"alpha\\\"\"\n---\nALPHA\n"
    );
    assert_eq!(read(&skills.join("alpha/scripts/run.sh")), "echo run");
    assert_eq!(
        read(&skills.join("go/SKILL.md")),
        "---\nname: \"go\"\ndescription: \"Go.\"\ndisable-model-invocation: true\n---\nGO $ARGUMENTS"
    );
    // What was written reads back as what was vetted.
    let back = crate::children::markdown_child(
        crate::children::FileRole::Skill { folder: "alpha" },
        "alpha/SKILL.md",
        read(&skills.join("alpha/SKILL.md")).as_bytes(),
    );
    assert_eq!(back.description.as_deref(), Some("Use: for \"alpha\""));
    assert_eq!(back.load, Load::Loaded);
}

#[tokio::test]
async fn rules_become_instructions_with_apply_to() {
    let pkg = open_plugin().await;
    let tmp = tempfile::tempdir().unwrap();
    let m = materialize(&pkg, tmp.path()).unwrap();
    let dir = m.instructions_dir.unwrap();
    assert_eq!(
        read(&dir.join("py.instructions.md")),
        "---\napplyTo: \"**/*.py, *.pyi\"\n---\nPY\n"
    );
    assert_eq!(
        read(&dir.join("always.instructions.md")),
        "---\napplyTo: \"**\"\n---\nALWAYS\n"
    );
    assert_eq!(
        read(&dir.join("plain.instructions.md")),
        "---\napplyTo: \"**\"\n---\nPLAIN\n"
    );
}

#[tokio::test]
async fn agents_become_specs() {
    let pkg = open_plugin().await;
    let tmp = tempfile::tempdir().unwrap();
    let m = materialize(&pkg, tmp.path()).unwrap();
    assert_eq!(
        m.agents,
        vec![AgentSpec {
            name: "rev".into(),
            display_name: "rev".into(),
            description: "Reviews.".into(),
            prompt: "REVIEW\n".into(),
            tools: Some(vec!["view".into()]),
            model: Some("m1".into()),
            disable_model_invocation: None,
        }]
    );
}

#[tokio::test]
async fn servers_run_from_a_copy_of_the_package() {
    let pkg = open_plugin().await;
    let tmp = tempfile::tempdir().unwrap();
    let m = materialize(&pkg, tmp.path()).unwrap();
    let root = m.package_root.clone().unwrap();
    let (r, d) = (
        root.display().to_string(),
        tmp.path().join("data").display().to_string(),
    );
    let s = &m.mcp_servers[0];
    assert_eq!(s.command, format!("{r}/bin/srv"));
    assert_eq!(s.args, vec![format!("{r}/cfg"), d.clone()]);
    assert_eq!(s.env["K"], r);
    assert_eq!(
        (s.env["PLUGIN_ROOT"].as_str(), s.env["PLUGIN_DATA"].as_str()),
        (r.as_str(), d.as_str())
    );
    assert_eq!(s.cwd, root.join("bin"));
    let mode = fs::metadata(root.join("bin/srv"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    assert_eq!(read(&root.join(".plugin/plugin.json")), r#"{"name": "p"}"#);
}

#[tokio::test]
async fn only_the_kept_usable_children_are_written() {
    let pkg = open_plugin().await;
    let tmp = tempfile::tempdir().unwrap();
    let m = materialize_only(&pkg, tmp.path(), |c| c.kind == ChildKind::Agent).unwrap();
    assert_eq!(
        (m.skills_dir, m.instructions_dir, m.package_root),
        (None, None, None)
    );
    assert_eq!(m.agents.len(), 1);
    assert!(m.mcp_servers.is_empty());
    assert!(!tmp.path().join("skills").exists());
}

#[tokio::test]
async fn prompts_are_skills_for_users_only() {
    let source = memory(&[
        ("fix.prompt.md", "---\ndescription: Fix.\n---\nFIX"),
        ("bad.prompt.md", "---\nx\n---\n"),
    ]);
    let pkg = read_directory(&source, ChildKind::Prompt, &Bounds::default()).await;
    let tmp = tempfile::tempdir().unwrap();
    let m = materialize(&pkg, tmp.path()).unwrap();
    let skills = m.skills_dir.unwrap();
    assert_eq!(
        read(&skills.join("fix/SKILL.md")),
        "---\nname: \"fix\"\ndescription: \"Fix.\"\ndisable-model-invocation: true\n---\nFIX"
    );
    assert!(
        !skills.join("bad").exists(),
        "a child in error is not written"
    );
}

#[tokio::test]
async fn refused_packages_and_used_folders_are_not_written_into() {
    let tmp = tempfile::tempdir().unwrap();
    let refused = read_package(&memory(&[("x", "")]), &Bounds::default()).await;
    assert!(matches!(
        materialize(&refused, tmp.path()),
        Err(MaterializeError::Refused(_))
    ));
    let mut pkg = open_plugin().await;
    fs::write(tmp.path().join("old"), "").unwrap();
    assert!(matches!(
        materialize(&pkg, tmp.path()),
        Err(MaterializeError::NotEmpty(_))
    ));
    pkg.contents.clear();
    let fresh = tmp.path().join("fresh");
    assert!(matches!(
        materialize(&pkg, &fresh),
        Err(MaterializeError::Missing(_))
    ));
}

#[tokio::test]
async fn an_unsafe_name_is_never_a_path() {
    let manifest = format!(r#"{{"$schema": "{PLUGIN_SCHEMA_1}", "name": "a"}}"#);
    let mcp = format!(r#"{{"$schema": "{MCP_SCHEMA_1}", "mcpServers": {{}}}}"#);
    let source = memory(&[("plugin.json", &manifest), ("mcp.json", &mcp)]);
    let mut pkg = read_package(&source, &Bounds::default()).await;
    let mut evil = Child::new(ChildKind::Rule, "../../evil", "rules/x.mdc", "");
    evil.body = "x".into();
    pkg.children.push(evil);
    let tmp = tempfile::tempdir().unwrap();
    let err = materialize(&pkg, &tmp.path().join("out")).unwrap_err();
    assert!(matches!(err, MaterializeError::UnsafeName(n) if n == "../../evil"));
    assert!(!tmp.path().join("evil.instructions.md").exists());
}

#[test]
fn quoting_and_expansion() {
    assert_eq!(quote("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
    assert_eq!(
        expand("${PLUGIN_ROOT}/x:${PLUGIN_DATA}", "/r", "/d"),
        "/r/x:/d"
    );
    assert_eq!(
        expand("${PLUGIN_ROOT}", "${PLUGIN_DATA}", "/d"),
        "${PLUGIN_DATA}"
    );
    assert_eq!(expand("none", "/r", "/d"), "none");
}
