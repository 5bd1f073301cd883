//! `completions`: file references under the caller's working directories for
//! the path-like word before the cursor (`@src/ma`, `./src/ma`, `src/ma`);
//! anything else completes to an empty list. Each item replaces the word and
//! carries a `resource` attachment with the file's URI.

use ahp_types::commands::CompletionItem;
use ahp_types::state::{MessageAttachment, MessageResourceAttachment};

use super::roots::{FileKind, Roots};
use crate::protocol::uri::file_uri_of;

/// Typed before a word, it asks for file references (advertised in
/// `InitializeResult.completionTriggerCharacters`).
pub(crate) const COMPLETION_TRIGGER: &str = "@";

/// The most items one answer holds.
pub(crate) const MAX_COMPLETIONS: usize = 50;

/// The path-like word before the cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathWord {
    /// What the inserted text starts with (`@`, `./`, `@./` or nothing).
    pub lead: String,
    /// The path typed so far, relative to a working directory.
    pub prefix: String,
    /// The word's range in the text, in UTF-16 code units (AHP's measure).
    pub range: (i64, i64),
}

/// A completion `offset` that is no position in its text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct BadOffset(pub String);

/// The path-like word that ends at `offset` (UTF-16 code units) in `text`,
/// if the word is path-like: it starts with the trigger, or holds a `/`.
/// `Err`: the offset is not a position in the text.
pub(crate) fn path_word(text: &str, offset: i64) -> Result<Option<PathWord>, BadOffset> {
    let bad = || {
        BadOffset(format!(
            "field `offset` ({offset}) is not a position in `text`"
        ))
    };
    let mut units = 0i64;
    let mut end = None;
    for (i, ch) in text.char_indices() {
        if units == offset {
            end = Some(i);
            break;
        }
        units += ch.len_utf16() as i64;
    }
    let end = match end {
        Some(i) => i,
        None if units == offset => text.len(),
        None => return Err(bad()),
    };
    let start = text[..end]
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_whitespace())
        .map_or(0, |(i, c)| i + c.len_utf8());
    let word = &text[start..end];
    let (mut lead, mut rest) = match word.strip_prefix(COMPLETION_TRIGGER) {
        Some(r) => (COMPLETION_TRIGGER.to_owned(), r),
        None if word.contains('/') => (String::new(), word),
        None => return Ok(None),
    };
    if let Some(r) = rest.strip_prefix("./") {
        lead.push_str("./");
        rest = r;
    }
    // Absolute paths and climbing out are not completed.
    if rest.starts_with('/') || rest.split('/').any(|c| c == "..") {
        return Ok(None);
    }
    let range_start = text[..start].encode_utf16().count() as i64;
    Ok(Some(PathWord {
        lead,
        prefix: rest.to_owned(),
        range: (range_start, offset),
    }))
}

/// Completion items for `word`: the entries under each root whose path
/// starts with the prefix (the last part compared without case; hidden
/// ones only when asked for with a leading `.`), directories ending in `/`.
pub(crate) fn complete(roots: &Roots, word: &PathWord) -> Vec<CompletionItem> {
    let (dir, name) = match word.prefix.rfind('/') {
        Some(i) => word.prefix.split_at(i + 1),
        None => ("", word.prefix.as_str()),
    };
    let name = name.to_lowercase();
    let mut items = Vec::new();
    for root in roots.dirs() {
        let base = root.join(dir);
        let Ok(entries) = roots.list(&base) else {
            continue;
        };
        for e in entries {
            if items.len() == MAX_COMPLETIONS {
                return items;
            }
            let hidden = e.name.starts_with('.') && !name.starts_with('.');
            if hidden || !e.name.to_lowercase().starts_with(&name) {
                continue;
            }
            let is_dir = e.kind == FileKind::Directory;
            let rel = format!("{dir}{}", e.name);
            let attachment = MessageResourceAttachment {
                uri: file_uri_of(&base.join(&e.name)),
                display_kind: Some(if is_dir { "directory" } else { "document" }.into()),
                label: rel.clone(),
                range: None,
                meta: None,
                size_hint: None,
                content_type: None,
                nonce: None,
                selection: None,
            };
            items.push(CompletionItem {
                insert_text: format!("{}{rel}{}", word.lead, if is_dir { "/" } else { "" }),
                range_start: Some(word.range.0),
                range_end: Some(word.range.1),
                attachment: MessageAttachment::Resource(attachment),
            });
        }
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// The items as the wire carries them.
    fn complete(roots: &Roots, word: &PathWord) -> Vec<Value> {
        super::complete(roots, word)
            .into_iter()
            .map(|i| serde_json::to_value(i).unwrap())
            .collect()
    }

    fn word(text: &str, offset: i64) -> Option<PathWord> {
        path_word(text, offset).unwrap()
    }

    #[test]
    fn path_like_words() {
        let w = word("look at @src/ma", 15).unwrap();
        assert_eq!(w.lead, "@");
        assert_eq!(w.prefix, "src/ma");
        assert_eq!(w.range, (8, 15));
        let w = word("see ./src/m please", 11).unwrap();
        assert_eq!((w.lead.as_str(), w.prefix.as_str()), ("./", "src/m"));
        assert_eq!(word("@", 1).unwrap().prefix, "");
        assert_eq!(word("hello wor", 9), None);
        assert_eq!(word("@/etc/pa", 8), None);
        assert_eq!(word("@../x", 5), None);
        // UTF-16 offsets: "é" is one unit, "😀" two.
        let w = word("😀 é @R", 7).unwrap();
        assert_eq!((w.prefix.as_str(), w.range), ("R", (5, 7)));
        assert!(path_word("abc", 4).is_err());
        assert!(path_word("😀", 1).is_err(), "inside a surrogate pair");
        assert!(path_word("abc", -1).is_err());
    }

    #[test]
    fn completes_files_under_the_roots() {
        let t = tempfile::tempdir().unwrap();
        let wd = t.path().join("wd");
        std::fs::create_dir_all(wd.join("src")).unwrap();
        std::fs::write(wd.join("src/main.rs"), "").unwrap();
        std::fs::write(wd.join("src/Makefile"), "").unwrap();
        std::fs::write(wd.join("src/.hidden"), "").unwrap();
        std::fs::write(wd.join("README.md"), "").unwrap();
        let roots = Roots::new([wd.clone()]);
        let items = complete(&roots, &word("@src/ma", 7).unwrap());
        let inserts: Vec<&str> = items
            .iter()
            .map(|i| i["insertText"].as_str().unwrap())
            .collect();
        assert_eq!(inserts, vec!["@src/Makefile", "@src/main.rs"]);
        assert_eq!(items[1]["attachment"]["type"], "resource");
        assert_eq!(
            items[1]["attachment"]["uri"],
            file_uri_of(&std::fs::canonicalize(&wd).unwrap().join("src/main.rs"))
        );
        assert_eq!(
            (items[1]["rangeStart"].clone(), items[1]["rangeEnd"].clone()),
            (json!(0), json!(7))
        );
        let top = complete(&roots, &word("@", 1).unwrap());
        let inserts: Vec<&str> = top
            .iter()
            .map(|i| i["insertText"].as_str().unwrap())
            .collect();
        assert_eq!(inserts, vec!["@README.md", "@src/"]);
        let hidden = complete(&roots, &word("@src/.h", 7).unwrap());
        assert_eq!(hidden.len(), 1);
        assert!(complete(&roots, &word("@nope/", 6).unwrap()).is_empty());
    }
}
