//! The import graph between the crate's files, read from their text: which
//! file names an item of which other file. ARCHITECTURE.md says no two files
//! import each other, directly or in a circle; `layout.rs` checks it with
//! this graph.
//!
//! An import is any path to an item of another file: `use crate::..`,
//! `use super::..`, `use self::child::..`, `use child::..`, and the same
//! paths inline (`child::f()`, `super::X`, `impl super::Host`). A path is
//! resolved to the longest module prefix that is a file. A `mod.rs` that
//! declares its children and re-exports them (`pub use child::X;`) does not
//! import them by that: the re-export is the module's facade, what the
//! module shows its users (a child may still use its parent's items). Test-only
//! items (each `#[cfg(test)]` item, to its end) are not read: they may see
//! the whole module.

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;

/// Each file (its path under `src/`) and its text.
pub(super) type Files = BTreeMap<String, String>;

/// Each file and the other files it imports.
pub(super) type Graph = BTreeMap<String, BTreeSet<String>>;

/// The module path of the file at `rel` (`ahp/host/mod.rs` is `ahp::host`).
fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The file holding the item at module path `parts`: the longest prefix
/// that is a file.
fn file_of(files: &Files, parts: &[String]) -> Option<String> {
    (1..=parts.len()).rev().find_map(|n| {
        let prefix = parts[..n].join("/");
        [format!("{prefix}.rs"), format!("{prefix}/mod.rs")]
            .into_iter()
            .find(|f| files.contains_key(f))
    })
}

/// The text that counts: no comments, no unit tests.
fn code_of(text: &str) -> String {
    let text = super::product::product(text);
    text.lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// `code` without its facade: the `pub use child::..;` re-exports of a
/// module's own children.
fn without_facade(code: &str) -> String {
    let facade = Regex::new(r"(?s)\bpub(\([^)]*\))?\s+use\s+(\w+)::[^;]*;").unwrap();
    facade
        .replace_all(code, |c: &regex::Captures| {
            if matches!(&c[2], "crate" | "super" | "self") {
                c[0].to_owned()
            } else {
                String::new()
            }
        })
        .into_owned()
}

/// `base` joined with `path` (`a::b`), and with each item of a `{..}` group.
fn with_group(base: &[String], path: &str, group: Option<&str>) -> Vec<Vec<String>> {
    let segs = |p: &str| -> Vec<String> {
        p.split("::")
            .map(|s| s.trim().trim_matches(|c| c == '{' || c == '}').to_owned())
            .filter(|s| !s.is_empty())
            .collect()
    };
    let mut head = base.to_vec();
    head.extend(segs(path));
    let mut out = vec![head.clone()];
    for item in group.unwrap_or_default().split(',') {
        let item = item.split(" as ").next().unwrap_or_default().trim();
        if !item.is_empty() && item != "self" {
            let mut p = head.clone();
            p.extend(segs(item));
            out.push(p);
        }
    }
    out
}

/// The files `rel` imports.
fn imports_of(files: &Files, rel: &str, text: &str) -> BTreeSet<String> {
    let me = module_of(rel);
    let code = without_facade(&code_of(text));
    let mut paths: Vec<Vec<String>> = Vec::new();
    // crate::, super::, self:: paths, in `use` or inline.
    let rooted =
        Regex::new(r"(?s)\b(crate|super|self)((?:::\w+)*)(?:(::\{([^;]*?)\})|(::\*))?").unwrap();
    for c in rooted.captures_iter(&code) {
        if c[2].is_empty() && c.get(3).is_none() && c.get(5).is_none() {
            continue; // `&self`, a word in a string
        }
        let mut segs: Vec<&str> = c[2].split("::").filter(|s| !s.is_empty()).collect();
        let base: Vec<String> = match &c[1] {
            "crate" => vec![],
            "self" => me.clone(),
            _ => {
                let mut base = me[..me.len().saturating_sub(1)].to_vec();
                while segs.first() == Some(&"super") {
                    segs.remove(0);
                    base.pop();
                }
                base
            }
        };
        paths.extend(with_group(
            &base,
            &segs.join("::"),
            c.get(4).map(|m| m.as_str()),
        ));
    }
    // A child module named without a root: `use child::..` or `child::f()`.
    let is_child = |name: &str| {
        let dir = me
            .iter()
            .chain([&name.to_owned()])
            .cloned()
            .collect::<Vec<_>>()
            .join("/");
        files.contains_key(&format!("{dir}.rs")) || files.contains_key(&format!("{dir}/mod.rs"))
    };
    let relative = Regex::new(r"(?s)\buse\s+(\w+)((?:::\w+)*)(::\{([^;]*?)\})?\s*;").unwrap();
    for c in relative.captures_iter(&code) {
        if is_child(&c[1]) {
            let path = format!("{}{}", &c[1], &c[2]);
            paths.extend(with_group(&me, &path, c.get(4).map(|m| m.as_str())));
        }
    }
    let inline = Regex::new(r"(^|[^:\w])(\w+)::(\w+)").unwrap();
    for c in inline.captures_iter(&code) {
        // `mod name { .. }` in this file is no child file.
        if is_child(&c[2]) && !code.contains(&format!("mod {} {{", &c[2])) {
            paths.push(
                me.iter()
                    .cloned()
                    .chain([c[2].to_owned(), c[3].to_owned()])
                    .collect(),
            );
        }
    }
    paths
        .iter()
        .filter_map(|p| file_of(files, p))
        .filter(|f| f != rel)
        .collect()
}

/// Which file imports which.
pub(super) fn graph(files: &Files) -> Graph {
    files
        .iter()
        .map(|(rel, text)| (rel.clone(), imports_of(files, rel, text)))
        .collect()
}

/// The circles: each set of two or more files that reach one another
/// (strongly connected components, Tarjan's algorithm).
pub(super) fn circles(g: &Graph) -> Vec<Vec<String>> {
    struct Walk<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.g.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    self.low.entry(v).and_modify(|l| *l = (*l).min(lw));
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    self.low.entry(v).and_modify(|l| *l = (*l).min(iw));
                }
            }
            if self.low[v] == self.index[v] {
                let mut part = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    part.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if part.len() > 1 {
                    part.sort();
                    self.found.push(part);
                }
            }
        }
    }
    let mut walk = Walk {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in g.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}
