//! The documents stay true to the tree: every source file is named in one
//! of them (ARCHITECTURE.md, README.md, docs/), so a newcomer can find what
//! each file is for, and a new file cannot go unexplained.

use std::path::Path;

use crate::support::files_with_ext as files;

/// The text of every document a newcomer reads.
fn documents(root: &Path) -> String {
    let mut docs = vec![root.join("ARCHITECTURE.md"), root.join("README.md")];
    files(&root.join("docs"), "md", &mut docs);
    docs.iter()
        .map(|d| std::fs::read_to_string(d).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Source files (Rust, and the web console's modules) no document names.
fn unnamed(root: &Path, text: &str) -> Vec<String> {
    let mut sources = Vec::new();
    files(&root.join("src"), "rs", &mut sources);
    files(&root.join("crates"), "rs", &mut sources);
    files(&root.join("console"), "js", &mut sources);
    sources
        .iter()
        .map(|f| {
            f.strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/")
        })
        .filter(|rel| !text.contains(rel.as_str()))
        .collect()
}

#[test]
fn every_source_file_is_named_in_a_document() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let missing = unnamed(root, &documents(root));
    assert!(
        missing.is_empty(),
        "source files named in no document (ARCHITECTURE.md, README.md, docs/):\n{}",
        missing.join("\n")
    );
}

#[test]
fn a_file_named_nowhere_is_caught() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let docs = documents(root).replace("crates/bridge/src/bridge/bridged_sessions.rs", "");
    assert_eq!(
        unnamed(root, &docs),
        vec!["crates/bridge/src/bridge/bridged_sessions.rs".to_string()]
    );
}

/// The example input of each decision point that docs/policy.md shows is
/// the one the strict check evaluates every policy on: the same documents.
#[test]
fn the_policy_pages_example_inputs_are_the_strict_checks() {
    use ahp_bridge_join::policy::examples;
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/policy.md"))
            .unwrap();
    let shown: Vec<serde_json::Value> = page
        .split("```json\n")
        .skip(1)
        .filter_map(|block| block.split("\n```").next())
        .filter_map(|text| serde_json::from_str(text).ok())
        .collect();
    let mut count = 0;
    for (point, example) in examples::all() {
        assert!(
            shown.contains(example),
            "docs/policy.md does not show the {point} example the check uses:\n{example:#}"
        );
        count += 1;
    }
    assert_eq!(count, 7, "each point's examples");
}
