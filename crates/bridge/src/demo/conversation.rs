//! Scripted conversations as data: the files in `fixtures/model/`, each
//! `{"description": "...", "replies": [REPLY, ...]}` (see `fixtures/README.md`),
//! parsed into the [`Reply`]s the scripted model queues.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::scripted_reply::Reply;

/// A scripted conversation: the model's replies to successive requests, as
/// a file in `fixtures/model/` holds them:
/// `{"description": "...", "replies": [REPLY, ...]}`, where an entry may add
/// `"times": N` to stand for N copies of itself.
#[derive(Debug, Clone)]
pub struct Conversation {
    pub description: String,
    pub replies: Vec<Reply>,
}

/// A conversation file that cannot be used: the file, and what is wrong
/// (with the index and text of the bad entry when it is one).
#[derive(Debug, thiserror::Error)]
#[error("{file}: {reason}")]
pub struct ConversationError {
    pub file: String,
    pub reason: String,
}

impl Conversation {
    /// Reads and parses the conversation file at `path`.
    pub fn load(path: &Path) -> Result<Self, ConversationError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConversationError {
            file: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Self::parse(&path.display().to_string(), &text)
    }

    /// Parses a conversation; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Self, ConversationError> {
        let fail = |reason: String| ConversationError {
            file: file.to_owned(),
            reason,
        };
        let doc: Value = serde_json::from_str(text).map_err(|e| fail(format!("not JSON: {e}")))?;
        let Value::Object(mut doc) = doc else {
            return Err(fail(
                "expected an object {\"description\": ..., \"replies\": [...]}".into(),
            ));
        };
        let description = match doc.remove("description") {
            Some(Value::String(d)) => d,
            _ => return Err(fail("\"description\" (a string) is missing".into())),
        };
        let entries = match doc.remove("replies") {
            Some(Value::Array(r)) if !r.is_empty() => r,
            _ => return Err(fail("\"replies\" (a non-empty list) is missing".into())),
        };
        if let Some(key) = doc.keys().next() {
            return Err(fail(format!(
                "unknown key {key:?} (expected \"description\" and \"replies\")"
            )));
        }
        let mut replies = Vec::new();
        for (i, entry) in entries.into_iter().enumerate() {
            let (reply, times) = parse_entry(entry.clone())
                .map_err(|e| fail(format!("replies[{i}] {}: {e}", brief(&entry))))?;
            replies.extend(std::iter::repeat_n(reply, times));
        }
        Ok(Self {
            description,
            replies,
        })
    }
}

/// Why a `replies` entry is refused.
#[derive(Debug, thiserror::Error)]
enum ReplyEntryError {
    #[error("expected an object such as {{\"text\": \"...\"}}")]
    NotAnObject,
    #[error("\"times\" must be a whole number from 1, not {0}")]
    BadTimes(Value),
    #[error("expected one key naming the reply: \"text\", \"slow\", \"toolCall\" or \"status\" (and \"times\" if it repeats)")]
    NotOneReply,
    #[error("{0}")]
    Reply(#[source] serde_json::Error),
}

/// One `replies` entry: a [`Reply`] and how many times it stands.
fn parse_entry(entry: Value) -> Result<(Reply, usize), ReplyEntryError> {
    let Value::Object(mut fields) = entry else {
        return Err(ReplyEntryError::NotAnObject);
    };
    let times = match fields.remove("times") {
        None => 1,
        Some(t) => match t.as_u64() {
            Some(n) if n >= 1 => n as usize,
            _ => return Err(ReplyEntryError::BadTimes(t)),
        },
    };
    if fields.len() != 1 {
        return Err(ReplyEntryError::NotOneReply);
    }
    let reply = Reply::deserialize(Value::Object(fields)).map_err(ReplyEntryError::Reply)?;
    Ok((reply, times))
}

/// An entry as errors quote it: its JSON, cut short.
fn brief(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(80) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn a_conversation_file_parses() {
        let c = Conversation::parse(
            "good.json",
            r#"{"description": "every kind of reply",
                "replies": [
                    {"text": "Hi."},
                    {"toolCall": {"name": "bash", "arguments": {"command": "ls"}}},
                    {"toolCall": {"name": "noop"}},
                    {"slow": {"chunks": ["a", "b"], "repeat": 2, "delay": "50ms"}},
                    {"status": 500, "times": 3}
                ]}"#,
        )
        .unwrap();
        assert_eq!(c.description, "every kind of reply");
        assert_eq!(c.replies.len(), 7);
        assert!(matches!(&c.replies[0], Reply::Text(t) if t == "Hi."));
        assert!(
            matches!(&c.replies[1], Reply::ToolCall { name, arguments } if name == "bash" && arguments["command"] == "ls")
        );
        assert!(
            matches!(&c.replies[2], Reply::ToolCall { arguments, .. } if *arguments == json!({}))
        );
        match &c.replies[3] {
            Reply::Slow { chunks, delay } => {
                assert_eq!(chunks, &["a", "b", "a", "b"]);
                assert_eq!(*delay, Duration::from_millis(50));
            }
            other => panic!("{other:?}"),
        }
        assert!(c.replies[4..]
            .iter()
            .all(|r| matches!(r, Reply::Status(500))));
    }

    fn error(text: &str) -> String {
        Conversation::parse("fixtures/model/bad.json", text)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_bad_entry_is_named_with_the_file() {
        let e = error(r#"{"description": "d", "replies": [{"text": "ok"}, {"txt": "typo"}]}"#);
        assert!(
            e.starts_with(
                r#"fixtures/model/bad.json: replies[1] {"txt":"typo"}: unknown variant `txt`"#
            ),
            "{e}"
        );
        assert!(e.contains("`text`, `slow`, `toolCall`, `status`"), "{e}");
        let e = error(
            r#"{"description": "d", "replies": [{"slow": {"chunks": ["x"], "delay": "soon"}}]}"#,
        );
        assert!(
            e.contains("replies[0]") && e.contains(r#""soon" is not a duration"#),
            "{e}"
        );
        let e = error(r#"{"description": "d", "replies": [{"status": 500, "times": 0}]}"#);
        assert!(e.contains("replies[0]") && e.contains("\"times\""), "{e}");
        let e = error(r#"{"description": "d", "replies": [{"text": "a", "status": 500}]}"#);
        assert!(e.contains("replies[0]") && e.contains("one key"), "{e}");
        let e =
            error(r#"{"description": "d", "replies": [{"toolCall": {"name": "x", "args": {}}}]}"#);
        assert!(
            e.contains("replies[0]") && e.contains("unknown field `args`"),
            "{e}"
        );
    }

    #[test]
    fn a_bad_document_is_named_with_the_file() {
        for (text, says) in [
            ("{", "not JSON"),
            ("[]", "expected an object"),
            (r#"{"replies": [{"text": "a"}]}"#, "\"description\""),
            (r#"{"description": "d", "replies": []}"#, "\"replies\""),
            (
                r#"{"description": "d", "replies": [{"text": "a"}], "extra": 1}"#,
                "unknown key \"extra\"",
            ),
        ] {
            let e = error(text);
            assert!(
                e.starts_with("fixtures/model/bad.json: ") && e.contains(says),
                "{text}: {e}"
            );
        }
    }

    /// Every file in `fixtures/model/` parses.
    #[test]
    fn the_fixtures_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/model");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                Conversation::load(&path).unwrap_or_else(|e| panic!("{e}"));
                n += 1;
            }
        }
        assert!(n > 0, "no conversations in {}", dir.display());
    }
}
