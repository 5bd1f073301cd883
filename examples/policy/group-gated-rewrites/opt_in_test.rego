package ahp.opt_in_test

base := {
	"point": "opt_in",
	"principal": "corp:alice",
	"roles": ["observe", "participate", "transform"],
	"claims": {"sub": "alice", "groups": ["copilot-writers"]},
	"client": {"id": "ide-alice-1", "kind": "ahp"},
	"session": "ahp-session:/x1",
	"sections": ["tone", "custom_instructions"],
}

# base with whole fields replaced (object.union alone would merge claims).
given(changes) := object.union(object.remove(base, object.keys(changes)), changes)

test_writer_may_opt_in_to_tone if {
	count(data.ahp.opt_in.deny) == 0 with input as base
}

test_outsider_may_not_opt_in_to_tone if {
	outsider := given({"principal": "corp:bob", "claims": {"sub": "bob", "groups": ["staff"]}})
	data.ahp.opt_in.deny == {"opt-in to tone refused: corp:bob is not in the IdP group copilot-writers"} with input as outsider
}

test_outsider_may_opt_in_to_other_sections if {
	other := given({"claims": {}, "sections": ["custom_instructions"]})
	count(data.ahp.opt_in.deny) == 0 with input as other
}

test_claims_without_groups_are_no_membership if {
	count(data.ahp.opt_in.deny) == 1 with input as given({"claims": {"sub": "alice"}})
}
