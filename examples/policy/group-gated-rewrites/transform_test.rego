package ahp.transform_test

# A writer's rewrite of tone; each test changes what it needs.
base := {
	"point": "transform",
	"principal": "corp:alice",
	"roles": ["observe", "participate", "transform"],
	"claims": {"sub": "alice", "groups": ["staff", "copilot-writers"]},
	"client": {"id": "ide-alice-1", "kind": "ahp"},
	"session": "ahp-session:/x1",
	"section": "tone",
	"before": "Be concise.",
	"after": "Be concise.\nAnswer in French.",
	"owner": "ide-alice-1",
}

# base with whole fields replaced (object.union alone would merge claims).
given(changes) := object.union(object.remove(base, object.keys(changes)), changes)

test_writer_may_append if {
	count(data.ahp.transform.deny) == 0 with input as base
	count(data.ahp.transform.warn) == 0 with input as base
}

test_writer_may_leave_it_unchanged if {
	count(data.ahp.transform.deny) == 0 with input as given({"after": "Be concise."})
}

test_writer_may_not_replace if {
	data.ahp.transform.deny == {"tone: text may only be added after the original"} with input as given({"after": "Be verbose."})
}

test_writer_may_not_prepend if {
	count(data.ahp.transform.deny) == 1 with input as given({"after": "Note: Be concise."})
}

test_outsider_may_not_rewrite_tone if {
	outsider := given({"principal": "corp:bob", "claims": {"sub": "bob", "groups": ["staff"]}})
	data.ahp.transform.deny == {"tone: corp:bob is not in copilot-writers, who alone may rewrite it"} with input as outsider
}

test_a_single_group_as_a_string_counts if {
	count(data.ahp.transform.deny) == 0 with input as given({"claims": {"groups": "copilot-writers"}})
}

test_token_principal_is_no_writer if {
	token := given({"principal": "policy-service", "claims": {}})
	data.ahp.transform.deny == {"tone: policy-service is not in copilot-writers, who alone may rewrite it"} with input as token
}

test_no_principal_is_no_writer if {
	nobody := given({"principal": null, "claims": {}})
	data.ahp.transform.deny == {"tone: a client without a principal is not in copilot-writers, who alone may rewrite it"} with input as nobody
}

test_other_sections_are_not_this_policys if {
	other := given({"section": "guidelines", "claims": {}, "after": "Anything."})
	count(data.ahp.transform.deny) == 0 with input as other
	count(data.ahp.transform.warn) == 0 with input as other
}

test_long_addition_warns_and_is_not_denied if {
	long := given({"after": concat("", ["Be concise.", repeat("x", 2001)])})
	count(data.ahp.transform.deny) == 0 with input as long
	data.ahp.transform.warn == {"tone: 2001 bytes added (more than 2000)"} with input as long
}

test_the_limit_counts_bytes_not_characters if {
	# 1000 two-byte characters: 2000 bytes, at the limit; one more is over it.
	at := given({"after": concat("", ["Be concise.", repeat("é", 1000)])})
	count(data.ahp.transform.warn) == 0 with input as at
	over := given({"after": concat("", ["Be concise.", repeat("é", 1000), "!"])})
	data.ahp.transform.warn == {"tone: 2001 bytes added (more than 2000)"} with input as over
}

repeat(s, n) := concat("", [s | some _ in numbers.range(1, n)])
