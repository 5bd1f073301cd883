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

# Each text is searched once: a rule's value is kept, a function's is not.
links_before := links(input.before)

links_after := links(input.after)

# Hosts linked by the rewrite and not by the original.
added_hosts contains host if {
	some [_, host] in links_after - links_before
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
