//! The workspace as the layout rules read it: every crate's sources as one
//! tree, and each crate's dependencies from its manifest.

use std::path::{Path, PathBuf};

/// The workspace's crates whose sources sit in the old single crate's tree:
/// each crate's `src/`, the module path it had there (`""` for the crate
/// root's own modules) and the crate's name. Their files are read as that
/// tree's, with their paths rewritten back ([`as_one_tree`]), so the layer
/// table, the signature rule and the import graph span the crate boundaries.
const CRATES: &[(&str, &str, &str)] = &[
    ("src", "", "ahp_copilot_bridge"),
    ("crates/base/src", "", "ahp_bridge_base"),
    ("crates/audit/src", "audit", "ahp_bridge_audit"),
    ("crates/runtime/src", "runtime", "ahp_bridge_runtime"),
    ("crates/transform/src", "transform", "ahp_bridge_transform"),
    ("crates/customize/src", "customize", "ahp_bridge_customize"),
    ("crates/ahp/src", "ahp", "ahp_bridge_host"),
];

/// A file of the crate at module `prefix` as the one tree sees it:
/// `crate::` is that crate's module, and another crate's name is the path of
/// its module (`ahp_bridge_audit::log` is `crate::audit::log`; the bottom's
/// modules sit at the root).
pub(crate) fn as_one_tree(prefix: &str, text: &str) -> String {
    let mut text = if prefix.is_empty() {
        text.to_owned()
    } else {
        text.replace("crate::", &format!("crate::{prefix}::"))
    };
    for (_, module, name) in &CRATES[1..] {
        let to = if module.is_empty() {
            "crate::".to_owned()
        } else {
            format!("crate::{module}::")
        };
        text = text.replace(&format!("{name}::"), &to);
    }
    text
}

/// Every Rust source of the workspace, by its path in the one tree
/// (`audit/log.rs` for crates/audit/src/log.rs, `audit/mod.rs` for its
/// lib.rs), with its text as that tree reads it.
pub(crate) fn workspace_sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for (dir, prefix, _) in CRATES {
        let src = root.join(dir);
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for f in files {
            let rel = f
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            if !prefix.is_empty() && rel == "lib.rs" {
                out.push((format!("{prefix}/mod.rs"), as_one_tree(prefix, &read(&f))));
                continue;
            }
            if *dir != "src" && rel == "lib.rs" {
                continue; // the bottom's root only declares its modules
            }
            let rel = if prefix.is_empty() {
                rel
            } else {
                format!("{prefix}/{rel}")
            };
            out.push((rel, as_one_tree(prefix, &read(&f))));
        }
    }
    out
}

pub(crate) fn read(f: &Path) -> String {
    std::fs::read_to_string(f).unwrap()
}

pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    crate::support::files_with_ext(dir, "rs", out);
}

/// Every file under tests/ runs: with `autotests = false` a file no tier
/// names (`#[path]` in tests/tiers/) and no `[[test]]` lists would compile
/// into nothing and never run, silently.
#[test]
fn every_test_file_runs_in_a_tier_or_alone() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut named = read(&root.join("Cargo.toml"));
    let mut tiers = Vec::new();
    rust_files(&root.join("tests/tiers"), &mut tiers);
    for t in &tiers {
        named.push_str(&read(t));
    }
    let mut unrun = Vec::new();
    for entry in std::fs::read_dir(root.join("tests")).unwrap() {
        let p = entry.unwrap().path();
        let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if !name.ends_with(".rs") {
            continue;
        }
        let in_tier = named.contains(&format!("#[path = \"../{name}\"]"));
        let alone = named.contains(&format!("path = \"tests/{name}\""));
        if !in_tier && !alone {
            unrun.push(name.to_owned());
        }
    }
    assert!(tiers.len() >= 3, "read the tiers");
    assert!(
        unrun.is_empty(),
        "test files no tier or [[test]] runs: {unrun:?}"
    );
}

/// The `[dependencies]` of a manifest, by name.
fn dependencies(manifest: &str) -> Vec<String> {
    let text = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join(manifest));
    let section = text
        .split("\n[dependencies]\n")
        .nth(1)
        .expect("a [dependencies] section");
    section
        .lines()
        .take_while(|l| !l.starts_with('['))
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| l.split(['.', '=']).next().unwrap().trim().to_owned())
        .collect()
}

/// The crates keep the layers: the bottom depends on no crate of the
/// workspace, each layer above it only on those below it (ARCHITECTURE.md,
/// "The crates"), none but the north side on an AHP crate and none on
/// `anyhow`; the binary's crate on all.
#[test]
fn the_crate_graph_follows_the_layers() {
    let ahp = |d: &Vec<String>| d.iter().any(|n| n == "ahp" || n.starts_with("ahp-types"));
    let ours = |d: &Vec<String>| -> Vec<String> {
        d.iter()
            .filter(|n| n.starts_with("ahp-bridge-"))
            .cloned()
            .collect()
    };
    let layers: &[(&str, &[&str])] = &[
        ("base", &[]),
        ("audit", &["ahp-bridge-base"]),
        ("runtime", &["ahp-bridge-base"]),
        ("customize", &["ahp-bridge-base"]),
        ("transform", &["ahp-bridge-base", "ahp-bridge-audit"]),
        ("ahp", &["ahp-bridge-base"]),
    ];
    for (name, may) in layers {
        let deps = dependencies(&format!("crates/{name}/Cargo.toml"));
        assert!(deps.len() > 3, "read the manifest of {name}: {deps:?}");
        assert_eq!(ours(&deps), *may, "{name}");
        // The north side is the one layer that speaks AHP.
        assert_eq!(ahp(&deps), *name == "ahp", "{name}: {deps:?}");
        // A library crate returns its own error types; anyhow is the binary's.
        assert!(
            !deps.iter().any(|n| n == "anyhow"),
            "{name} depends on anyhow"
        );
    }
    let main = dependencies("Cargo.toml");
    assert_eq!(
        ours(&main),
        [
            "ahp-bridge-base",
            "ahp-bridge-audit",
            "ahp-bridge-runtime",
            "ahp-bridge-transform",
            "ahp-bridge-customize",
            "ahp-bridge-host"
        ]
    );
}

/// The lines in `text` (before its tests) shaped `name: Config,` (or an
/// `Arc`, a `Weak` or a reference of it): a struct field that holds the
/// whole config, or a parameter on its own line that takes it to keep.
fn fields_holding_config(text: &str) -> Vec<String> {
    const HELD: [&str; 4] = ["Config,", "Arc<Config>,", "&'a Config,", "Weak<Config>,"];
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    code.lines()
        .map(str::trim)
        .filter(|l| {
            let Some((name, ty)) = l.split_once(": ") else {
                return false;
            };
            // A field is a name, after its visibility if any.
            let name = match name.split_once(") ") {
                Some((vis, rest)) if vis.starts_with("pub(") => rest,
                _ => name.strip_prefix("pub ").unwrap_or(name),
            };
            let is_field =
                !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_');
            is_field && HELD.contains(&ty)
        })
        .map(String::from)
        .collect()
}

/// Each component is built from its own settings and keeps them: only the
/// binary's entry points (`src/` outside `bridge/`) hold the whole
/// `Config`, to build the components and to check a reload against.
#[test]
fn no_component_holds_the_whole_config() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut held = Vec::new();
    let mut read_files = 0;
    for (dir, _, _) in CRATES {
        let src = root.join(dir);
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for f in files {
            let rel = f.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let binary = *dir == "src" && !rel.starts_with("src/bridge/");
            if binary || rel.ends_with("_tests.rs") {
                continue;
            }
            read_files += 1;
            for line in fields_holding_config(&read(&f)) {
                held.push(format!("{rel}: {line}"));
            }
        }
    }
    assert!(read_files > 100, "read the crates ({read_files} files)");
    assert!(held.is_empty(), "{}", held.join("\n"));
}

#[test]
fn the_config_field_check_sees_what_it_must() {
    let held = "struct Bridge {\n    cfg: Arc<Config>,\n    pub(crate) config: Config,\n    settings: HostSettings,\n}\nfn f(cfg: &Config) {}\nlet cfg: Config = x;\n";
    assert_eq!(
        fields_holding_config(held),
        ["cfg: Arc<Config>,", "pub(crate) config: Config,"]
    );
    let in_tests =
        "struct A;\n#[cfg(test)]\nmod tests {\n    struct B {\n        cfg: Config,\n    }\n}\n";
    assert!(fields_holding_config(in_tests).is_empty());
}
