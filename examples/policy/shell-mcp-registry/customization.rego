# Every MCP server the runtime would start must be in the registry: a
# server is a program run with the session's rights. Host containers are
# held to it too, so the registry is the one list of what may run.
package ahp.customization

# The servers of this container: itself, or the ones a plugin brings.
servers contains [label, server] if {
	input.customization.kind == "mcp_server"
	server := input.customization
	label := sprintf("MCP server %s", [object.get(server, "name", "(unnamed)")])
}

servers contains [label, server] if {
	input.customization.kind == "plugin"
	some server in input.customization.servers
	label := sprintf("plugin %s: MCP server %s", [input.customization.name, object.get(server, "name", "(unnamed)")])
}

# Commands are compared exactly, as [policy.customizations] does. An
# interpreter (node, python3) in the list lets any script run: list the
# vetted programs themselves.
deny contains msg if {
	some [label, server] in servers
	is_string(server.command)
	not server.command in data.registry.mcp_commands
	msg := sprintf("%s: command %s is not in the registry", [label, server.command])
}

# A server with no command is a remote one: its URL must be listed.
deny contains msg if {
	some [label, server] in servers
	not is_string(server.command)
	not server.url in data.registry.mcp_urls
	msg := sprintf("%s: a remote server whose URL is not in the registry", [label])
}
