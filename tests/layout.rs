//! The dependency rule and the file-size rule of ARCHITECTURE.md, checked on
//! the source tree: a forbidden import or a file over 600 lines fails here.

use std::path::{Path, PathBuf};

const MAX_LINES: usize = 600;

/// The layers of the crate, by path under `src/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layer {
    /// `config/`, `jsonrpc/`, `policy/`, `sections.rs`, `store/`: at the bottom, used by all.
    Bottom,
    /// `transform/`: the transform core, pure.
    Transform,
    /// `audit/`: the audit log, pure.
    Audit,
    /// `runtime/`: the south side, the runtime's wire only.
    Runtime,
    /// `ahp/`: the north side, AHP only.
    Ahp,
    /// `bridge/`: the only place north, south and the transform core meet.
    Bridge,
    /// `main.rs`, `cli.rs`, `app.rs`, `lib.rs`, `reload.rs`, `demo/`: entry points that wire the layers.
    Entry,
}

fn layer_of(rel: &str) -> Layer {
    let top = rel.split('/').next().unwrap_or_default();
    match top {
        "config" | "config.rs" | "jsonrpc" | "policy" | "sections.rs" | "store" => Layer::Bottom,
        "transform" => Layer::Transform,
        "audit" => Layer::Audit,
        "runtime" => Layer::Runtime,
        "ahp" => Layer::Ahp,
        "bridge" => Layer::Bridge,
        _ => Layer::Entry,
    }
}

/// The crate modules a layer may name (`crate::X`), and whether it may use
/// the AHP crates.
fn allowed(layer: Layer) -> (&'static [&'static str], bool) {
    const ALL: &[&str] = &[
        "ahp",
        "app",
        "audit",
        "bridge",
        "cli",
        "config",
        "demo",
        "jsonrpc",
        "policy",
        "reload",
        "runtime",
        "sections",
        "store",
        "transform",
    ];
    match layer {
        Layer::Bottom => (&["config", "jsonrpc", "policy", "sections", "store"], false),
        Layer::Transform => (
            &[
                "transform",
                "audit",
                "config",
                "jsonrpc",
                "policy",
                "sections",
            ],
            false,
        ),
        Layer::Audit => (&["audit", "config", "policy"], false),
        Layer::Runtime => (&["runtime", "config", "jsonrpc"], false),
        Layer::Ahp => (
            &["ahp", "config", "jsonrpc", "policy", "sections", "store"],
            true,
        ),
        Layer::Bridge => (
            &[
                "bridge",
                "ahp",
                "runtime",
                "transform",
                "audit",
                "config",
                "jsonrpc",
                "policy",
                "sections",
            ],
            true,
        ),
        Layer::Entry => (ALL, true),
    }
}

/// Every rule the file at `rel` (path under `src/`) breaks.
fn violations(rel: &str, text: &str) -> Vec<String> {
    let layer = layer_of(rel);
    let (modules, ahp_ok) = allowed(layer);
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        for used in crate_paths(code) {
            if !modules.contains(&used.as_str()) {
                out.push(format!(
                    "src/{rel}:{}: {layer:?} may not use crate::{used}",
                    n + 1
                ));
            }
        }
        if !ahp_ok && uses_ahp_crates(code) {
            out.push(format!(
                "src/{rel}:{}: {layer:?} may not use the AHP crates",
                n + 1
            ));
        }
        if layer == Layer::Runtime && code.contains("\"chat/") {
            out.push(format!(
                "src/{rel}:{}: the runtime side builds no AHP chat actions",
                n + 1
            ));
        }
    }
    out
}

/// The first segment of every `crate::X` path on a line, with `use crate::{a, b}` groups.
fn crate_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != "self" {
                    out.push(name);
                }
            }
        } else {
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
        rest = after;
    }
    out
}

/// `ahp::` or `ahp_types::` as a path of its own (not `crate::ahp::`).
fn uses_ahp_crates(code: &str) -> bool {
    ["ahp::", "ahp_types::"].iter().any(|needle| {
        code.match_indices(needle).any(|(i, _)| {
            let before = &code[..i];
            !before.ends_with("crate::")
                && !before.ends_with("super::")
                && !before
                    .chars()
                    .last()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
        })
    })
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn the_dependency_rule_holds() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 20, "found the sources");
    let mut broken = Vec::new();
    for f in files {
        let rel = f
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        broken.extend(violations(&rel, &std::fs::read_to_string(&f).unwrap()));
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn no_source_file_is_over_600_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "tests", "benches"] {
        rust_files(&root.join(dir), &mut files);
    }
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n > MAX_LINES).then(|| format!("{}: {n} lines", f.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "over {MAX_LINES} lines:\n{}",
        long.join("\n")
    );
}

/// The checker itself: each forbidden shape is caught, the allowed ones pass.
#[test]
fn the_checker_catches_what_it_must() {
    let bad = [
        ("transform/router.rs", "use crate::ahp::host::Host;"),
        (
            "transform/x.rs",
            "use crate::{config::Config, bridge::Bridge};",
        ),
        (
            "audit/log.rs",
            "let r = crate::runtime::wire::method::PING;",
        ),
        ("runtime/x.rs", "use ahp_types::actions::StateAction;"),
        ("runtime/x.rs", r#"json!({"type": "chat/delta"})"#),
        ("ahp/host.rs", "use crate::transform::policy::OptIn;"),
        ("config.rs", "use crate::transform::policy::Policy;"),
        ("jsonrpc/mod.rs", "use crate::ahp::uri::ROOT_URI;"),
    ];
    for (rel, line) in bad {
        assert!(
            !violations(rel, line).is_empty(),
            "{rel}: {line} must be refused"
        );
    }
    let good = [
        (
            "ahp/host.rs",
            "use ahp_types::actions::StateAction; use crate::ahp::uri::ROOT_URI;",
        ),
        (
            "bridge/turn.rs",
            "use crate::{ahp::host::Host, runtime::wire};",
        ),
        (
            "transform/router.rs",
            "use crate::audit::record::TransformRecord; // crate::ahp in a comment",
        ),
        ("config.rs", "use crate::sections::SECTION_CATALOGUE;"),
    ];
    for (rel, line) in good {
        assert_eq!(violations(rel, line), Vec::<String>::new(), "{rel}: {line}");
    }
}
