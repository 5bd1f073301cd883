use super::*;

fn ap_file(servers: &str) -> String {
    format!(r#"{{"$schema": "{MCP_SCHEMA_1}", "mcpServers": {servers}}}"#)
}

fn load_of<'a>(d: &'a Declared, name: &str) -> &'a Load {
    &d.children.iter().find(|c| c.name == name).unwrap().load
}

#[test]
fn an_agent_plugins_file_is_read() {
    let text = ap_file(
        r#"{"db": {"type": "stdio", "command": "./bin/db", "args": ["--ro"],
                   "env": {"A": "b"}, "cwd": "${PLUGIN_DATA}/db"}}"#,
    );
    let d = mcp_file(Dialect::AgentPlugins1, "mcp.json", text.as_bytes());
    assert_eq!(d.warnings, Vec::<String>::new());
    assert_eq!(
        d.servers,
        vec![McpServer {
            name: "db".into(),
            command: "./bin/db".into(),
            args: vec!["--ro".into()],
            env: [("A".to_string(), "b".to_string())].into(),
            cwd: Some("${PLUGIN_DATA}/db".into()),
            rel_path: "mcp.json".into(),
        }]
    );
    let c = &d.children[0];
    assert_eq!(
        (c.kind, c.name.as_str(), c.rel_path.as_str()),
        (ChildKind::McpServer, "db", "mcp.json")
    );
    assert_eq!(c.sha256, digest(text.as_bytes()));
    assert_eq!((c.body.as_str(), &c.load), ("", &Load::Loaded));
}

#[test]
fn a_server_of_an_unknown_type_is_skipped_and_the_others_load() {
    let text = ap_file(
        r#"{"ok": {"type": "stdio", "command": "srv"},
            "odd": {"type": "carrier-pigeon", "command": "x"},
            "far": {"type": "sse", "url": "https://x"}}"#,
    );
    let d = mcp_file(Dialect::AgentPlugins1, "mcp.json", text.as_bytes());
    assert_eq!(
        d.servers
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
        ["ok"]
    );
    assert_eq!(
        load_of(&d, "odd"),
        &Load::Error("unknown type \"carrier-pigeon\"".into())
    );
    assert!(matches!(load_of(&d, "far"), Load::Error(m) if m.contains("remote server")));
    assert_eq!(load_of(&d, "ok"), &Load::Loaded);
}

#[test]
fn agent_plugins_servers_are_closed_and_confined() {
    let refused = [
        (
            r#"{"command": "x", "timeout": 5}"#,
            "unknown field `timeout`",
        ),
        (
            r#"{"command": "x", "url": "https://x"}"#,
            "unknown field `url`",
        ),
        (r#"{"args": []}"#, "no `command`"),
        (r#"{"command": ""}"#, "not a non-empty string"),
        (r#"{"command": "python3 -m x"}"#, "one program"),
        (r#"{"command": "/usr/bin/x"}"#, "bare program name"),
        (r#"{"command": "./../x"}"#, "leads outside"),
        (r#"{"command": "x", "cwd": "/tmp"}"#, "not ./-relative"),
        (
            r#"{"command": "x", "cwd": "${PLUGIN_ROOT}/../.."}"#,
            "leads outside",
        ),
        (
            r#"{"command": "x", "env": {"PLUGIN_ROOT": "/"}}"#,
            "may not set PLUGIN_ROOT",
        ),
        (
            r#"{"command": "x", "env": {"A": 1}}"#,
            "`env.A` is not a string",
        ),
        (r#"{"command": "x", "args": "a"}"#, "`args` is not a list"),
        (r#"{"command": "x", "type": 1}"#, "`type` is 1"),
        ("[]", "not a JSON object"),
    ];
    for (server, fragment) in refused {
        let text = ap_file(&format!(r#"{{"s": {server}}}"#));
        let d = mcp_file(Dialect::AgentPlugins1, "mcp.json", text.as_bytes());
        assert!(d.servers.is_empty(), "{server}");
        assert!(
            matches!(load_of(&d, "s"), Load::Error(m) if m.contains(fragment)),
            "{server}: {d:?}"
        );
    }
    let text = ap_file(r#"{"../evil": {"command": "x"}}"#);
    let d = mcp_file(Dialect::AgentPlugins1, "mcp.json", text.as_bytes());
    assert!(d.servers.is_empty() && matches!(load_of(&d, "../evil"), Load::Error(_)));
}

#[test]
fn a_file_of_another_version_disables_the_servers() {
    let text = r#"{"mcpServers": {"a": {"command": "x"}}}"#;
    let d = mcp_file(Dialect::AgentPlugins1, "mcp.json", text.as_bytes());
    assert!(d.servers.is_empty() && d.children.is_empty());
    assert!(d.warnings[0].contains("MCP servers disabled"), "{d:?}");
    let text = format!(r#"{{"$schema": "{MCP_SCHEMA_1}", "mcpServers": {{}}, "x": 1}}"#);
    let d = mcp_file(Dialect::AgentPlugins1, "mcp.json", text.as_bytes());
    assert_eq!(d.warnings, vec!["mcp.json: unknown field `x` ignored"]);
}

#[test]
fn an_open_file_is_lenient() {
    let text = r#"{"mcpServers": {
        "a": {"command": "python3", "args": ["/abs/server.py"], "tools": ["*"], "timeout": 1},
        "b": {"type": "local", "command": "/usr/bin/b", "cwd": "/tmp", "extra": true},
        "c": {"command": "c", "cwd": "../up"}}}"#;
    let d = mcp_file(Dialect::Open, ".mcp.json", text.as_bytes());
    assert_eq!(
        d.servers
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert_eq!(load_of(&d, "a"), &Load::Loaded);
    assert_eq!(
        load_of(&d, "b"),
        &Load::Degraded("unknown field `extra` ignored".into())
    );
    assert!(matches!(load_of(&d, "c"), Load::Error(m) if m.contains("leads outside")));
}

#[test]
fn a_malformed_file_names_the_json_error() {
    let d = mcp_file(Dialect::Open, ".mcp.json", b"{\"mcpServers\": ");
    assert!(
        d.warnings[0].starts_with(".mcp.json: not valid JSON: EOF"),
        "{d:?}"
    );
    let d = mcp_file(Dialect::Open, ".mcp.json", b"{\"mcpServers\": []}");
    assert_eq!(d.warnings, vec![".mcp.json: `mcpServers` is not an object"]);
}
