# A rewrite (of any section) may not add a link to a host the operator has
# not listed in data.links.allowed_hosts: a link in the prompt is a place
# the model may send people, or data. Links already in the original do not
# count. Messages name the section and the host, never the prompt's text.
package ahp.transform

# Links are found with string built-ins, not a regex: regorus builds a
# regex's matcher afresh at every call, some 50 us even for a short text.
# The text is read as a browser reads a link: case does not matter, a
# backslash counts as a slash, and a link ends at white space, a quote, an
# angle bracket, a parenthesis, a brace, | or ^. The rewriting below keeps
# each link's host where it was and makes the rest one shape: https as
# http, a query or fragment as a path ("?" and "#" as "/"), and a slash
# after a bracketed IPv6 address, so that it ends the host.
ends := {
	" ": " ", "\n": " ", "\r": " ", "\t": " ", "\f": " ", "\u000b": " ",
	"\"": " ", "'": " ", "<": " ", ">": " ", "(": " ", ")": " ",
	"{": " ", "}": " ", "|": " ", "^": " ", "\\": "/",
	"https:": "http:", "?": "/", "#": "/", "]": "]/",
}

# Each link of a text, as [link, host]. Every "http(s):" followed by a
# slash starts one, even inside another link (a link carried in a query is
# a place too). The host comes after the slashes and any user info (up to
# the last "@", as a browser reads it), to the port or the path; a
# bracketed IPv6 address whole. A sentence's closing punctuation is part
# of neither. (One comprehension, each step one built-in: every call costs
# regorus's VM about a microsecond.)
links(text) := {[trim_right(word, ".,;:!?"), host] |
	scan := strings.replace_n(ends, lower(text))
	some i in indexof_n(scan, "http:/")
	# A link is at most about 2000 characters, as browsers and servers cut it.
	word := split(substring(scan, i, 2100), " ")[0]
	authority := split(trim_left(substring(word, 5, -1), "/"), "/")[0]
	at := split(authority, "@")
	place := at[count(at) - 1]
	name := {true: place, false: split(place, ":")[0]}[startswith(place, "[")]
	host := trim_right(name, ".,;:!?")
	host != ""
}

# What a rewrite could have added. An append (the common case, and what
# append-only sections allow) added only its tail: only the tail is searched,
# and a link in it that the original already had does not count. Any other
# rewrite is searched whole, against the original's links.
appended := trim_prefix(input.after, input.before) if startswith(input.after, input.before)

# The tail's links; a tail without "http" in it links nothing, so most
# rewrites are decided without a search.
tail_links := links(appended) if contains(lower(appended), "http")

before_lower := lower(input.before)

# Hosts linked by the rewrite and not by the original: a host the original
# never names is new at once; the original is searched for its links only
# when it names the host.
added_hosts contains host if {
	some [_, host] in tail_links
	not contains(before_lower, host)
}

added_hosts contains host if {
	some [link, host] in tail_links
	contains(before_lower, host)
	not [link, host] in links(input.before)
}

added_hosts contains host if {
	not startswith(input.after, input.before)
	some [_, host] in links(input.after) - links(input.before)
}

# Entries are host names in lower case; "*.example.com" is any name under
# example.com, at any depth, but not example.com itself. A host is looked
# up as itself and as each wildcard that could cover it (no glob.match: a
# glob is compiled on every call, too slow for a rewrite with many links).
allowed(host) if host in data.links.allowed_hosts

allowed(host) if {
	some i in indexof_n(host, ".")
	concat("", ["*", substring(host, i, -1)]) in data.links.allowed_hosts
}

deny contains msg if {
	some host in added_hosts
	not allowed(host)
	# A host is at most 253 bytes: a longer "host" is text, kept out.
	msg := sprintf("%s: adds a link to %s, not an allowed host", [input.section, substring(host, 0, 253)])
}
