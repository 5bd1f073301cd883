# A rewrite (of any section) may not add a link to a host the operator has
# not listed in data.links.allowed_hosts: a link in the prompt is a place
# the model may send people, or data. Links already in the original do not
# count. Messages name the section and the host, never the prompt's text.
package ahp.transform

# An http(s) link: the scheme (a backslash counts as a slash, as browsers
# read it), user info, then the host: a bracketed IPv6 address or a name up
# to the port, path, query or fragment. The rest, to the next space or
# quote, is the link's path.
link := `(?i)https?:[/\\]+(?:[^\s/\\?#@]*@)?(\[[^\]\s]*\]|[^\s/\\?#:@<>"'()\[\]{}|^]+)[^\s<>"'()\[\]{}|^]*`

# Each link of a text, as [link, host]. A sentence's closing punctuation
# is not part of either; case and a trailing dot are not part of a name.
links(text) := {[trim_right(m[0], ".,;:!?"), lower(trim_right(m[1], ".,;:!?"))] |
	some m in regex.find_all_string_submatch_n(link, text, -1)
}

# What a rewrite could have added. An append (the common case, and what
# append-only sections allow) added only its tail: only the tail is searched,
# and a link in it that the original already had does not count. Any other
# rewrite is searched whole, against the original's links. (regorus builds
# a regex's matcher afresh at each call: its cost grows with the text.)
appended := trim_prefix(input.after, input.before) if startswith(input.after, input.before)

# Hosts linked by the rewrite and not by the original. A tail without
# "http" in it links nothing: most rewrites are decided without a search.
added_hosts contains host if {
	contains(lower(appended), "http")
	some found in links(appended)
	not linked_before(found)
	host := found[1]
}

# Whether the original has this link; its text is searched only when the
# link's text occurs in it at all.
linked_before(found) if {
	contains(input.before, found[0])
	found in links(input.before)
}

added_hosts contains host if {
	not startswith(input.after, input.before)
	some [_, host] in links(input.after) - links(input.before)
}

# Entries are host names; "*.example.com" is any name under example.com,
# at any depth, but not example.com itself. (Suffixes, not glob.match:
# a glob is compiled on every call, too slow for a rewrite with many links.)
exact := {lower(h) | some h in data.links.allowed_hosts; not startswith(h, "*.")}

suffixes := {lower(trim_prefix(h, "*")) | some h in data.links.allowed_hosts; startswith(h, "*.")}

allowed(host) if host in exact

allowed(host) if {
	some suffix in suffixes
	endswith(host, suffix)
}

deny contains msg if {
	some host in added_hosts
	not allowed(host)
	# A host is at most 253 bytes: a longer "host" is text, kept out.
	msg := sprintf("%s: adds a link to %s, not an allowed host", [input.section, substring(host, 0, 253)])
}
