# The runtime's permission requests. Only `kind` is certain: the other
# fields vary by kind and CLI release, so a rule reads the ones it needs
# and a request without them is simply not its concern.
package ahp.permission

# Each rm or cd in the command and each argument that is not an option:
# [verb, path], quotes and backslashes trimmed. rm counts after a
# separator, a space, a quote or a slash (/bin/rm, sudo rm, $(rm ...));
# its arguments run to the next separator.
# A cd counts only beside an rm: it moves where a relative rm deletes.
invocations := regex.find_all_string_submatch_n(
	`(?:^|[\s;&|(){}!'"\\/\x60])(rm|cd)\b(?:\s+([^;&|<>()\x60\n]*))?`,
	input.request.fullCommandText,
	-1,
)

targets contains [verb, path] if {
	some [_, "rm", _] in invocations
	some [_, verb, args] in invocations
	some word in regex.split(`\s+`, trim_space(args))
	word != ""
	not startswith(word, "-")
	path := trim(word, `"'\`)
}

# A cd without a path goes home; "cd -" goes back. Neither is known here.
targets contains ["cd", "~"] if {
	some [_, "rm", _] in invocations
	some [_, "cd", args] in invocations
	trim_space(args) in {"", "-"}
}

# A relative path is taken to be in the working directory (a cd out of it
# is checked too); an absolute one must be under a prefix.
outside(path) if {
	startswith(path, "/")
	not data.workdir.under(path)
}

outside(path) if ".." in split(path, "/")

# A path the shell would expand ($HOME, `...`, ~) cannot be judged here.
outside(path) if regex.match(`^~|[$\x60]`, path)

# The host of a url request: after the scheme and any user info.
host := lower(h) if {
	[_, h] := regex.find_all_string_submatch_n(
		`^(?i)[a-z][a-z0-9+.\-]*:[/\\]+(?:[^/\\?#@\s]*@)?(\[[^\]\s]*\]|[^/\\?#:\s]+)`,
		input.request.url,
		1,
	)[0]
} else := "(no host)"

# Nobody deletes outside the working directories. This reads the command
# text: a guard rail against a model's mistake, not a sandbox (a script,
# find -delete or xargs rm is not seen).
deny contains msg if {
	input.request.kind == "shell"
	some [verb, path] in targets
	outside(path)
	msg := sprintf("shell: %s %s: outside the working directories", [verb, substring(path, 0, 200)])
}

# Fetching a URL from an unlisted host is allowed, but recorded.
warn contains msg if {
	input.request.kind == "url"
	not host in data.registry.url_hosts
	msg := sprintf("url: %s is not a listed host", [substring(host, 0, 253)])
}
