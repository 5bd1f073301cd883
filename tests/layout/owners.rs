//! Owners a reader holds in a page: no product type has more than
//! [`MAX_METHODS`] inherent methods, nor inherent impls in two files
//! (ARCHITECTURE.md, "Who owns what"). A trait's impl is not counted: it is
//! the trait's shape, not the owner's size. Test files and test items are
//! not read. And no two source files share a name.

use std::collections::{BTreeMap, BTreeSet};

use super::workspace::workspace_sources;

const MAX_METHODS: usize = 30;

/// The inherent methods of each type in `text` (by the type's name): the
/// `fn`s one level inside an `impl Type {` or `impl<..> Type<..> {` block.
fn inherent_methods(text: &str) -> BTreeMap<String, usize> {
    let head = regex::Regex::new(
        r"(?m)^impl(?:<[^>{]*>)?\s+(?:(?:crate|super|self)::(?:\w+::)*)?([A-Z]\w*)(?:<[^>{]*>)?\s*\{",
    )
    .unwrap();
    let method = regex::Regex::new(
        r"(?m)^    (?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s",
    )
    .unwrap();
    let mut out = BTreeMap::new();
    for c in head.captures_iter(text) {
        let start = c.get(0).unwrap().end();
        // The block ends at the first line that is only its closing brace.
        let end = text[start..].find("\n}").map_or(text.len(), |e| start + e);
        let n = method.find_iter(&text[start..end]).count();
        *out.entry(c[1].to_owned()).or_insert(0) += n;
    }
    out
}

#[test]
fn no_owner_is_too_big_or_spread_over_files() {
    let mut methods: BTreeMap<String, usize> = BTreeMap::new();
    let mut files: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for (rel, text) in workspace_sources() {
        if rel.ends_with("_tests.rs") || rel.ends_with("/tests.rs") {
            continue;
        }
        let product = super::product::product(text);
        for (ty, n) in inherent_methods(&product) {
            *methods.entry(ty.clone()).or_insert(0) += n;
            files.entry(ty).or_default().insert(rel);
        }
    }
    let mut wrong = Vec::new();
    for (ty, n) in &methods {
        if *n > MAX_METHODS {
            wrong.push(format!(
                "{ty}: {n} inherent methods (at most {MAX_METHODS})"
            ));
        }
        let in_files = &files[ty];
        if in_files.len() > 1 {
            let list: Vec<&str> = in_files.iter().copied().collect();
            wrong.push(format!("{ty}: inherent impls in {}", list.join(", ")));
        }
    }
    assert!(
        wrong.is_empty(),
        "owners too big or spread over files:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_owner_check_counts_what_it_must() {
    let text = "impl Big {\n    pub fn a(&self) {}\n    pub(super) async fn b(&self) {}\n    fn c() {\n        fn inner() {}\n    }\n}\n\
                impl<'h> View<'h> {\n    pub fn d(&self) {}\n}\n\
                impl std::fmt::Display for Big {\n    fn fmt(&self) {}\n}\n\
                impl super::Big {\n    fn e(&self) {}\n}\n";
    let m = inherent_methods(text);
    assert_eq!(m.get("Big"), Some(&4), "{m:?}");
    assert_eq!(m.get("View"), Some(&1), "{m:?}");
    assert!(
        !m.contains_key("Display") && !m.contains_key("std"),
        "{m:?}"
    );
}

/// One meaning per file name: no two source files of the workspace's crates
/// share a name (a module's `mod.rs`, a crate's `lib.rs` and the binary's
/// `main.rs` aside), so a name alone says which file a reader is in.
#[test]
fn no_two_source_files_share_a_name() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    super::workspace::rust_files(&root.join("src"), &mut files);
    super::workspace::rust_files(&root.join("crates"), &mut files);
    let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        if ["mod.rs", "lib.rs", "main.rs"].contains(&name.as_str()) {
            continue;
        }
        let rel = f.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        by_name.entry(name).or_default().push(rel);
    }
    assert!(files.len() > 100, "read the sources: {}", files.len());
    let twice: Vec<String> = by_name
        .into_iter()
        .filter(|(_, paths)| paths.len() > 1)
        .map(|(name, paths)| format!("{name}: {}", paths.join(", ")))
        .collect();
    assert!(
        twice.is_empty(),
        "source files that share a name:\n{}",
        twice.join("\n")
    );
}
