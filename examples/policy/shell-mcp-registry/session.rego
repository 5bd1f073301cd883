# Contractors (IdP group "contractors" in the JWT's claims) work under the
# working-directory prefixes only. Others are not this policy's concern.
package ahp.session

# Most IdPs send a list; some send a single group as a string.
groups := input.claims.groups if is_array(input.claims.groups)

groups := [input.claims.groups] if is_string(input.claims.groups)

contractor if "contractors" in groups

# The folders a session may work in: its working directories, and an SDK
# app's additionalDirectories (newer SDKs send them beside workingDirectory).
dirs contains dir if some dir in input.config.workingDirectories

dirs contains dir if some dir in input.config.additionalDirectories

# A working directory as the client sent it: a file: URI or a path.
plain(dir) := trim_prefix(dir, "file://localhost") if startswith(dir, "file://localhost/")

plain(dir) := trim_prefix(dir, "file://") if {
	startswith(dir, "file://")
	not startswith(dir, "file://localhost/")
}

plain(dir) := dir if not startswith(dir, "file://")

# One with a %-escape has no path here, so it is never under (send it
# plain): "%2E%2E" is "..".
path(dir) := p if {
	not contains(dir, "%")
	p := plain(dir)
}

# No working directory means the runtime's default, which may be anywhere.
deny contains "contractors must name a working directory" if {
	contractor
	count(object.get(input.config, "workingDirectories", [])) == 0
}

deny contains msg if {
	contractor
	some dir in dirs
	not data.workdir.under(path(dir))
	msg := sprintf("contractors work under %s only: %s is not", [data.workdir.listed, substring(dir, 0, 200)])
}
