# Where work happens: the folders in data.registry.workdir_prefixes and
# everything below them. Shared by the permission and session points.
package workdir

# Without the data nothing is under: a missing file refuses, not allows.
prefixes := data.registry.workdir_prefixes if {
	is_array(data.registry.workdir_prefixes)
} else := []

# The prefixes for messages.
listed := concat(", ", prefixes) if count(prefixes) > 0 else := "(none listed)"

# A path is inside a prefix when it is the prefix or starts with it and a
# slash ("/srv/workshop" is not inside "/srv/work").
inside(path, prefix) if path == prefix

inside(path, prefix) if startswith(path, concat("", [prefix, "/"]))

# A ".." component may climb out, so a path with one is never under.
under(path) if {
	not ".." in split(path, "/")
	some prefix in prefixes
	inside(path, trim_right(prefix, "/"))
}
