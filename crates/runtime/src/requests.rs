//! The requests the runtime makes of us and our answers. The runtime's
//! published schema does not describe these three (`systemMessage.transform`,
//! `userInput.request`, `hooks.invoke`), so their shapes are written here, as
//! observed on the pinned CLI (docs/compatibility.md); a request that does not
//! fit is a counted [`Mismatch`] answered -32602, never a default.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::mismatch::{Mismatch, MismatchKind};

/// A request the runtime makes of us.
#[derive(Debug, Clone, PartialEq)]
pub enum RuntimeRequest {
    /// `systemMessage.transform`: the content of each registered section.
    Transform {
        session_id: String,
        sections: BTreeMap<String, String>,
    },
    /// `userInput.request`: the agent asks the user.
    UserInput {
        session_id: String,
        question: Option<String>,
        choices: Vec<String>,
        allow_freeform: Option<bool>,
    },
    /// `hooks.invoke` (only with `hooks: true`): nothing to add.
    Hooks,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SystemMessageTransformParams {
    session_id: String,
    sections: BTreeMap<String, SectionContent>,
}

#[derive(Serialize, Deserialize)]
struct SectionContent {
    content: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UserInputParams {
    session_id: String,
    question: Option<String>,
    #[serde(default)]
    choices: Vec<String>,
    allow_freeform: Option<bool>,
}

fn typed<'de, T, P>(method: &str, params: P) -> Result<T, Mismatch>
where
    T: Deserialize<'de>,
    P: serde::Deserializer<'de, Error = serde_json::Error>,
{
    serde_path_to_error::deserialize(params).map_err(|e| Mismatch::parse(method, e))
}

impl RuntimeRequest {
    /// Types a request of the runtime's. The socket boundary: only the
    /// connection (and tests) hand it JSON.
    pub fn parse<'de, P>(method: &str, params: P) -> Result<Self, Mismatch>
    where
        P: serde::Deserializer<'de, Error = serde_json::Error>,
    {
        Ok(match method {
            "systemMessage.transform" => {
                let p: SystemMessageTransformParams = typed(method, params)?;
                Self::Transform {
                    session_id: p.session_id,
                    sections: p
                        .sections
                        .into_iter()
                        .map(|(k, v)| (k, v.content))
                        .collect(),
                }
            }
            "userInput.request" => {
                let p: UserInputParams = typed(method, params)?;
                Self::UserInput {
                    session_id: p.session_id,
                    question: p.question,
                    choices: p.choices,
                    allow_freeform: p.allow_freeform,
                }
            }
            "hooks.invoke" => Self::Hooks,
            _ => {
                return Err(Mismatch::new(
                    MismatchKind::UnknownRequest,
                    method,
                    "a request the bridge does not support",
                ))
            }
        })
    }
}

/// Our answer to a runtime request.
#[derive(Debug, Clone, PartialEq)]
pub enum RuntimeAnswer {
    /// The content for every section asked.
    Transformed(BTreeMap<String, String>),
    UserInput(UserInputAnswer),
    Hooks,
}

#[derive(Debug, Clone, PartialEq)]
pub enum UserInputAnswer {
    Answer {
        text: String,
        was_freeform: bool,
    },
    /// Declined, cancelled, or nobody there to ask.
    NoResponse,
}

/// The answers as they go on the wire.
#[derive(Serialize)]
#[serde(untagged)]
enum Wire<'a> {
    Transformed {
        sections: BTreeMap<&'a str, SectionRef<'a>>,
    },
    #[serde(rename_all = "camelCase")]
    Answer {
        answer: &'a str,
        was_freeform: bool,
    },
    #[serde(rename_all = "camelCase")]
    NoResponse {
        no_response: bool,
    },
    Hooks {
        output: EmptyHookResult,
    },
}

/// `{}`: a hook adds nothing.
#[derive(Serialize)]
struct EmptyHookResult {}

#[derive(Serialize)]
struct SectionRef<'a> {
    content: &'a str,
}

impl Serialize for RuntimeAnswer {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Transformed(sections) => Wire::Transformed {
                sections: sections
                    .iter()
                    .map(|(k, v)| (k.as_str(), SectionRef { content: v }))
                    .collect(),
            },
            Self::UserInput(UserInputAnswer::Answer { text, was_freeform }) => Wire::Answer {
                answer: text,
                was_freeform: *was_freeform,
            },
            Self::UserInput(UserInputAnswer::NoResponse) => Wire::NoResponse { no_response: true },
            Self::Hooks => Wire::Hooks {
                output: EmptyHookResult {},
            },
        }
        .serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn requests_are_typed_and_answers_serialized() {
        let r = RuntimeRequest::parse(
            "systemMessage.transform",
            json!({"sessionId": "s", "sections": {"tone": {"content": "T"}}}),
        )
        .unwrap();
        let RuntimeRequest::Transform { sections, .. } = r else {
            panic!("a transform")
        };
        assert_eq!(
            serde_json::to_value(RuntimeAnswer::Transformed(sections)).unwrap(),
            json!({"sections": {"tone": {"content": "T"}}})
        );
        // A section whose content is not text is not dropped quietly.
        let bad = RuntimeRequest::parse(
            "systemMessage.transform",
            json!({"sessionId": "s", "sections": {"tone": {"content": "T"}, "bad": {"content": 1}}}),
        )
        .unwrap_err();
        assert_eq!(bad.kind, MismatchKind::WrongType);
        assert!(
            bad.detail.starts_with("sections.bad.content"),
            "{}",
            bad.detail
        );
        let missing = RuntimeRequest::parse("userInput.request", json!({})).unwrap_err();
        assert_eq!(missing.kind, MismatchKind::MissingField);
        assert!(missing.detail.contains("sessionId"), "{}", missing.detail);
        let unknown = RuntimeRequest::parse("exitPlanMode.request", json!({})).unwrap_err();
        assert_eq!(unknown.kind, MismatchKind::UnknownRequest);
        assert_eq!(
            serde_json::to_value(RuntimeAnswer::UserInput(UserInputAnswer::NoResponse)).unwrap(),
            json!({"noResponse": true})
        );
        assert_eq!(
            serde_json::to_value(RuntimeAnswer::UserInput(UserInputAnswer::Answer {
                text: "yes".into(),
                was_freeform: false
            }))
            .unwrap(),
            json!({"answer": "yes", "wasFreeform": false})
        );
        assert_eq!(
            serde_json::to_value(RuntimeAnswer::Hooks).unwrap(),
            json!({"output": {}})
        );
    }
}
