//! The runtime asks the user (`userInput.request`): an AHP input request in
//! the running turn, mirrored in the session's `inputNeeded`, answered by the
//! first `chat/inputCompleted`. A cancelled turn or a lost runtime drops the
//! question, which answers "no response": the runtime never waits forever.

use ahp_types::actions::ChatInputCompletedAction;
use serde_json::{json, Value};
use tracing::info;

use super::session::PendingInput;
use super::Bridge;
use crate::runtime::wire::UserInputAnswer;

/// The one question of a runtime input request.
pub const QUESTION_ID: &str = "answer";

impl Bridge {
    pub(super) async fn ask_user(
        &self,
        uri: &str,
        question: Option<&str>,
        choices: Vec<String>,
        allow_freeform: Option<bool>,
    ) -> UserInputAnswer {
        let id = format!("input-{}", uuid::Uuid::new_v4().simple());
        let request = chat_request(&id, question, &choices, allow_freeform);
        let (tx, rx) = tokio::sync::oneshot::channel();
        let chat = {
            let mut sessions = self.sessions();
            let Some(s) = sessions.get_mut(uri) else {
                return UserInputAnswer::NoResponse;
            };
            let Some(chat) = s.running().map(|t| t.chat.clone()) else {
                return UserInputAnswer::NoResponse;
            };
            s.inputs.insert(
                id.clone(),
                PendingInput {
                    answer: tx,
                    choices,
                },
            );
            chat
        };
        info!(session = uri, request = %id, "the agent asks the user");
        self.emit(
            &chat,
            vec![json!({"type": "chat/inputRequested", "request": request})],
        );
        self.emit(
            uri,
            vec![json!({"type": "session/inputNeededSet", "request": {"kind": "chatInput", "id": id, "chat": chat, "request": request}})],
        );
        let answer = rx.await.unwrap_or(UserInputAnswer::NoResponse);
        self.emit(
            uri,
            vec![json!({"type": "session/inputNeededRemoved", "id": id})],
        );
        answer
    }

    pub(super) fn input_completed(&self, uri: &str, completed: &ChatInputCompletedAction) {
        let pending = self
            .sessions()
            .get_mut(uri)
            .and_then(|s| s.inputs.remove(&completed.request_id));
        if let Some(p) = pending {
            let raw = serde_json::to_value(completed).unwrap_or(Value::Null);
            let _ = p.answer.send(runtime_answer(&raw, &p.choices));
        }
    }
}

/// `userInput.request {question, choices?, allowFreeform?}` as an AHP
/// `ChatInputRequest`: a single-select question when there are choices, a
/// text question otherwise.
pub fn chat_request(
    id: &str,
    question: Option<&str>,
    choices: &[String],
    allow_freeform: Option<bool>,
) -> Value {
    let message = question.unwrap_or("The agent asks for input");
    let question = if choices.is_empty() {
        json!({"kind": "text", "id": QUESTION_ID, "message": message, "required": true})
    } else {
        let options: Vec<Value> = choices
            .iter()
            .map(|c| json!({"id": c, "label": c}))
            .collect();
        json!({"kind": "single-select", "id": QUESTION_ID, "message": message, "required": true,
            "options": options, "allowFreeformInput": allow_freeform.unwrap_or(true)})
    };
    json!({"id": id, "message": message, "questions": [question]})
}

/// The client's `chat/inputCompleted` as the runtime's answer
/// `{answer, wasFreeform}`; anything but an accepted answer is no response.
/// `choices` are the runtime's, to tell a picked choice from free text.
pub fn runtime_answer(completed: &Value, choices: &[String]) -> UserInputAnswer {
    if completed["response"] != "accept" {
        return UserInputAnswer::NoResponse;
    }
    let answer = &completed["answers"][QUESTION_ID];
    if answer["state"] == "skipped" {
        return UserInputAnswer::NoResponse;
    }
    let value = &answer["value"];
    let text = match value["kind"].as_str() {
        Some("text") | Some("selected") => value["value"].as_str().map(String::from),
        Some("selected-many") => value["value"].as_array().map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        }),
        Some("number") | Some("boolean") => Some(value["value"].to_string()),
        _ => None,
    };
    let free = value["freeformValues"]
        .as_array()
        .and_then(|a| a.first())
        .and_then(Value::as_str);
    match (text, free) {
        (_, Some(f)) => UserInputAnswer::Answer {
            text: f.to_owned(),
            was_freeform: true,
        },
        (Some(t), None) => {
            let was_freeform = !choices.iter().any(|c| c == &t);
            UserInputAnswer::Answer {
                text: t,
                was_freeform,
            }
        }
        (None, None) => UserInputAnswer::NoResponse,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_types::actions::StateAction;

    #[test]
    fn requests_are_valid_ahp_actions() {
        let rb = vec!["red".to_string(), "blue".to_string()];
        for (q, c, f) in [
            (Some("Colour?"), rb.clone(), Some(false)),
            (Some("Name?"), vec![], None),
            (None, vec![], None),
        ] {
            let req = chat_request("r1", q, &c, f);
            let action = json!({"type": "chat/inputRequested", "request": req});
            serde_json::from_value::<StateAction>(action.clone())
                .unwrap_or_else(|e| panic!("{action}: {e}"));
        }
        let req = chat_request("r1", Some("Colour?"), &["red".to_string()], None);
        assert_eq!(req["questions"][0]["kind"], "single-select");
        assert_eq!(req["questions"][0]["options"][0]["id"], "red");
        assert_eq!(
            chat_request("r", Some("Name?"), &[], None)["questions"][0]["kind"],
            "text"
        );
    }

    fn completed(response: &str, answer: Value) -> Value {
        json!({"type": "chat/inputCompleted", "requestId": "r1", "response": response,
            "answers": {QUESTION_ID: answer}})
    }

    fn answer_json(completed: &Value, choices: &[String]) -> Value {
        crate::runtime::wire::RuntimeAnswer::UserInput(runtime_answer(completed, choices)).to_json()
    }

    #[test]
    fn answers() {
        let choices = vec!["red".to_owned(), "blue".to_owned()];
        let picked = completed(
            "accept",
            json!({"state": "submitted", "value": {"kind": "selected", "value": "blue"}}),
        );
        assert_eq!(
            answer_json(&picked, &choices),
            json!({"answer": "blue", "wasFreeform": false})
        );
        let typed = completed(
            "accept",
            json!({"state": "submitted", "value": {"kind": "text", "value": "green"}}),
        );
        assert_eq!(
            answer_json(&typed, &choices),
            json!({"answer": "green", "wasFreeform": true})
        );
        let other = completed(
            "accept",
            json!({"state": "submitted", "value": {"kind": "selected", "value": "red", "freeformValues": ["teal"]}}),
        );
        assert_eq!(
            answer_json(&other, &choices),
            json!({"answer": "teal", "wasFreeform": true})
        );
        let action: StateAction = serde_json::from_value(picked).unwrap();
        assert!(matches!(action, StateAction::ChatInputCompleted(_)));
    }

    #[test]
    fn anything_but_an_accepted_answer_is_no_response() {
        let a = json!({"state": "submitted", "value": {"kind": "text", "value": "x"}});
        assert_eq!(
            answer_json(&completed("decline", a.clone()), &[]),
            json!({"noResponse": true})
        );
        assert_eq!(
            answer_json(&completed("cancel", a), &[]),
            json!({"noResponse": true})
        );
        assert_eq!(
            answer_json(&completed("accept", json!({"state": "skipped"})), &[]),
            json!({"noResponse": true})
        );
        assert_eq!(
            answer_json(&json!({"response": "accept"}), &[]),
            json!({"noResponse": true})
        );
    }
}
