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
    ("crates/bridge/src", "", "ahp_bridge_join"),
    ("crates/base/src", "", "ahp_bridge_base"),
    ("crates/jsonrpc/src", "jsonrpc", "ahp_bridge_jsonrpc"),
    ("crates/store/src", "store", "ahp_bridge_store"),
    ("crates/policy/src", "policy", "ahp_bridge_policy"),
    ("crates/telemetry/src", "telemetry", "ahp_bridge_telemetry"),
    ("crates/audit/src", "audit", "ahp_bridge_audit"),
    ("crates/runtime/src", "runtime", "ahp_bridge_runtime"),
    ("crates/transform/src", "transform", "ahp_bridge_transform"),
    ("crates/customize/src", "customize", "ahp_bridge_customize"),
    ("crates/ahp/src", "ahp", "ahp_bridge_host"),
    ("crates/upstream/src", "upstream", "ahp_bridge_upstream"),
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
        // `use ahp_bridge_jsonrpc as jsonrpc;` names the module whole.
        text = text.replace(
            &format!("use {name} as "),
            &format!("use {} as ", to.trim_end_matches(':')),
        );
    }
    text
}

/// Every Rust source of the workspace, by its path in the one tree
/// (`audit/log.rs` for crates/audit/src/log.rs, `audit/mod.rs` for its
/// lib.rs), with its text as that tree reads it. Read once for all the
/// layout tests.
pub(crate) fn workspace_sources() -> &'static [(String, String)] {
    static SOURCES: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    SOURCES.get_or_init(read_workspace_sources)
}

fn read_workspace_sources() -> Vec<(String, String)> {
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
    let doc: toml::Table = text.parse().expect("a manifest");
    doc.get("dependencies")
        .and_then(toml::Value::as_table)
        .expect("a [dependencies] table")
        .keys()
        .cloned()
        .collect()
}

/// The crates keep the layers: the bottom depends on no crate of the
/// workspace, each layer above it only on those below it (ARCHITECTURE.md,
/// "The crates"), none but the north side and the upstream client on an AHP crate and none on
/// `anyhow` (the join neither); the join (crates/bridge) on all, the binary on the join alone. The lists are whole, so no
/// `[dependencies]` names `ahp-bridge-testkit`: it is for tests only. Each
/// edge is one the crate's code uses (it names the crate).
#[test]
fn the_crate_graph_follows_the_layers() {
    let ahp = |d: &Vec<String>| d.iter().any(|n| n == "ahp" || n.starts_with("ahp-types"));
    // By name: a manifest's table has no order.
    let ours = |d: &Vec<String>| -> Vec<String> {
        let mut ours: Vec<String> = d
            .iter()
            .filter(|n| n.starts_with("ahp-bridge-"))
            .cloned()
            .collect();
        ours.sort();
        ours
    };
    let layers: &[(&str, &[&str])] = &[
        ("base", &[]),
        ("jsonrpc", &[]),
        ("store", &[]),
        ("telemetry", &["ahp-bridge-base"]),
        ("policy", &["ahp-bridge-base", "ahp-bridge-telemetry"]),
        (
            "audit",
            &[
                "ahp-bridge-base",
                "ahp-bridge-policy",
                "ahp-bridge-telemetry",
            ],
        ),
        (
            "runtime",
            &[
                "ahp-bridge-base",
                "ahp-bridge-jsonrpc",
                "ahp-bridge-telemetry",
            ],
        ),
        ("customize", &[]),
        (
            "transform",
            &[
                "ahp-bridge-audit",
                "ahp-bridge-base",
                "ahp-bridge-jsonrpc",
                "ahp-bridge-policy",
                "ahp-bridge-telemetry",
            ],
        ),
        (
            "ahp",
            &[
                "ahp-bridge-base",
                "ahp-bridge-jsonrpc",
                "ahp-bridge-policy",
                "ahp-bridge-store",
                "ahp-bridge-telemetry",
            ],
        ),
        ("upstream", &["ahp-bridge-base", "ahp-bridge-telemetry"]),
    ];
    for (name, may) in layers {
        let deps = dependencies(&format!("crates/{name}/Cargo.toml"));
        assert!(deps.len() > 3, "read the manifest of {name}: {deps:?}");
        assert_eq!(ours(&deps), *may, "{name}");
        // An edge the code does not use is none: each is named in the crate.
        let mut files = Vec::new();
        rust_files(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("crates/{name}/src")),
            &mut files,
        );
        for dep in ours(&deps) {
            let used = dep.replace('-', "_");
            assert!(
                files.iter().any(|f| read(f).contains(&used)),
                "crates/{name} depends on {dep} and never names {used}"
            );
        }
        // The north side and the upstream client are the layers that speak
        // AHP: one as a host, the other as a client of the runtime's host.
        let speaks_ahp = *name == "ahp" || *name == "upstream";
        assert_eq!(ahp(&deps), speaks_ahp, "{name}: {deps:?}");
        // A library crate returns its own error types; anyhow is the binary's.
        assert!(
            !deps.iter().any(|n| n == "anyhow"),
            "{name} depends on anyhow"
        );
    }
    // The join names every layer; the binary names the join alone.
    let join = dependencies("crates/bridge/Cargo.toml");
    assert_eq!(
        ours(&join),
        [
            "ahp-bridge-audit",
            "ahp-bridge-base",
            "ahp-bridge-customize",
            "ahp-bridge-host",
            "ahp-bridge-jsonrpc",
            "ahp-bridge-policy",
            "ahp-bridge-runtime",
            "ahp-bridge-store",
            "ahp-bridge-telemetry",
            "ahp-bridge-transform",
            "ahp-bridge-upstream",
        ]
    );
    // The join is a library too: its errors are its own types, with their
    // causes; the binary alone prints a chain (with anyhow).
    assert!(
        !join.iter().any(|n| n == "anyhow"),
        "the join depends on anyhow"
    );
    let main = dependencies("Cargo.toml");
    assert_eq!(ours(&main), ["ahp-bridge-join"]);
}

/// The root package is the binary and nothing else: argument parsing, start
/// and signals in `src/main.rs`; every owner (the bridge, the SDK gate, the
/// admin listener, the demo, the reload) is the join's (`crates/bridge`).
#[test]
fn the_binary_is_only_its_main() {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["main.rs"]);
    let root: toml::Table = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .parse()
        .unwrap();
    assert!(root.get("lib").is_none(), "the root package has a [lib]");
}

/// The lines in `text` (before its tests module) shaped `name: T,` where
/// `T` owns a `Config` (`Config`, `Arc<Config>`, `Option<Arc<crate::config::Config>>`,
/// ...): a struct field that holds the whole config, or a parameter on a
/// line of its own that takes it to keep. A reference (`&Config`) is a
/// reading, not a holding.
fn fields_holding_config(text: &str) -> Vec<String> {
    let tests = regex::Regex::new(r"#\[cfg\(test\)\]\s*mod\s").unwrap();
    let field = regex::Regex::new(r"^(pub(\([^)]*\))?\s+)?[a-z_][a-z0-9_]*:\s*([^=;]*),$").unwrap();
    let config = regex::Regex::new(r"\bConfig\b").unwrap();
    let code = tests.split(text).next().unwrap_or_default();
    code.lines()
        .map(str::trim)
        .filter(|l| {
            field
                .captures(l)
                .and_then(|c| c.get(3))
                .is_some_and(|ty| !ty.as_str().starts_with('&') && config.is_match(ty.as_str()))
        })
        .map(String::from)
        .collect()
}

/// The entry points (`src/`): they read the file and build the components
/// from it, and a reload is checked against the config in force. And the
/// view that gives a reload its keys (`crates/base/src/config/`: a borrow
/// of one config, no copy of it). Paths in the one tree.
const MAY_HOLD_CONFIG: &[&str] = &[
    "main.rs",
    "app.rs",
    "run.rs",
    "reload.rs",
    "config/reloadable.rs",
];

/// Each component is built from its own settings and keeps them: only the
/// entry points hold the whole `Config`.
#[test]
fn no_component_holds_the_whole_config() {
    let mut held = Vec::new();
    let mut read_files = 0;
    for (rel, text) in workspace_sources() {
        if MAY_HOLD_CONFIG.contains(&rel.as_str()) || rel.ends_with("_tests.rs") {
            continue;
        }
        read_files += 1;
        for line in fields_holding_config(text) {
            held.push(format!("{rel}: {line}"));
        }
    }
    assert!(read_files > 100, "read the crates ({read_files} files)");
    assert!(held.is_empty(), "{}", held.join("\n"));
}

#[test]
fn the_config_field_check_sees_what_it_must() {
    let held = "struct Bridge {\n    cfg: Arc<Config>,\n    pub(crate) config: Config,\n    \
                kept: Option<Arc<crate::config::Config>>,\n    settings: HostSettings,\n    \
                runtime: RuntimeConfig,\n    view: &'a Config,\n}\nfn f(cfg: &Config) {}\n\
                let cfg: Config = x;\n";
    assert_eq!(
        fields_holding_config(held),
        [
            "cfg: Arc<Config>,",
            "pub(crate) config: Config,",
            "kept: Option<Arc<crate::config::Config>>,"
        ]
    );
    let in_tests =
        "struct A;\n#[cfg(test)]\nmod tests {\n    struct B {\n        cfg: Config,\n    }\n}\n";
    assert!(fields_holding_config(in_tests).is_empty());
    // A test-only item elsewhere does not end the file's checked part.
    let after_helper = "#[cfg(test)]\nfn helper() {}\nstruct C {\n    cfg: Config,\n}\n";
    assert_eq!(fields_holding_config(after_helper), ["cfg: Config,"]);
}

/// Every package, the binary's included, takes the workspace's lints, and
/// those deny a `pub` item no other crate can name.
#[test]
fn every_package_inherits_the_workspace_lints() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace: toml::Table = read(&root.join("Cargo.toml")).parse().unwrap();
    let lint = workspace["workspace"]["lints"]["rust"]["unreachable_pub"].as_str();
    assert_eq!(lint, Some("deny"));
    let mut manifests = vec![root.join("Cargo.toml")];
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        manifests.push(entry.unwrap().path().join("Cargo.toml"));
    }
    for m in manifests {
        let doc: toml::Table = read(&m).parse().unwrap();
        let inherits = doc.get("lints").and_then(|l| l.get("workspace"));
        assert_eq!(
            inherits,
            Some(&toml::Value::Boolean(true)),
            "{}",
            m.display()
        );
    }
}

/// One meaning per name: no two product types of the workspace (a struct,
/// an enum, a type alias or a trait, at a file's top level) share a name,
/// so a reader who meets one knows which it is. Test files and test items
/// are not read.
#[test]
fn no_two_types_share_a_name() {
    let decl = regex::Regex::new(
        r"(?m)^(?:pub(?:\([a-z:]+\))?\s+)?(?:struct|enum|type|trait)\s+([A-Z]\w*)",
    )
    .unwrap();
    let mut seen: std::collections::BTreeMap<String, Vec<&str>> = Default::default();
    for (rel, text) in workspace_sources() {
        if rel.ends_with("_tests.rs") || rel.ends_with("/tests.rs") {
            continue;
        }
        let product = super::product::product(text);
        for c in decl.captures_iter(&product) {
            seen.entry(c[1].to_owned()).or_default().push(rel);
        }
    }
    let twice: Vec<String> = seen
        .into_iter()
        .filter(|(_, files)| files.len() > 1)
        .map(|(name, files)| format!("{name}: {}", files.join(", ")))
        .collect();
    assert!(
        twice.is_empty(),
        "types that share a name:\n{}",
        twice.join("\n")
    );
}

/// Errors keep their kind: no product function, field or alias has a
/// `Result` whose error is a bare `String` (a type of its own says what
/// went wrong, and `#[source]` keeps the cause). Test files and test items
/// are not read.
#[test]
fn no_result_has_a_string_for_its_error() {
    let mut found = Vec::new();
    for (rel, text) in workspace_sources() {
        if rel.ends_with("_tests.rs") || rel.ends_with("/tests.rs") {
            continue;
        }
        let product = super::product::product(text);
        for line in string_errors(&product) {
            found.push(format!("{rel}:{line}"));
        }
    }
    assert!(
        found.is_empty(),
        "a Result with a String error:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_string_error_check_sees_what_it_must() {
    let text = "fn a() -> Result<(), String> {}\nfn b() -> Result<BTreeMap<String, String>, String> {}\n\
                fn c() -> Result<String, Error> {}\nfn d(x: Result<Vec<(u8, String)>, io::Error>) {}\n\
                type E = Result<\n    u8,\n    String,\n>;\nResult<Box<dyn Fn() -> u8>, String>\nio::Result<String>\n";
    assert_eq!(string_errors(text), [1, 2, 5, 9]);
}

/// The lines of `text` where a `Result<..>`'s last type argument is `String`.
fn string_errors(text: &str) -> Vec<usize> {
    let mut lines = Vec::new();
    for (at, _) in text.match_indices("Result<") {
        let preceded = text[..at].chars().next_back();
        if preceded.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `IoResult<`, `my_Result<`
        }
        // The type arguments at the top level, split at their commas.
        let (mut depth, mut args, mut before) = (1, vec![String::new()], ' ');
        for c in text[at + "Result<".len()..].chars() {
            match c {
                '<' | '(' | '[' => depth += 1,
                '>' if before == '-' => {} // `Fn() -> T`
                '>' | ')' | ']' => depth -= 1,
                _ => {}
            }
            before = c;
            if depth == 0 {
                break;
            }
            if depth == 1 && c == ',' {
                args.push(String::new());
            } else if let Some(arg) = args.last_mut() {
                arg.push(c);
            }
        }
        // A trailing comma leaves an empty last argument; `io::Result<String>`
        // has one argument, and no error type of its own to name.
        args.retain(|a| !a.trim().is_empty());
        if args.len() == 2 && args[1].trim() == "String" {
            lines.push(text[..at].matches('\n').count() + 1);
        }
    }
    lines
}

/// The bottom is split by concern: no crate holds two of the config, the
/// JSON-RPC layer, the policy, the store and the telemetry (a crate is its
/// folder's concern, plus any of them it declares as a module).
#[test]
fn each_bottom_concern_is_a_crate_of_its_own() {
    const CONCERNS: [&str; 5] = ["config", "jsonrpc", "policy", "store", "telemetry"];
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let declared = regex::Regex::new(r"(?m)^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;").unwrap();
    let mut checked = 0;
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        let Ok(lib) = std::fs::read_to_string(dir.join("src/lib.rs")) else {
            continue;
        };
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut held: Vec<String> = declared
            .captures_iter(&super::product::product(&lib))
            .map(|c| c[1].to_owned())
            .chain(std::iter::once(name.clone()))
            .filter(|m| CONCERNS.contains(&m.as_str()))
            .collect();
        held.dedup();
        assert!(held.len() <= 1, "crates/{name} holds {held:?}");
        checked += 1;
    }
    assert!(checked >= 10, "read {checked} crates");
}

/// Each crate's modules are private behind its `lib.rs` (`mod x; pub use
/// x::{...}`), so `unreachable_pub` sees every item that no other crate
/// names. Base's two concerns are facades of private files themselves.
#[test]
fn each_crate_keeps_its_modules_behind_its_lib() {
    let public_modules: &[(&str, &[&str])] = &[("base", &["config", "sections"])];
    let mut found = Vec::new();
    for (dir, _, _) in &CRATES[1..] {
        let lib = read(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(dir)
                .join("lib.rs"),
        );
        let name = dir.trim_start_matches("crates/").trim_end_matches("/src");
        let allowed = public_modules
            .iter()
            .find(|(c, _)| *c == name)
            .map_or(&[][..], |(_, m)| *m);
        for line in lib.lines() {
            let Some(m) = line.strip_prefix("pub mod ") else {
                continue;
            };
            let m = m.trim_end_matches(';').trim();
            if !allowed.contains(&m) {
                found.push(format!("crates/{name}: pub mod {m}"));
            }
        }
    }
    assert!(found.is_empty(), "public modules:\n{}", found.join("\n"));
}

/// The profiles compile the same code: nothing is under
/// `cfg(debug_assertions)`. CI builds only `dev` (scripts/test.sh), so a
/// `release` or `dist` build must not meet code the tests never compiled.
#[test]
fn no_product_code_depends_on_the_profile() {
    let mut found = Vec::new();
    for (rel, text) in workspace_sources() {
        for (n, line) in super::product::product(text).lines().enumerate() {
            if line.contains("debug_assertions") {
                found.push(format!("{rel}:{}", n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "cfg(debug_assertions) in:\n{}",
        found.join("\n")
    );
}
