# Who is a writer: a member of the IdP group copilot-writers, read from the
# JWT's verified claims. Tokens and certificates have no claims ({}), so
# their principals are never writers.
package writers

group := "copilot-writers"

# Most IdPs send a list; some send a single group as a string.
groups := input.claims.groups if is_array(input.claims.groups)

groups := [input.claims.groups] if is_string(input.claims.groups)

member if group in groups

# The principal for messages: named by the bridge, never by the client.
who := input.principal if {
	is_string(input.principal)
} else := "a client without a principal"
