//! The dependency rule, the no-circle rule and the file-size rule of
//! ARCHITECTURE.md, checked on the source tree: a forbidden import, two files
//! that import each other (directly or in a circle) or a file over 600 lines
//! fails here.

#[path = "layout/host_api.rs"]
mod host_api;
#[path = "layout/imports.rs"]
mod imports;
#[path = "layout/owners.rs"]
mod owners;
#[path = "layout/product.rs"]
mod product;
#[path = "layout/workspace.rs"]
mod workspace;

use std::path::Path;

use workspace::{rust_files, workspace_sources};

const MAX_LINES: usize = 600;

/// The layers of the crate, by path under `src/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layer {
    /// `config/`, `jsonrpc/`, `policy/`, `sections.rs`, `store/`, `telemetry/`: at the bottom, used by all.
    Bottom,
    /// `transform/`: the transform core, pure.
    Transform,
    /// `audit/`: the audit log, pure.
    Audit,
    /// `runtime/`: the south side, the runtime's wire only.
    Runtime,
    /// `ahp/`: the north side, AHP only.
    Ahp,
    /// `upstream/`: the AHP client of the runtime's own AHP host.
    Upstream,
    /// `customize/`: customization packages read, vetted and materialized, pure.
    Customize,
    /// `bridge/`: the only place north, south and the transform core meet.
    Bridge,
    /// `main.rs`, `run.rs`, `app.rs`, `start_error.rs`, `lib.rs`, `reload.rs`, `demo/`: entry points that wire the layers.
    Entry,
}

fn layer_of(rel: &str) -> Layer {
    let top = rel.split('/').next().unwrap_or_default();
    match top {
        "config" | "config.rs" | "jsonrpc" | "policy" | "sections.rs" | "store" | "telemetry" => {
            Layer::Bottom
        }
        "transform" => Layer::Transform,
        "audit" => Layer::Audit,
        "runtime" => Layer::Runtime,
        "ahp" => Layer::Ahp,
        "bridge" => Layer::Bridge,
        "customize" => Layer::Customize,
        "upstream" => Layer::Upstream,
        _ => Layer::Entry,
    }
}

/// The crate modules a layer may name (`crate::X`), and whether it may use
/// the AHP crates.
fn allowed(layer: Layer) -> (&'static [&'static str], bool) {
    const ALL: &[&str] = &[
        "admin",
        "ahp",
        "app",
        "audit",
        "bridge",
        "run",
        "config",
        "customize",
        "demo",
        "jsonrpc",
        "policy",
        "policy_cli",
        "reload",
        "runtime",
        "sections",
        "start_error",
        "store",
        "telemetry",
        "transform",
        "upstream",
    ];
    match layer {
        Layer::Bottom => (
            &[
                "config",
                "jsonrpc",
                "policy",
                "sections",
                "store",
                "telemetry",
            ],
            false,
        ),
        Layer::Transform => (
            &[
                "transform",
                "audit",
                "config",
                "jsonrpc",
                "policy",
                "sections",
                "telemetry",
            ],
            false,
        ),
        Layer::Audit => (&["audit", "config", "policy", "telemetry"], false),
        Layer::Runtime => (&["runtime", "config", "jsonrpc", "telemetry"], false),
        Layer::Customize => (&["customize", "config", "telemetry", "sections"], false),
        Layer::Upstream => (&["upstream", "config", "jsonrpc", "telemetry"], true),
        Layer::Ahp => (
            &[
                "ahp",
                "config",
                "jsonrpc",
                "policy",
                "sections",
                "store",
                "telemetry",
            ],
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
                "customize",
                "upstream",
                "jsonrpc",
                "policy",
                "sections",
                "telemetry",
            ],
            true,
        ),
        Layer::Entry => (ALL, true),
    }
}

/// What the join's `lib.rs` re-exports (`pub use x::{a, b};`), which the
/// entry points name too; read from the file, so the two cannot drift.
fn join_facade() -> &'static [String] {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        let lib = workspace::read(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/bridge/src/lib.rs"),
        );
        let code: String = lib
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        code.split(';')
            .filter_map(|stmt| stmt.trim().strip_prefix("pub use "))
            .filter(|path| !path.contains(" as "))
            .flat_map(|path| {
                let items = path.rsplit_once("::").map_or(path, |(_, items)| items);
                items.trim_matches(|c| c == '{' || c == '}').split(',')
            })
            .map(|name| name.trim().to_owned())
            .filter(|name| !name.is_empty())
            .collect()
    })
}

/// Every rule the file at `rel` (path under `src/`) breaks.
fn violations(rel: &str, text: &str) -> Vec<String> {
    let layer = layer_of(rel);
    let (modules, ahp_ok) = allowed(layer);
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        for used in crate_paths(code) {
            let facade = layer == Layer::Entry && join_facade().contains(&used);
            if !modules.contains(&used.as_str()) && !facade {
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
        if layer != Layer::Ahp && builds_action_from_json(code) {
            out.push(format!(
                "src/{rel}:{}: an AHP action built from a JSON literal; build a typed StateAction",
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

/// A JSON literal that names an AHP action type (`"type": "chat/delta"`).
fn builds_action_from_json(code: &str) -> bool {
    const CHANNELS: [&str; 5] = ["chat/", "session/", "root/", "terminal/", "changeset/"];
    code.match_indices("\"type\"").any(|(i, m)| {
        let rest = code[i + m.len()..].trim_start();
        let Some(value) = rest.strip_prefix(':').map(str::trim_start) else {
            return false;
        };
        CHANNELS
            .iter()
            .any(|c| value.starts_with(&format!("\"{c}")))
    })
}

/// The signature of every `fn` in `text` (from `fn` to its body or `;`),
/// with whether it is `pub` and the (0-based) line it starts on.
fn signatures(text: &str) -> Vec<(bool, String, usize)> {
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("fn ") {
        let before = &rest[..at];
        let is_word = before
            .chars()
            .last()
            .is_none_or(|c| c.is_whitespace() || c == '(');
        let after = &rest[at..];
        let end = after.find(['{', ';']).unwrap_or(after.len());
        if is_word {
            let line_start = before.rfind('\n').map_or(0, |i| i + 1);
            let public = before[line_start..].trim_start().starts_with("pub");
            let line = code[..code.len() - rest.len() + at].matches('\n').count();
            out.push((public, after[..end].to_owned(), line));
        }
        rest = &after[end.min(after.len()).max(1)..];
    }
    out
}

/// The files whose functions are the bridge's seams: the backend the host
/// calls, the clients and audit port the transform core reaches, the router.
const SEAMS: &[&str] = &["ahp/backend.rs", "transform/mod.rs", "transform/router.rs"];

/// Every rule a file's signatures break: `serde_json::Value` across a
/// seam, `Result<_, String>` in a `pub` signature (errors have names).
fn signature_violations(rel: &str, text: &str) -> Vec<String> {
    // Test code builds what a client would send: the rules are for the product.
    let text = product::product(text);
    let mut out = Vec::new();
    for (public, sig, _) in signatures(&text) {
        let name = sig
            .split(['(', '<'])
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned();
        if SEAMS.contains(&rel) && (sig.contains("Value") || sig.contains("serde_json")) {
            out.push(format!(
                "src/{rel}: `{name}` carries serde_json::Value across a seam"
            ));
        }
        let compact: String = sig.split_whitespace().collect();
        if public && compact.contains("Result<") && compact.contains(",String>") {
            out.push(format!(
                "src/{rel}: `{name}` returns Result<_, String> in a pub signature"
            ));
        }
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

#[test]
fn the_dependency_rule_holds() {
    let files = workspace_sources();
    assert!(files.len() > 20, "found the sources");
    assert!(
        files.iter().any(|(rel, _)| rel == "audit/log.rs"),
        "read the crates"
    );
    let mut broken = Vec::new();
    for (rel, text) in files {
        broken.extend(violations(rel, text));
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn seams_carry_typed_values_and_errors_have_names() {
    let mut broken = Vec::new();
    for (rel, text) in workspace_sources() {
        broken.extend(signature_violations(rel, text));
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_signature_checker_catches_what_it_must() {
    let bad = [
        (
            "ahp/backend.rs",
            "fn phase(&self, session: &str, v: Value);",
        ),
        (
            "transform/mod.rs",
            "fn ask(&self, p: serde_json::Value) -> AskFuture;",
        ),
        (
            "transform/router.rs",
            "pub async fn route(&self) -> Value {",
        ),
        (
            "config/mod.rs",
            "pub fn parse(text: &str) -> Result<Self, String> {",
        ),
        (
            "x.rs",
            "pub(crate) fn f(\n    a: u8,\n) -> Result<u8,\n String> {",
        ),
    ];
    for (rel, text) in bad {
        assert!(
            !signature_violations(rel, text).is_empty(),
            "{rel}: {text} must be refused"
        );
    }
    let good = [
        (
            "bridge/mod.rs",
            "fn f(v: Value) -> Result<u8, String> { 1 }",
        ),
        (
            "transform/router.rs",
            "pub fn route(&self) -> Sections { x } // Value",
        ),
        ("x.rs", "pub fn f() -> Result<(u64, String), Named> {"),
    ];
    for (rel, text) in good {
        assert_eq!(
            signature_violations(rel, text),
            Vec::<String>::new(),
            "{rel}: {text}"
        );
    }
}

#[test]
fn no_source_file_is_over_600_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "crates", "tests", "benches"] {
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
        ("transform/router.rs", "use crate::ahp::Host;"),
        (
            "transform/x.rs",
            "use crate::{config::Config, bridge::Bridge};",
        ),
        ("audit/log.rs", "let r = crate::runtime::Ping::NAME;"),
        ("runtime/x.rs", "use ahp_types::actions::StateAction;"),
        ("runtime/x.rs", r#"json!({"type": "chat/delta"})"#),
        ("ahp/host.rs", "use crate::transform::policy::OptIn;"),
        ("config.rs", "use crate::transform::policy::Policy;"),
        ("jsonrpc/mod.rs", "use crate::ahp::uri::ROOT_URI;"),
        ("customize/package.rs", "use crate::bridge::Bridge;"),
        ("customize/x.rs", "use crate::runtime::events;"),
        ("customize/x.rs", "use ahp_types::state::Customization;"),
        ("ahp/x.rs", "use crate::customize::ChildKind;"),
        (
            "bridge/turn.rs",
            r#"vec![json!({"type": "session/inputNeededRemoved", "id": id})]"#,
        ),
        (
            "app.rs",
            r#"let a = json!({ "type" : "root/configChanged" });"#,
        ),
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
        ("bridge/turn.rs", "use crate::{ahp::Host, runtime::events};"),
        (
            "transform/router.rs",
            "use crate::audit::TransformRecord; // crate::ahp in a comment",
        ),
        ("config.rs", "use crate::sections::SECTION_CATALOGUE;"),
        (
            "customize/x.rs",
            "use crate::{config::Config, telemetry::Escaped};",
        ),
        ("bridge/x.rs", "use crate::customize::Package;"),
        ("ahp/cmd/x.rs", r#"json!({"type": "chat/turnStarted"})"#),
        (
            "bridge/binding.rs",
            r#"json!({"type": "object", "properties": {}})"#,
        ),
    ];
    for (rel, line) in good {
        assert_eq!(violations(rel, line), Vec::<String>::new(), "{rel}: {line}");
    }
}

/// Every source file of the workspace, by its path in the one tree, with
/// its text as that tree reads it.
fn sources() -> imports::Files {
    workspace_sources().iter().cloned().collect()
}

#[test]
fn no_two_files_import_each_other_directly_or_in_a_circle() {
    let files = sources();
    let graph = imports::graph(&files);
    let edges: usize = graph.values().map(|to| to.len()).sum();
    assert!(edges > 300, "the graph was read: {edges} imports");
    let circles = imports::circles(&graph);
    let shown: Vec<String> = circles
        .iter()
        .map(|c| {
            let inner: Vec<String> = c
                .iter()
                .flat_map(|a| {
                    graph[a]
                        .iter()
                        .filter(|b| c.contains(b))
                        .map(move |b| format!("{a} -> {b}"))
                })
                .collect();
            inner.join(", ")
        })
        .collect();
    assert!(
        circles.is_empty(),
        "files in a circle:\n{}",
        shown.join("\n")
    );
}

#[test]
fn the_import_graph_sees_what_it_must() {
    let files = |pairs: &[(&str, &str)]| -> imports::Files {
        pairs
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect()
    };
    let circled = |f: &imports::Files| imports::circles(&imports::graph(f));
    // Siblings through `super::`, one of them in a group.
    let siblings = files(&[
        ("a/mod.rs", "mod b;\nmod c;"),
        ("a/b.rs", "use super::c::X;"),
        ("a/c.rs", "use super::{b::Y, d};"),
    ]);
    assert_eq!(
        circled(&siblings),
        vec![vec!["a/b.rs".to_owned(), "a/c.rs".to_owned()]]
    );
    // A child naming its parent's type, the parent calling the child inline.
    let parent = files(&[
        (
            "h/mod.rs",
            "mod api;\npub struct Host;\nfn f() { api::go() }",
        ),
        ("h/api.rs", "impl super::Host { }\npub fn go() {}"),
    ]);
    assert_eq!(circled(&parent).len(), 1);
    // Through crate:: paths, three files round.
    let round = files(&[
        ("x.rs", "use crate::y::A;"),
        ("y.rs", "fn f() { crate::z::g() }"),
        ("z/mod.rs", "use crate::x;\nfn g() { x::h() }"),
    ]);
    assert_eq!(circled(&round)[0].len(), 3);
    // Not circles: a facade re-export, a unit test, a comment, one way.
    let fine = files(&[
        ("p/mod.rs", "mod q;\npub use q::Q;\npub struct P;"),
        ("p/q.rs", "use super::P;\npub struct Q;"),
        (
            "r.rs",
            "// crate::s::S\n#[cfg(test)]\nmod tests { use crate::s::S; }",
        ),
        ("s.rs", "use crate::r;\nfn f() { r::g() }"),
    ]);
    assert!(circled(&fine).is_empty(), "{:?}", imports::graph(&fine));
}
