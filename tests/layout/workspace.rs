//! The workspace as the layout rules read it: every crate's sources as one
//! tree, and each crate's dependencies from its manifest.

use std::path::{Path, PathBuf};

/// The workspace's crates whose sources sit in the old single crate's tree:
/// each crate's `src/` and the module path it had there (`""` for the
/// crate root's own modules). Their files are read as that tree's, with
/// their paths rewritten back ([`as_one_tree`]), so the layer table, the
/// signature rule and the import graph span the crate boundaries.
const CRATES: &[(&str, &str)] = &[
    ("src", ""),
    ("crates/base/src", ""),
    ("crates/audit/src", "audit"),
];

/// A file of crate `prefix` as the one tree sees it: `crate::` is that
/// crate's module, and another crate's name is `crate::`, since every crate
/// the crates name sits at the tree's root (the bottom, `ahp_bridge_base`).
pub(crate) fn as_one_tree(prefix: &str, text: &str) -> String {
    if prefix.is_empty() {
        return text.to_owned();
    }
    text.replace("crate::", &format!("crate::{prefix}::"))
        .replace("ahp_bridge_base::", "crate::")
}

/// Every Rust source of the workspace, by its path in the one tree
/// (`audit/log.rs` for crates/audit/src/log.rs, `audit/mod.rs` for its
/// lib.rs), with its text as that tree reads it.
pub(crate) fn workspace_sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for (dir, prefix) in CRATES {
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
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
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
/// workspace and on no AHP crate; the audit log on the bottom only; the
/// binary's crate on both.
#[test]
fn the_crate_graph_follows_the_layers() {
    let ahp = |d: &Vec<String>| d.iter().any(|n| n == "ahp" || n.starts_with("ahp-types"));
    let ours = |d: &Vec<String>| -> Vec<String> {
        d.iter()
            .filter(|n| n.starts_with("ahp-bridge-"))
            .cloned()
            .collect()
    };
    let base = dependencies("crates/base/Cargo.toml");
    assert!(base.len() > 5, "read the manifest: {base:?}");
    assert_eq!(ours(&base), Vec::<String>::new());
    assert!(!ahp(&base), "{base:?}");
    let audit = dependencies("crates/audit/Cargo.toml");
    assert_eq!(ours(&audit), vec!["ahp-bridge-base".to_owned()]);
    assert!(!ahp(&audit), "{audit:?}");
    let main = dependencies("Cargo.toml");
    assert_eq!(
        ours(&main),
        vec!["ahp-bridge-base".to_owned(), "ahp-bridge-audit".to_owned()]
    );
}
