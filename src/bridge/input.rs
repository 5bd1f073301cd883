//! The runtime's `userInput.request` as an AHP input request, and the client's
//! `chat/inputCompleted` as the runtime's answer. Pure.

use serde_json::{json, Value};

/// The one question of a runtime input request.
pub const QUESTION_ID: &str = "answer";

/// What the runtime gets when nobody answers (declined, cancelled, turn over).
pub fn no_response() -> Value {
    json!({"noResponse": true})
}

/// `userInput.request {question, choices?, allowFreeform?}` as an AHP
/// `ChatInputRequest`: a single-select question when there are choices, a
/// text question otherwise.
pub fn chat_request(id: &str, params: &Value) -> Value {
    let message = params["question"]
        .as_str()
        .unwrap_or("The agent asks for input");
    let choices: Vec<&str> = params["choices"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let question = if choices.is_empty() {
        json!({"kind": "text", "id": QUESTION_ID, "message": message, "required": true})
    } else {
        let options: Vec<Value> = choices
            .iter()
            .map(|c| json!({"id": c, "label": c}))
            .collect();
        json!({"kind": "single-select", "id": QUESTION_ID, "message": message, "required": true,
            "options": options, "allowFreeformInput": params["allowFreeform"].as_bool().unwrap_or(true)})
    };
    json!({"id": id, "message": message, "questions": [question]})
}

/// The client's `chat/inputCompleted` as the runtime's answer
/// `{answer, wasFreeform}`; anything but an accepted answer is no response.
/// `choices` are the runtime's, to tell a picked choice from free text.
pub fn runtime_answer(completed: &Value, choices: &[String]) -> Value {
    if completed["response"] != "accept" {
        return no_response();
    }
    let answer = &completed["answers"][QUESTION_ID];
    if answer["state"] == "skipped" {
        return no_response();
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
        (_, Some(f)) => json!({"answer": f, "wasFreeform": true}),
        (Some(t), None) => {
            let was_freeform = !choices.iter().any(|c| c == &t);
            json!({"answer": t, "wasFreeform": was_freeform})
        }
        (None, None) => no_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_types::actions::StateAction;

    #[test]
    fn requests_are_valid_ahp_actions() {
        for params in [
            json!({"question": "Colour?", "choices": ["red", "blue"], "allowFreeform": false}),
            json!({"question": "Name?"}),
            json!({}),
        ] {
            let req = chat_request("r1", &params);
            let action = json!({"type": "chat/inputRequested", "request": req});
            serde_json::from_value::<StateAction>(action.clone())
                .unwrap_or_else(|e| panic!("{action}: {e}"));
        }
        let req = chat_request("r1", &json!({"question": "Colour?", "choices": ["red"]}));
        assert_eq!(req["questions"][0]["kind"], "single-select");
        assert_eq!(req["questions"][0]["options"][0]["id"], "red");
        assert_eq!(
            chat_request("r", &json!({"question": "Name?"}))["questions"][0]["kind"],
            "text"
        );
    }

    fn completed(response: &str, answer: Value) -> Value {
        json!({"type": "chat/inputCompleted", "requestId": "r1", "response": response,
            "answers": {QUESTION_ID: answer}})
    }

    #[test]
    fn answers() {
        let choices = vec!["red".to_owned(), "blue".to_owned()];
        let picked = completed(
            "accept",
            json!({"state": "submitted", "value": {"kind": "selected", "value": "blue"}}),
        );
        assert_eq!(
            runtime_answer(&picked, &choices),
            json!({"answer": "blue", "wasFreeform": false})
        );
        let typed = completed(
            "accept",
            json!({"state": "submitted", "value": {"kind": "text", "value": "green"}}),
        );
        assert_eq!(
            runtime_answer(&typed, &choices),
            json!({"answer": "green", "wasFreeform": true})
        );
        let other = completed(
            "accept",
            json!({"state": "submitted", "value": {"kind": "selected", "value": "red", "freeformValues": ["teal"]}}),
        );
        assert_eq!(
            runtime_answer(&other, &choices),
            json!({"answer": "teal", "wasFreeform": true})
        );
        let action: StateAction = serde_json::from_value(picked).unwrap();
        assert!(matches!(action, StateAction::ChatInputCompleted(_)));
    }

    #[test]
    fn anything_but_an_accepted_answer_is_no_response() {
        let a = json!({"state": "submitted", "value": {"kind": "text", "value": "x"}});
        assert_eq!(
            runtime_answer(&completed("decline", a.clone()), &[]),
            no_response()
        );
        assert_eq!(runtime_answer(&completed("cancel", a), &[]), no_response());
        assert_eq!(
            runtime_answer(&completed("accept", json!({"state": "skipped"})), &[]),
            no_response()
        );
        assert_eq!(
            runtime_answer(&json!({"response": "accept"}), &[]),
            no_response()
        );
    }
}
