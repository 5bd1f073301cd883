//! The runtime asks the user (`userInput.request`), mapped both ways, pure:
//! the question as an AHP `ChatInputRequest` (a single-select question when
//! the runtime gives choices, a text question otherwise), and the client's
//! `chat/inputCompleted` as the runtime's answer.

use ahp_types::actions::ChatInputCompletedAction;
use ahp_types::state::{
    ChatInputAnswer, ChatInputAnswerValue, ChatInputOption, ChatInputQuestion, ChatInputRequest,
    ChatInputResponseKind, ChatInputSingleSelectQuestion, ChatInputTextQuestion,
};

use crate::runtime::UserInputAnswer;

/// The one question of a runtime input request.
pub(crate) const QUESTION_ID: &str = "answer";

/// `userInput.request {question, choices?, allowFreeform?}` as an AHP request.
pub(crate) fn chat_request(
    id: &str,
    question: Option<&str>,
    choices: &[String],
    allow_freeform: Option<bool>,
) -> ChatInputRequest {
    let message = question.unwrap_or("The agent asks for input").to_owned();
    let question = if choices.is_empty() {
        ChatInputQuestion::Text(ChatInputTextQuestion {
            id: QUESTION_ID.into(),
            title: None,
            message: message.clone(),
            required: Some(true),
            format: None,
            min: None,
            max: None,
            default_value: None,
        })
    } else {
        let options = choices
            .iter()
            .map(|c| ChatInputOption {
                id: c.clone(),
                label: c.clone(),
                description: None,
                recommended: None,
            })
            .collect();
        ChatInputQuestion::SingleSelect(ChatInputSingleSelectQuestion {
            id: QUESTION_ID.into(),
            title: None,
            message: message.clone(),
            required: Some(true),
            options,
            allow_freeform_input: Some(allow_freeform.unwrap_or(true)),
        })
    };
    ChatInputRequest {
        id: id.to_owned(),
        message: Some(message),
        url: None,
        questions: Some(vec![question]),
        answers: None,
    }
}

/// The client's `chat/inputCompleted` as the runtime's answer
/// `{answer, wasFreeform}`; anything but an accepted answer is no response.
/// `choices` are the runtime's, to tell a picked choice from free text.
pub(crate) fn runtime_answer(
    completed: &ChatInputCompletedAction,
    choices: &[String],
) -> UserInputAnswer {
    if completed.response != ChatInputResponseKind::Accept {
        return UserInputAnswer::NoResponse;
    }
    let answer = completed.answers.as_ref().and_then(|a| a.get(QUESTION_ID));
    let value = match answer {
        Some(ChatInputAnswer::Submitted(a) | ChatInputAnswer::Draft(a)) => &a.value,
        _ => return UserInputAnswer::NoResponse,
    };
    let (text, free) = match value {
        ChatInputAnswerValue::Text(t) => (Some(t.value.clone()), None),
        ChatInputAnswerValue::Selected(s) => (Some(s.value.clone()), first(&s.freeform_values)),
        ChatInputAnswerValue::SelectedMany(s) => {
            (Some(s.value.join(", ")), first(&s.freeform_values))
        }
        ChatInputAnswerValue::Number(n) => (Some(n.value.to_string()), None),
        ChatInputAnswerValue::Boolean(b) => (Some(b.value.to_string()), None),
        ChatInputAnswerValue::Unknown(_) => (None, None),
    };
    match (text, free) {
        (_, Some(f)) => UserInputAnswer::Answer {
            text: f,
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

fn first(values: &Option<Vec<String>>) -> Option<String> {
    values.as_ref()?.first().cloned()
}

#[cfg(test)]
mod tests {
    use ahp_types::actions::{ChatInputRequestedAction, StateAction};
    use serde_json::{json, Value};

    use super::*;

    #[test]
    fn requests_are_valid_ahp_actions() {
        let rb = vec!["red".to_string(), "blue".to_string()];
        for (q, c, f) in [
            (Some("Colour?"), rb.clone(), Some(false)),
            (Some("Name?"), vec![], None),
            (None, vec![], None),
        ] {
            let request = chat_request("r1", q, &c, f);
            let action = StateAction::ChatInputRequested(ChatInputRequestedAction { request });
            let v = serde_json::to_value(&action).unwrap();
            assert_eq!(serde_json::from_value::<StateAction>(v).unwrap(), action);
        }
        let req = serde_json::to_value(chat_request(
            "r1",
            Some("Colour?"),
            &["red".to_string()],
            None,
        ))
        .unwrap();
        assert_eq!(req["questions"][0]["kind"], "single-select");
        assert_eq!(req["questions"][0]["options"][0]["id"], "red");
        let text = serde_json::to_value(chat_request("r", Some("Name?"), &[], None)).unwrap();
        assert_eq!(text["questions"][0]["kind"], "text");
    }

    /// A client's `chat/inputCompleted` payload.
    fn completed(response: &str, answer: Value) -> Value {
        json!({"requestId": "r1", "response": response, "answers": {QUESTION_ID: answer}})
    }

    fn answer_json(completed: &Value, choices: &[String]) -> Value {
        let typed: ChatInputCompletedAction = serde_json::from_value(completed.clone())
            .unwrap_or_else(|e| panic!("{completed}: {e}"));
        serde_json::to_value(crate::runtime::RuntimeAnswer::UserInput(runtime_answer(
            &typed, choices,
        )))
        .unwrap()
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
        let mut tagged = picked;
        tagged["type"] = "chat/inputCompleted".into();
        let action: StateAction = serde_json::from_value(tagged).unwrap();
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
            answer_json(&json!({"requestId": "r1", "response": "accept"}), &[]),
            json!({"noResponse": true})
        );
    }
}
