//! Redaction: what a `redact` rule matches is replaced by a numbered
//! placeholder before a client sees a section, and put back into its answer.
//! Pure; tested below.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

/// A placeholder as the client sees it: `[REDACTED#N]`.
fn placeholder(n: u64) -> String {
    format!("[REDACTED#{n}]")
}

/// Anything shaped like a placeholder, with its number.
static PLACEHOLDER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\[REDACTED#([0-9]+)\]").expect("a valid pattern"));

/// What a client is shown of one section, and what each placeholder stands for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redaction {
    pub shown: String,
    /// Placeholder number -> the original text it replaces.
    pub hidden: Vec<(u64, String)>,
}

/// Replaces every match of `patterns` in `text` with a numbered placeholder,
/// numbered from `*next` on (shared by the sections of one request, so a
/// number names one text). Overlapping matches become one placeholder. Text
/// in the original that merely looks like a placeholder is numbered too (it
/// stands for itself), so every placeholder in an answer means one thing.
pub fn redact(text: &str, patterns: &[Regex], next: &mut u64) -> Redaction {
    let mut spans: Vec<Range<usize>> = patterns
        .iter()
        .chain(std::iter::once(&*PLACEHOLDER))
        .flat_map(|re| re.find_iter(text).map(|m| m.range()))
        .filter(|r| !r.is_empty())
        .collect();
    if spans.is_empty() {
        return Redaction {
            shown: text.to_owned(),
            hidden: Vec::new(),
        };
    }
    spans.sort_by_key(|r| (r.start, r.end));
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(spans.len());
    for s in spans {
        match merged.last_mut() {
            Some(last) if s.start < last.end => last.end = last.end.max(s.end),
            _ => merged.push(s),
        }
    }
    let mut out = Redaction::default();
    let mut last = 0;
    for s in merged {
        out.shown.push_str(&text[last..s.start]);
        out.shown.push_str(&placeholder(*next));
        out.hidden.push((*next, text[s.clone()].to_owned()));
        *next += 1;
        last = s.end;
    }
    out.shown.push_str(&text[last..]);
    out
}

/// Why a client's text could not be restored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoreError {
    /// A placeholder this section never sent: the answer is malformed.
    UnknownPlaceholder,
    /// Restored, the text would exceed the limit.
    TooLarge,
}

/// Puts the original text back for every placeholder in `answer`; `hidden`
/// is what this section was sent with. At most `limit` bytes come out.
pub fn restore_redacted(
    answer: &str,
    hidden: &[(u64, String)],
    limit: usize,
) -> Result<String, RestoreError> {
    let mut out = String::with_capacity(answer.len().min(limit));
    let mut last = 0;
    for c in PLACEHOLDER.captures_iter(answer) {
        let whole = c.get(0).expect("group 0 is the match");
        let original = c[1]
            .parse::<u64>()
            .ok()
            .and_then(|n| hidden.iter().find(|(k, _)| *k == n))
            .map(|(_, t)| t)
            .ok_or(RestoreError::UnknownPlaceholder)?;
        out.push_str(&answer[last..whole.start()]);
        out.push_str(original);
        last = whole.end();
        if out.len() > limit {
            return Err(RestoreError::TooLarge);
        }
    }
    out.push_str(&answer[last..]);
    if out.len() > limit {
        return Err(RestoreError::TooLarge);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_bridge_base::config::compile_pattern;

    #[test]
    fn redaction_numbers_matches_and_restores_them() {
        let token = format!("ghp_{}", "A1b2".repeat(9));
        let text = format!("Use {token} to push; mail ops@example.com or {token}.");
        let patterns = vec![
            compile_pattern("ghp_[A-Za-z0-9]{36}").unwrap(),
            compile_pattern(r"[a-z]+@example\.com").unwrap(),
        ];
        let mut next = 7;
        let r = redact(&text, &patterns, &mut next);
        assert_eq!(
            r.shown,
            "Use [REDACTED#7] to push; mail [REDACTED#8] or [REDACTED#9]."
        );
        assert!(!r.shown.contains("ghp_"));
        assert_eq!(next, 10, "numbers continue in the next section");
        // Kept placeholders come back as the original; an append survives.
        let back = restore_redacted(&format!("{} Be brief.", r.shown), &r.hidden, 1 << 20).unwrap();
        assert_eq!(back, format!("{text} Be brief."));
        // A dropped placeholder is just text the client removed.
        assert_eq!(
            restore_redacted("Use nothing.", &r.hidden, 1 << 20).unwrap(),
            "Use nothing."
        );
        // A placeholder never sent is malformed, also one sent for another section.
        assert_eq!(
            restore_redacted("[REDACTED#6]", &r.hidden, 1 << 20),
            Err(RestoreError::UnknownPlaceholder)
        );
        assert_eq!(
            restore_redacted("[REDACTED#99999999999999999999999]", &r.hidden, 1 << 20),
            Err(RestoreError::UnknownPlaceholder)
        );
        // Restoring is bounded in bytes.
        let many = "[REDACTED#7]".repeat(100);
        assert_eq!(
            restore_redacted(&many, &r.hidden, 1000),
            Err(RestoreError::TooLarge)
        );
    }

    #[test]
    fn overlapping_matches_and_lookalikes_are_one_placeholder_each() {
        let patterns = vec![
            compile_pattern("abc").unwrap(),
            compile_pattern("bcd").unwrap(),
        ];
        let mut next = 1;
        let r = redact("xabcdx [REDACTED#1] y", &patterns, &mut next);
        assert_eq!(r.shown, "x[REDACTED#1]x [REDACTED#2] y");
        assert_eq!(
            r.hidden,
            vec![(1, "abcd".into()), (2, "[REDACTED#1]".into())]
        );
        // The look-alike in the original stands for itself.
        assert_eq!(
            restore_redacted(&r.shown, &r.hidden, 100).unwrap(),
            "xabcdx [REDACTED#1] y"
        );
        // Nothing to redact: the text as is, nothing numbered.
        let mut next = 1;
        let r = redact("plain", &patterns, &mut next);
        assert_eq!((r.shown.as_str(), r.hidden.len(), next), ("plain", 0, 1));
    }
}
