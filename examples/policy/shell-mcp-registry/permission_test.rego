package ahp.permission_test

registry := {
	"workdir_prefixes": ["/srv/work"],
	"url_hosts": ["github.com"],
}

shell(text) := {
	"point": "permission",
	"principal": "corp:alice",
	"roles": ["observe", "participate"],
	"claims": {"sub": "alice", "groups": ["staff"]},
	"client": {"id": "ide-alice-1", "kind": "ahp"},
	"session": "ahp-session:/x1",
	"request": {
		"kind": "shell",
		"toolCallId": "call_1",
		"intention": "Clean up",
		"fullCommandText": text,
	},
}

deny_of(text) := d if {
	d := data.ahp.permission.deny with input as shell(text) with data.registry as registry
}

test_a_relative_rm_is_fine if {
	count(deny_of("rm -rf build/ target")) == 0
}

test_rm_under_the_working_directory_is_fine if {
	count(deny_of("rm -rf /srv/work/app/build")) == 0
	count(deny_of(`rm -f "/srv/work/app/a b.txt"`)) == 0
}

test_commands_without_rm_are_fine if {
	count(deny_of("ls -la /etc && cat /etc/hosts")) == 0
	count(deny_of("rmdir /tmp/x; docker run --rm -v /:/host alpine true")) == 0
}

test_rm_outside_is_denied if {
	deny_of("rm -rf /etc") == {"shell: rm /etc: outside the working directories"}
}

test_a_sibling_of_the_prefix_is_outside if {
	deny_of("rm -rf /srv/workshop") == {"shell: rm /srv/workshop: outside the working directories"}
}

test_dot_dot_is_outside if {
	deny_of("rm -rf ../other") == {"shell: rm ../other: outside the working directories"}
	deny_of("rm -rf /srv/work/../../etc") == {"shell: rm /srv/work/../../etc: outside the working directories"}
}

test_home_and_variables_are_unknown if {
	deny_of("rm -rf ~/.ssh") == {"shell: rm ~/.ssh: outside the working directories"}
	deny_of("rm -rf $HOME") == {"shell: rm $HOME: outside the working directories"}
}

test_rm_in_any_shape if {
	deny_of("/bin/rm -f /var/log/syslog") == {"shell: rm /var/log/syslog: outside the working directories"}
	deny_of("sudo rm /boot/vmlinuz") == {"shell: rm /boot/vmlinuz: outside the working directories"}
	deny_of(`bash -c "rm -rf /opt"`) == {"shell: rm /opt: outside the working directories"}
	deny_of("make clean && rm -f /tmp/cache") == {"shell: rm /tmp/cache: outside the working directories"}
}

test_each_bad_path_is_named if {
	deny_of("rm -f a /tmp/x /srv/work/ok /etc/y") == {
		"shell: rm /tmp/x: outside the working directories",
		"shell: rm /etc/y: outside the working directories",
	}
}

# A cd moves where a relative rm deletes.
test_cd_out_then_rm_is_denied if {
	deny_of("cd / && rm -rf etc") == {"shell: cd /: outside the working directories"}
	deny_of("cd && rm -rf .cache") == {"shell: cd ~: outside the working directories"}
}

test_cd_without_rm_is_fine if {
	count(deny_of("cd /etc && cat hosts")) == 0
}

# A request of another kind, or without the field, is not this rule's.
test_other_kinds_are_not_shell if {
	write := object.union(shell("x"), {"request": {"kind": "write", "fileName": "/etc/passwd"}})
	count(data.ahp.permission.deny) == 0 with input as write with data.registry as registry
	count(data.ahp.permission.deny) == 0 with input as {"request": {"kind": "shell"}} with data.registry as registry
}

url(u) := {"point": "permission", "request": {"kind": "url", "url": u, "intention": "Read the docs"}}

warn_of(u) := w if {
	w := data.ahp.permission.warn with input as url(u) with data.registry as registry
}

test_listed_url_host_is_quiet if {
	count(warn_of("https://github.com/github/copilot-sdk")) == 0
}

test_unlisted_url_host_warns_and_is_not_denied if {
	warn_of("https://Example.NET:8443/x?y=1") == {"url: example.net is not a listed host"}
	count(data.ahp.permission.deny) == 0 with input as url("https://example.net/") with data.registry as registry
}

test_user_info_does_not_hide_the_url_host if {
	warn_of("https://github.com@evil.example/") == {"url: evil.example is not a listed host"}
}

test_a_url_without_a_host_warns if {
	warn_of("about:blank") == {"url: (no host) is not a listed host"}
}
