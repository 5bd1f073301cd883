//! The product lines of a source file: everything but its test-only items
//! (an item under `#[cfg(test)]`, a test module most often). Each such item
//! is blanked to its end, its line breaks kept, so the code after a test
//! helper is read and a line number still points into the file.

/// `text` with every `#[cfg(test)]` item blanked (line breaks kept).
pub(super) fn product(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while let Some(found) = text[at..].find("#[cfg(test)]") {
        let start = at + found;
        out.push_str(&text[at..start]);
        let end = item_end(bytes, start + "#[cfg(test)]".len());
        out.extend(
            text[start..end]
                .chars()
                .map(|c| if c == '\n' { '\n' } else { ' ' }),
        );
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

/// Where the item that starts at or after `from` ends: after its `;` when
/// it has no body (`mod x;`, a `use`), else after the brace closing its
/// first block. Strings, characters and comments are skipped, so a brace
/// inside them does not count.
fn item_end(b: &[u8], from: usize) -> usize {
    let mut depth = 0usize;
    let mut i = from;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = find(b, i + 2, b"*/").map_or(b.len(), |e| e + 2);
                continue;
            }
            b'r' if raw_string_at(b, i).is_some() => {
                i = raw_string_at(b, i).unwrap_or(b.len());
                continue;
            }
            b'"' => {
                i = string_end(b, i + 1);
                continue;
            }
            b'\'' => {
                i = char_end(b, i);
                continue;
            }
            b'{' => depth += 1,
            b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            b';' if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    b.len()
}

fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    (from..b.len().saturating_sub(needle.len() - 1)).find(|&i| b[i..].starts_with(needle))
}

/// After the closing quote of a string whose text starts at `i`.
fn string_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// After a raw string `r#"..."#` that starts at `i`, if one does (and
/// `r` is not the end of an identifier).
fn raw_string_at(b: &[u8], i: usize) -> Option<usize> {
    if i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') {
        return None;
    }
    let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
    if b.get(i + 1 + hashes) != Some(&b'"') {
        return None;
    }
    let mut close = vec![b'"'];
    close.extend(std::iter::repeat_n(b'#', hashes));
    find(b, i + 2 + hashes, &close).map(|e| e + close.len())
}

/// After a character literal at `i` (`'{'`, `'\''`); a lifetime (`'a`) is
/// passed over as one character.
fn char_end(b: &[u8], i: usize) -> usize {
    match (b.get(i + 1), b.get(i + 2), b.get(i + 3)) {
        (Some(b'\\'), _, _) => find(b, i + 3, b"'").map_or(b.len(), |e| e + 1),
        (Some(_), Some(b'\''), _) => i + 3,
        _ => i + 1,
    }
}

#[test]
fn the_product_is_what_follows_a_test_helper_too() {
    let text = "fn a() {}\n#[cfg(test)]\nfn helper() { let s = \"}\"; let c = '{'; }\nfn b() -> Result<u8, String> {}\n#[cfg(test)]\nmod tests {\n    // }\n    fn t() { let r = r#\"{\"#; }\n}\nfn c() {}\n";
    let p = product(text);
    assert!(
        p.contains("fn a()") && p.contains("fn b()") && p.contains("fn c()"),
        "{p}"
    );
    assert!(!p.contains("helper") && !p.contains("fn t()"), "{p}");
    assert_eq!(p.lines().count(), text.lines().count(), "line breaks kept");
    assert_eq!(
        product("#[cfg(test)]\nmod tests;\nfn x() {}"),
        "            \n          \nfn x() {}"
    );
}
