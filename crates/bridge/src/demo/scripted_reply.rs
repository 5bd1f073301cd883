//! One scripted answer of the model, and its shape in a conversation file.
//! Its own file because both the model (which streams it) and the
//! conversation files (which hold it) need it, and neither needs the other.

use std::time::Duration;

use serde::{Deserialize, Deserializer};
use serde_json::{json, Value};

/// One scripted answer to one chat-completions request.
///
/// In a conversation file, one key names the kind: `{"text": "..."}`,
/// `{"slow": {"chunks": [...], "repeat": 600, "delay": "50ms"}}`,
/// `{"toolCall": {"name": "...", "arguments": {...}}}`, `{"status": 500}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(from = "ReplyData")]
pub enum Reply {
    /// Streamed text, split into chunks of a few characters.
    Text(String),
    /// Text streamed slowly: one chunk per `delay` (for cancellation).
    Slow {
        chunks: Vec<String>,
        delay: Duration,
    },
    /// A call of the named tool with JSON arguments.
    ToolCall { name: String, arguments: Value },
    /// An HTTP error status.
    Status(u16),
}

/// [`Reply`] as written in a file.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
enum ReplyData {
    Text(String),
    Slow {
        chunks: Vec<String>,
        /// The chunks are streamed this many times over (default once).
        #[serde(default = "once")]
        repeat: usize,
        #[serde(deserialize_with = "duration")]
        delay: Duration,
    },
    ToolCall {
        name: String,
        #[serde(default = "no_arguments")]
        arguments: Value,
    },
    Status(u16),
}

fn once() -> usize {
    1
}

fn no_arguments() -> Value {
    json!({})
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    humantime::parse_duration(&s).map_err(|e| {
        serde::de::Error::custom(format!("{s:?} is not a duration like \"50ms\": {e}"))
    })
}

impl From<ReplyData> for Reply {
    fn from(d: ReplyData) -> Self {
        match d {
            ReplyData::Text(t) => Reply::Text(t),
            ReplyData::Slow {
                chunks,
                repeat,
                delay,
            } => Reply::Slow {
                chunks: (0..repeat).flat_map(|_| chunks.iter().cloned()).collect(),
                delay,
            },
            ReplyData::ToolCall { name, arguments } => Reply::ToolCall { name, arguments },
            ReplyData::Status(code) => Reply::Status(code),
        }
    }
}
