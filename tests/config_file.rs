//! `config/bridge.toml` names every key the config accepts, under the table
//! it belongs to (set, or commented out with its default or an example): the
//! keys each table takes are read off the config's own refusal of an unknown
//! key, so a key added to a config type and not to the file fails here.

use std::collections::{BTreeMap, BTreeSet};

use ahp_bridge_join::config::Config;

/// The tables of the config, and a header the file may use for each (a
/// map's entries, `ID` or `NAME`, by any name the file gives them: every
/// `[policy.sections.*]` of the file counts for `policy.sections.ID`).
const TABLES: &[(&str, &str)] = &[
    ("server", "[server]"),
    ("server.tls", "[server.tls]"),
    ("principals", "[[principals]]"),
    ("jwt", "[[jwt]]"),
    ("runtime", "[runtime]"),
    ("runtime.provider", "[runtime.provider]"),
    ("runtime.ahp", "[runtime.ahp]"),
    ("policy", "[policy]"),
    ("policy.overrides.ID", "[policy.overrides.tone]"),
    ("policy.sections.ID", "[policy.sections.tone]"),
    ("policy.customizations", "[policy.customizations]"),
    (
        "customizations.directories",
        "[[customizations.directories]]",
    ),
    ("customizations.plugins", "[[customizations.plugins]]"),
    (
        "customizations.mcp_servers.NAME",
        "[customizations.mcp_servers.echo]",
    ),
    ("customizations", "[customizations]"),
    ("sdk", "[sdk]"),
    ("sdk.tls", "[sdk.tls]"),
    ("audit", "[audit]"),
    ("audit.syslog", "[audit.syslog]"),
    ("state", "[state]"),
    ("admin", "[admin]"),
    ("admin.tls", "[admin.tls]"),
    ("log", "[log]"),
    ("telemetry", "[telemetry]"),
];

/// The keys a table accepts: those its refusal of an unknown key lists.
fn accepted(header: &str) -> BTreeSet<String> {
    let text = format!("{header}\nzz_not_a_key = 1\n");
    let e = Config::parse(&text)
        .expect_err("an unknown key is refused")
        .0;
    let listed = e
        .split_once("expected")
        .unwrap_or_else(|| panic!("{header}: {e}"))
        .1;
    listed
        .split('`')
        .skip(1)
        .step_by(2)
        .map(String::from)
        .collect()
}

/// The keys the file names under each table header, set or commented out.
fn named() -> BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/bridge.toml"))
        .unwrap();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut table = String::new();
    for line in text.lines() {
        let bare = line.trim_start_matches('#').trim();
        if bare.starts_with('[') {
            let end = bare.rfind(']').map_or(bare.len(), |i| i + 1);
            table = bare[..end].to_owned();
            out.entry(table.clone()).or_default();
            continue;
        }
        let Some((key, _)) = bare.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            out.entry(table.clone()).or_default().insert(key.to_owned());
        }
    }
    out
}

/// What the file names for table `name` (whose example header is
/// `header`): its keys, and the sub-tables it writes as headers of their
/// own (`[server.tls]` names [server]'s `tls`).
fn in_file(
    named: &BTreeMap<String, BTreeSet<String>>,
    name: &str,
    header: &str,
) -> BTreeSet<String> {
    let is_map = name.ends_with(".ID") || name.ends_with(".NAME");
    let table = name.trim_end_matches(".ID").trim_end_matches(".NAME");
    let mut keys = BTreeSet::new();
    for (h, ks) in named {
        let inner = h.trim_start_matches('[').trim_end_matches(']');
        let entry = inner
            .strip_prefix(table)
            .and_then(|r| r.strip_prefix('.'))
            .is_some_and(|id| !id.contains('.'));
        if h == header || (is_map && entry) {
            keys.extend(ks.iter().cloned());
        }
        if let (false, Some(sub)) = (is_map, inner.strip_prefix(&format!("{table}."))) {
            keys.insert(sub.split('.').next().unwrap_or_default().to_owned());
        }
    }
    keys
}

#[test]
fn the_example_config_names_every_key_under_its_table() {
    let named = named();
    let mut missing = Vec::new();
    for (name, header) in TABLES {
        let keys = accepted(header);
        assert!(!keys.is_empty(), "{name}: no keys read off the refusal");
        let in_file = in_file(&named, name, header);
        for k in keys.difference(&in_file) {
            missing.push(format!("{header} {k}"));
        }
    }
    assert!(
        missing.is_empty(),
        "config/bridge.toml does not name these keys:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_check_sees_a_key_left_out() {
    // The refusal lists what a table takes, so a table's key not in the
    // file is caught: `listen` is [server]'s, never [log]'s.
    assert!(accepted("[server]").contains("listen"));
    assert!(!named()["[log]"].contains("listen"));
}
