//! The YAML subset customization frontmatter uses, parsed by hand (no YAML
//! dependency for a dozen keys): one mapping of keys at the left margin to
//! scalars (plain, single- or double-quoted, `|`/`>` blocks, plain ones
//! continued on indented lines), flow lists `[a, "b"]` and block lists
//! `- a`. Nested mappings (`metadata:` with indented keys, `{...}`, lists of
//! mappings) are recognised and skipped, never a failure: no field read
//! from these files is nested.
//!
//! Lenient where YAML is strict and the meaning is plain (`description: Use
//! when: x` is one string): what the bridge writes for the runtime is
//! regenerated from the parsed values, quoted, so the runtime never sees
//! the leniency.

/// One value of the mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    /// Empty, `~` or `null`.
    Null,
    /// A scalar; `plain` when unquoted (only a plain `true` is a boolean).
    Scalar {
        text: String,
        plain: bool,
    },
    List(Vec<String>),
    /// A nested mapping or a list of them: skipped.
    Nested,
}

/// The top-level keys, in file order.
pub(crate) type Mapping = Vec<(String, Value)>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {fault}")]
pub(crate) struct YamlError {
    /// 1-based, counted within the frontmatter.
    pub line: usize,
    pub fault: YamlFault,
}

/// What is wrong on a line, as the parser found it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum YamlFault {
    #[error("an indented line where a key was expected")]
    IndentedKey,
    #[error("expected ':' after the quoted key")]
    NoColonAfterQuotedKey,
    #[error("expected `key: value`")]
    NoKey,
    #[error("a list item where a key was expected")]
    ListItemForKey,
    #[error("the key {0:?} is given twice")]
    KeyTwice(String),
    #[error("text after the closing quote: {0:?}")]
    TextAfterQuote(String),
    #[error("a backslash at the end of the line")]
    TrailingBackslash,
    #[error("the quote {0} is never closed")]
    UnclosedQuote(char),
    #[error("a bad escape \\{0}{1}")]
    BadEscape(char, String),
    #[error("an unknown escape \\{0}")]
    UnknownEscape(char),
    #[error("a list `[` that is never closed")]
    UnclosedList,
    #[error("expected ',' in the list before {0:?}")]
    NoComma(String),
    #[error("a block scalar header {0:?} this parser does not read")]
    BlockHeader(String),
}

/// The mapping `text` holds.
pub(crate) fn parse(text: &str) -> Result<Mapping, YamlError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Mapping = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let line = lines[at];
        if is_blank_or_comment(line) {
            at += 1;
            continue;
        }
        let fail = |fault| YamlError {
            line: at + 1,
            fault,
        };
        if line.starts_with([' ', '\t']) {
            return Err(fail(YamlFault::IndentedKey));
        }
        let (key, rest) = split_key(line).map_err(fail)?;
        if out.iter().any(|(k, _)| *k == key) {
            return Err(fail(YamlFault::KeyTwice(key)));
        }
        let (value, used) = value(rest, &lines[at + 1..]).map_err(fail)?;
        out.push((key, value));
        at += 1 + used;
    }
    Ok(out)
}

fn is_blank_or_comment(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

fn is_indented(line: &str) -> bool {
    line.starts_with([' ', '\t'])
}

fn is_list_item(line: &str) -> bool {
    let t = line.trim_start();
    t == "-" || t.starts_with("- ")
}

/// `key: rest` split, the key unquoted.
fn split_key(line: &str) -> Result<(String, &str), YamlFault> {
    if let Some(q @ ('"' | '\'')) = line.chars().next() {
        let (key, after) = quoted(line, q)?;
        let rest = after
            .trim_start()
            .strip_prefix(':')
            .ok_or(YamlFault::NoColonAfterQuotedKey)?;
        return Ok((key, rest));
    }
    let sep = line
        .match_indices(':')
        .map(|(i, _)| i)
        .find(|&i| line[i + 1..].is_empty() || line[i + 1..].starts_with([' ', '\t']))
        .ok_or(YamlFault::NoKey)?;
    let key = line[..sep].trim_end();
    if key.starts_with("- ") || key == "-" {
        return Err(YamlFault::ListItemForKey);
    }
    Ok((key.to_owned(), &line[sep + 1..]))
}

/// The value starting with `rest` on the key's line, and how many of the
/// `following` lines it took.
fn value(rest: &str, following: &[&str]) -> Result<(Value, usize), YamlFault> {
    let rest = rest.trim();
    match rest.chars().next() {
        None | Some('#') => Ok(block(following)),
        Some('|' | '>') => block_scalar(rest, following),
        Some('[') => flow_list(rest, following),
        Some('{') => Ok((Value::Nested, continuation(following).len())),
        Some(q @ ('"' | '\'')) => quoted_value(rest, q, following),
        Some(_) => Ok(plain(rest, following)),
    }
}

/// The lines after a key with nothing on its line: a block list, a nested
/// mapping, or nothing.
fn block(following: &[&str]) -> (Value, usize) {
    let taken = following
        .iter()
        .take_while(|l| is_blank_or_comment(l) || is_indented(l) || is_list_item(l))
        .count();
    // Blank lines after the block belong to no one; leave them.
    let taken = following[..taken]
        .iter()
        .rposition(|l| !is_blank_or_comment(l))
        .map_or(0, |i| i + 1);
    let body: Vec<&str> = following[..taken]
        .iter()
        .copied()
        .filter(|l| !is_blank_or_comment(l))
        .collect();
    let Some(first) = body.first() else {
        return (Value::Null, taken);
    };
    if !is_list_item(first) {
        return (Value::Nested, taken);
    }
    let indent = first.len() - first.trim_start().len();
    let mut items = Vec::new();
    for line in body {
        let here = line.len() - line.trim_start().len();
        let item = line.trim_start().strip_prefix('-').map(str::trim);
        match item {
            Some(text) if here == indent && is_list_item(line) => match scalar_item(text) {
                Some(text) => items.push(text),
                None => return (Value::Nested, taken),
            },
            _ => return (Value::Nested, taken),
        }
    }
    (Value::List(items), taken)
}

/// One block-list item as a string; `None` for a mapping in a list.
fn scalar_item(text: &str) -> Option<String> {
    match text.chars().next() {
        Some(q @ ('"' | '\'')) => quoted(text, q).ok().map(|(s, _)| s),
        Some('[' | '{') => None,
        _ if split_key(text).is_ok() && !text.contains("://") => None,
        _ => Some(strip_comment(text).to_owned()),
    }
}

/// The indented lines that continue a value.
fn continuation<'a>(following: &[&'a str]) -> Vec<&'a str> {
    following
        .iter()
        .take_while(|l| is_indented(l) && !l.trim().is_empty())
        .copied()
        .collect()
}

fn strip_comment(text: &str) -> &str {
    let cut = text
        .match_indices('#')
        .map(|(i, _)| i)
        .find(|&i| i == 0 || text[..i].ends_with([' ', '\t']))
        .unwrap_or(text.len());
    text[..cut].trim_end()
}

/// A plain scalar, folded over its indented continuation lines.
fn plain(rest: &str, following: &[&str]) -> (Value, usize) {
    let more = continuation(following);
    let mut text = strip_comment(rest).to_owned();
    for line in &more {
        text.push(' ');
        text.push_str(strip_comment(line.trim()));
    }
    let value = match text.as_str() {
        "~" | "null" | "Null" | "NULL" => Value::Null,
        _ => Value::Scalar { text, plain: true },
    };
    (value, more.len())
}

/// A quoted scalar, on one line or folded over indented lines.
fn quoted_value(rest: &str, q: char, following: &[&str]) -> Result<(Value, usize), YamlFault> {
    let mut joined = rest.to_owned();
    let mut used = 0;
    // A quote left open continues on the next indented lines, folded.
    while quoted(&joined, q).is_err() && used < following.len() && is_indented(following[used]) {
        joined.push(' ');
        joined.push_str(following[used].trim());
        used += 1;
    }
    let (text, after) = quoted(&joined, q)?;
    if !strip_comment(after.trim()).is_empty() {
        return Err(YamlFault::TextAfterQuote(after.trim().to_owned()));
    }
    Ok((Value::Scalar { text, plain: false }, used))
}

/// The string quoted at the start of `s` (which starts with `q`), and what
/// follows the closing quote.
fn quoted(s: &str, q: char) -> Result<(String, &str), YamlFault> {
    let mut out = String::new();
    let mut chars = s.char_indices().skip(1).peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\'' if q == '\'' && chars.peek().map(|&(_, n)| n) == Some('\'') => {
                chars.next();
                out.push('\'');
            }
            c if c == q => return Ok((out, &s[i + c.len_utf8()..])),
            '\\' if q == '"' => {
                let (_, e) = chars.next().ok_or(YamlFault::TrailingBackslash)?;
                out.push(unescape(e, &mut chars)?);
            }
            c => out.push(c),
        }
    }
    Err(YamlFault::UnclosedQuote(q))
}

fn unescape(e: char, chars: &mut impl Iterator<Item = (usize, char)>) -> Result<char, YamlFault> {
    let hex = |chars: &mut dyn Iterator<Item = (usize, char)>, n: usize| {
        let digits: String = chars.take(n).map(|(_, c)| c).collect();
        u32::from_str_radix(&digits, 16)
            .ok()
            .filter(|_| digits.len() == n)
            .and_then(char::from_u32)
            .ok_or(YamlFault::BadEscape(e, digits))
    };
    Ok(match e {
        'n' => '\n',
        't' => '\t',
        'r' => '\r',
        '0' => '\0',
        'a' => '\u{7}',
        'b' => '\u{8}',
        'e' => '\u{1b}',
        ' ' | '"' | '\\' | '/' => e,
        'x' => hex(chars, 2)?,
        'u' => hex(chars, 4)?,
        'U' => hex(chars, 8)?,
        _ => return Err(YamlFault::UnknownEscape(e)),
    })
}

/// `[a, "b", 'c']`, possibly over several lines.
fn flow_list(rest: &str, following: &[&str]) -> Result<(Value, usize), YamlFault> {
    let mut joined = strip_comment(rest).to_owned();
    let mut used = 0;
    while !joined.ends_with(']') && used < following.len() && is_indented(following[used]) {
        joined.push(' ');
        joined.push_str(strip_comment(following[used].trim()));
        used += 1;
    }
    let inner = joined
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .ok_or(YamlFault::UnclosedList)?;
    if inner.contains(['[', '{']) {
        return Ok((Value::Nested, used));
    }
    Ok((Value::List(flow_items(inner)?), used))
}

/// The comma-separated items of a flow list, quotes respected.
fn flow_items(inner: &str) -> Result<Vec<String>, YamlFault> {
    let mut items = Vec::new();
    let mut rest = inner.trim_start();
    while !rest.is_empty() {
        let (item, after) = match rest.chars().next() {
            Some(q @ ('"' | '\'')) => quoted(rest, q)?,
            _ => {
                let end = rest.find(',').unwrap_or(rest.len());
                (rest[..end].trim().to_owned(), &rest[end..])
            }
        };
        if !item.is_empty() {
            items.push(item);
        }
        let after = after.trim_start();
        rest = match after.strip_prefix(',') {
            Some(r) => r.trim_start(),
            None if after.is_empty() => after,
            None => return Err(YamlFault::NoComma(after.to_owned())),
        };
    }
    Ok(items)
}

/// A `|` (literal) or `>` (folded) block scalar.
fn block_scalar(header: &str, following: &[&str]) -> Result<(Value, usize), YamlFault> {
    let head = strip_comment(header);
    let (literal, chomp) = (head.starts_with('|'), &head[1..]);
    if !chomp
        .chars()
        .all(|c| matches!(c, '+' | '-') || c.is_ascii_digit())
    {
        return Err(YamlFault::BlockHeader(head.to_owned()));
    }
    let taken = following
        .iter()
        .take_while(|l| l.trim().is_empty() || is_indented(l))
        .count();
    let lines = &following[..taken];
    let indent = lines
        .iter()
        .find(|l| !l.trim().is_empty())
        .map_or(0, |l| l.len() - l.trim_start().len());
    let body: Vec<&str> = lines
        .iter()
        .map(|l| l.get(indent..).unwrap_or(""))
        .collect();
    let mut text = if literal {
        body.join("\n")
    } else {
        fold(&body)
    };
    let kept = text.trim_end_matches('\n').len();
    match (chomp.contains('-'), chomp.contains('+')) {
        (true, _) => text.truncate(kept),
        (_, true) => text.push('\n'),
        _ => {
            text.truncate(kept);
            text.push('\n');
        }
    }
    Ok((Value::Scalar { text, plain: false }, taken))
}

/// Folded lines: joined by spaces, a blank line a line break.
fn fold(lines: &[&str]) -> String {
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        if line.is_empty() {
            out.push('\n');
        } else {
            let after_text = i > 0 && !lines[i - 1].is_empty();
            if after_text {
                out.push(' ');
            }
            out.push_str(line);
        }
    }
    out
}

#[cfg(test)]
#[path = "yaml_tests.rs"]
mod tests;
