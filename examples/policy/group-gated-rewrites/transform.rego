# Only copilot-writers may rewrite `tone`, and only by adding text after it:
# the operator's tone stays first and whole.
package ahp.transform

# A long addition is allowed, but recorded for someone to read.
max_added_bytes := 2000

# count() counts characters (UTF-16 code units in regorus), not bytes;
# hex writes two digits per UTF-8 byte.
bytes(s) := count(hex.encode(s)) / 2

deny contains msg if {
	input.section == "tone"
	not data.writers.member
	msg := sprintf("tone: %s is not in %s, who alone may rewrite it", [data.writers.who, data.writers.group])
}

deny contains "tone: text may only be added after the original" if {
	input.section == "tone"
	data.writers.member
	not startswith(input.after, input.before)
}

warn contains msg if {
	input.section == "tone"
	startswith(input.after, input.before)
	n := bytes(trim_prefix(input.after, input.before))
	n > max_added_bytes
	msg := sprintf("tone: %d bytes added (more than %d)", [n, max_added_bytes])
}
