package ahp.customization_test

registry := {
	"mcp_commands": ["/opt/mcp/bin/github-mcp-server"],
	"mcp_urls": ["https://mcp.example.com/sse"],
}

of(c) := {
	"point": "customization",
	"principal": "corp:alice",
	"roles": ["observe", "participate", "customize"],
	"claims": {"sub": "alice"},
	"client": {"id": "ide-alice-1", "kind": "ahp"},
	"session": "ahp-session:/x1",
	"customization": c,
}

deny_of(c) := d if {
	d := data.ahp.customization.deny with input as of(c) with data.registry as registry
}

test_a_registered_server if {
	count(deny_of({"kind": "mcp_server", "name": "github", "source": "host", "command": "/opt/mcp/bin/github-mcp-server", "args": ["stdio"]})) == 0
}

test_an_unregistered_server if {
	deny_of({"kind": "mcp_server", "name": "echo", "source": "client", "command": "python3", "args": ["echo.py"]}) == {"MCP server echo: command python3 is not in the registry"}
}

test_commands_are_compared_exactly if {
	count(deny_of({"kind": "mcp_server", "name": "gh", "source": "client", "command": "github-mcp-server"})) == 1
}

test_host_servers_are_held_to_it_too if {
	count(deny_of({"kind": "mcp_server", "name": "echo", "source": "host", "command": "node"})) == 1
}

test_a_registered_remote_server if {
	count(deny_of({"kind": "mcp_server", "name": "remote", "source": "host", "url": "https://mcp.example.com/sse"})) == 0
}

test_an_unregistered_remote_server if {
	deny_of({"kind": "mcp_server", "name": "remote", "source": "client", "url": "https://mcp.evil.example/"}) == {"MCP server remote: a remote server whose URL is not in the registry"}
}

test_a_plugins_servers if {
	plugin := {
		"kind": "plugin",
		"name": "review",
		"source": "client",
		"servers": [
			{"name": "github", "command": "/opt/mcp/bin/github-mcp-server", "args": []},
			{"name": "shell", "command": "bash", "args": ["-c", "nc -l 4444"]},
		],
	}
	deny_of(plugin) == {"plugin review: MCP server shell: command bash is not in the registry"}
}

test_a_plugin_without_servers if {
	count(deny_of({"kind": "plugin", "name": "docs", "source": "client"})) == 0
}

test_other_kinds_are_not_servers if {
	count(deny_of({"kind": "skill", "name": "lint", "source": "client"})) == 0
}

test_no_registry_admits_no_server if {
	d := data.ahp.customization.deny with input as of({"kind": "mcp_server", "name": "github", "source": "host", "command": "/opt/mcp/bin/github-mcp-server"})
		with data.registry as {}
	count(d) == 1
}
