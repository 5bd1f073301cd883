use super::*;

fn ap(json: &str) -> Result<Manifest, ManifestError> {
    agent_plugins(json.as_bytes())
}

#[test]
fn the_root_manifest_is_told_by_its_schema() {
    let schema = format!(r#"{{"$schema": "{PLUGIN_SCHEMA_1}", "name": "a"}}"#);
    assert_eq!(
        root_manifest(schema.as_bytes()),
        Ok(RootManifest::AgentPlugins1)
    );
    assert_eq!(root_manifest(br#"{"name": "a"}"#), Ok(RootManifest::Open));
    let future = r#"{"$schema": "https://agent-plugins.org/schemas/2.0.0/plugin.schema.json"}"#;
    let err = root_manifest(future.as_bytes()).unwrap_err();
    assert!(err.0.contains("does not read"), "{err}");
    let err = root_manifest(b"{\"name\": ").unwrap_err();
    assert!(
        err.0.starts_with("plugin.json: not valid JSON: EOF"),
        "{err}"
    );
    let err = root_manifest(b"[1]").unwrap_err();
    assert_eq!(err.0, "plugin.json: not a JSON object");
}

#[test]
fn an_agent_plugins_manifest_is_read() {
    let m = ap(&format!(
        r#"{{"$schema": "{PLUGIN_SCHEMA_1}", "name": "plug-a", "version": "1.0.0",
            "description": "D", "author": {{"name": "A", "email": "a@x"}},
            "keywords": ["k"], "extensions": {{"com.example": {{}}}}}}"#
    ))
    .unwrap();
    assert_eq!(m.name, "plug-a");
    assert_eq!(m.version.as_deref(), Some("1.0.0"));
    assert_eq!(m.description.as_deref(), Some("D"));
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);
}

#[test]
fn agent_plugins_report_unknown_fields_and_refuse_bad_ones() {
    let m = ap(r#"{"name": "a", "agents": "./x", "extensions": 3}"#).unwrap();
    assert_eq!(
        m.warnings,
        vec![
            "plugin.json: unknown field `agents` ignored",
            "plugin.json: `extensions` is not an object; ignored"
        ]
    );
    let refused = [
        (r#"{"version": "1"}"#, "no `name`"),
        (r#"{"name": 3}"#, "`name` is not a string"),
        (r#"{"name": "Plug A"}"#, "is not a plugin name"),
        (r#"{"name": "a--b"}"#, "is not a plugin name"),
        (
            r#"{"name": "a", "version": 1}"#,
            "`version` is not a string",
        ),
        (
            r#"{"name": "a", "author": "me"}"#,
            "`author` is not an object",
        ),
        (
            r#"{"name": "a", "author": {"x": "y"}}"#,
            "unknown field `x`",
        ),
        (
            r#"{"name": "a", "keywords": [1]}"#,
            "`keywords` is not a list",
        ),
    ];
    for (json, fragment) in refused {
        let err = ap(json).unwrap_err();
        assert!(err.0.contains(fragment), "{json}: {err}");
    }
}

#[test]
fn an_open_manifest_is_lenient_but_needs_a_safe_name() {
    let m = open_plugin(
        ".claude-plugin/plugin.json",
        br#"{"name": "plug-b", "hooks": {}, "version": 2}"#,
    )
    .unwrap();
    assert_eq!(m.name, "plug-b");
    assert_eq!(m.version, None);
    assert_eq!(
        m.warnings,
        vec![".claude-plugin/plugin.json: `version` is not a string; ignored"]
    );
    let m = open_plugin(".plugin/plugin.json", br#"{"name": "My_Plugin"}"#).unwrap();
    assert_eq!(m.warnings.len(), 1);
    for json in [r#"{"name": "../x"}"#, r#"{}"#, r#"{"name": ["a"]}"#] {
        assert!(
            open_plugin(".plugin/plugin.json", json.as_bytes()).is_err(),
            "{json}"
        );
    }
}

#[test]
fn component_paths_replace_the_default_and_stay_inside() {
    let mut m = open_plugin(
        ".plugin/plugin.json",
        br#"{"name": "p", "skills": ["./skills/", "./extra"], "agents": "./team",
             "rules": "../out", "commands": 3}"#,
    )
    .unwrap();
    assert_eq!(
        m.component_paths("skills", "skills"),
        vec!["skills", "extra"]
    );
    assert_eq!(m.component_paths("agents", "agents"), vec!["team"]);
    assert_eq!(m.component_paths("rules", "rules"), vec!["rules"]);
    assert_eq!(m.component_paths("commands", "commands"), vec!["commands"]);
    assert_eq!(m.component_paths("hooks", "hooks"), vec!["hooks"]);
    assert_eq!(m.warnings.len(), 2, "{:?}", m.warnings);
    assert!(m.warnings[0].contains("\"../out\" does not start with ./"));
}

#[test]
fn mcp_servers_may_be_files_or_inline() {
    let declared = |json: &str| {
        let mut m = open_plugin("p", json.as_bytes()).unwrap();
        (m.mcp_declared(), m.warnings)
    };
    assert_eq!(declared(r#"{"name": "p"}"#).0, McpDeclared::Default);
    assert_eq!(
        declared(r#"{"name": "p", "mcpServers": "./mcp/servers.json"}"#).0,
        McpDeclared::Files(vec!["mcp/servers.json".into()])
    );
    assert_eq!(
        declared(r#"{"name": "p", "mcpServers": {"paths": ["./a.json"]}}"#).0,
        McpDeclared::Files(vec!["a.json".into()])
    );
    let inline = declared(r#"{"name": "p", "mcpServers": {"db": {"command": "db"}}}"#).0;
    assert!(matches!(inline, McpDeclared::Inline(m) if m.contains_key("db")));
    let wrapped = declared(r#"{"name": "p", "mcpServers": {"mcpServers": {"db": {}}}}"#).0;
    assert!(matches!(wrapped, McpDeclared::Inline(m) if m.contains_key("db")));
    let (d, warnings) = declared(r#"{"name": "p", "mcpServers": "./../../etc"}"#);
    assert_eq!((d, warnings.len()), (McpDeclared::Default, 1));
}

#[test]
fn package_paths_are_normalised_or_refused() {
    assert_eq!(package_path("./a/./b/"), Ok("a/b".into()));
    assert_eq!(package_path("./"), Ok(String::new()));
    assert!(package_path("a/b").is_err());
    assert!(package_path("./a/../../b").is_err());
    assert!(package_path("/etc").is_err());
}
