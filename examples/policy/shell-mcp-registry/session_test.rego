package ahp.session_test

registry := {"workdir_prefixes": ["/srv/work"]}

# An AHP createSession from a contractor.
contractor(dirs) := {
	"point": "session",
	"principal": "corp:carol",
	"roles": ["observe", "participate"],
	"claims": {"sub": "carol", "groups": ["contractors"]},
	"client": {"id": "ide-carol-1", "kind": "ahp"},
	"session": "ahp-session:/x2",
	"config": {
		"provider": "copilot",
		"workingDirectories": dirs,
		"model": null,
		"config": null,
	},
}

deny_of(doc) := d if {
	d := data.ahp.session.deny with input as doc with data.registry as registry
}

test_contractor_under_the_prefix if {
	count(deny_of(contractor(["/srv/work/acme"]))) == 0
	count(deny_of(contractor(["file:///srv/work/acme", "file://localhost/srv/work/b"]))) == 0
}

test_contractor_outside if {
	deny_of(contractor(["/home/carol"])) == {"contractors work under /srv/work only: /home/carol is not"}
}

test_contractor_one_of_several_outside if {
	deny_of(contractor(["/srv/work/acme", "file:///etc"])) == {"contractors work under /srv/work only: file:///etc is not"}
}

test_contractor_sibling_and_dot_dot if {
	count(deny_of(contractor(["/srv/workshop"]))) == 1
	count(deny_of(contractor(["/srv/work/../../etc"]))) == 1
}

# %2E%2E is "..": an escaped path is refused rather than decoded here.
test_contractor_escaped_path if {
	count(deny_of(contractor(["file:///srv/work/%2E%2E/etc"]))) == 1
}

test_contractor_without_a_directory if {
	deny_of(contractor([])) == {"contractors must name a working directory"}
}

test_no_registry_admits_no_folder if {
	d := data.ahp.session.deny with input as contractor(["/srv/work/acme"]) with data.registry as {}
	d == {"contractors work under (none listed) only: /srv/work/acme is not"}
}

test_a_single_group_as_a_string_counts if {
	doc := object.union(contractor(["/etc"]), {"claims": {"groups": "contractors"}})
	count(deny_of(doc)) == 1
}

test_staff_anywhere if {
	doc := object.union(object.remove(contractor(["/home/alice"]), ["claims"]), {"claims": {"sub": "alice", "groups": ["staff"]}})
	count(deny_of(doc)) == 0
}

test_token_principals_are_not_contractors if {
	doc := object.union(object.remove(contractor(["/"]), ["claims"]), {"principal": "ci", "claims": {}})
	count(deny_of(doc)) == 0
}

test_additional_directories_count if {
	doc := object.union(contractor(["/srv/work/acme"]), {"config": {"additionalDirectories": ["/home/carol"]}})
	deny_of(doc) == {"contractors work under /srv/work only: /home/carol is not"}
}

# An SDK app's session.create as the app sent it, workingDirectories added.
# SDK apps act as the [sdk] principal, a token one: no claims, no contractor.
test_sdk_apps_are_not_contractors if {
	doc := {
		"point": "session",
		"principal": "sdk-apps",
		"roles": ["observe", "participate"],
		"claims": {},
		"client": {"id": null, "kind": "sdk"},
		"session": null,
		"config": {"model": "gpt-4.1", "workingDirectory": "/tmp/x", "workingDirectories": ["/tmp/x"]},
	}
	count(deny_of(doc)) == 0
}
