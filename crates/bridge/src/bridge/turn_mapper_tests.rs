//! The event mapping, checked against the official types and reducers.

use serde_json::json;

use super::*;

fn event(ty: &str, data: Value) -> RuntimeEvent {
    RuntimeEvent::parse(json!({"sessionId": "s", "event": {"type": ty, "data": data}}))
        .unwrap_or_else(|m| panic!("{ty}: {m:?}"))
        .event
}

fn types(v: &[StateAction]) -> Vec<String> {
    v.iter()
        .map(|a| {
            serde_json::to_value(a).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[test]
fn table() {
    // (event type, data, expected action types)
    let table: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "assistant.message_delta",
            json!({"messageId": "m1", "deltaContent": "He"}),
            vec!["chat/responsePart", "chat/delta"],
        ),
        (
            "assistant.message_delta",
            json!({"messageId": "m1", "deltaContent": "llo"}),
            vec!["chat/delta"],
        ),
        (
            "assistant.message",
            json!({"messageId": "m1", "content": "Hello"}),
            vec![],
        ),
        (
            "assistant.message",
            json!({"messageId": "m2", "content": "Whole"}),
            vec!["chat/responsePart"],
        ),
        (
            "assistant.reasoning_delta",
            json!({"reasoningId": "r1", "deltaContent": "hmm"}),
            vec!["chat/responsePart", "chat/reasoning"],
        ),
        (
            "assistant.usage",
            json!({"model": "gpt-4.1", "inputTokens": 10, "outputTokens": 2}),
            vec!["chat/usage"],
        ),
        (
            "tool.execution_start",
            json!({"toolCallId": "c1", "toolName": "view", "arguments": {"path": "."}}),
            vec!["chat/toolCallStart"],
        ),
        (
            "tool.execution_complete",
            json!({"toolCallId": "c1", "success": true, "result": {"content": "ok"}}),
            vec!["chat/toolCallReady", "chat/toolCallComplete"],
        ),
        (
            "tool.execution_complete",
            json!({"toolCallId": "c1", "success": true}),
            vec![],
        ),
        // A type of the schema the bridge does not act on.
        ("assistant.turn_start", json!({}), vec![]),
        (
            "session.error",
            json!({"errorType": "model", "message": "500"}),
            vec!["chat/error"],
        ),
        ("session.idle", json!({}), vec![]),
    ];
    let mut m = TurnMapper::new("t1");
    for (ty, data, want) in table {
        let got = m.map(&event(ty, data.clone()), 5);
        assert_eq!(types(&got), want, "{ty} {data}");
        // Every action is a valid AHP action, and reads back as itself.
        for a in got {
            let v = serde_json::to_value(&a).unwrap();
            assert_eq!(serde_json::from_value::<StateAction>(v).unwrap(), a);
        }
    }
}

#[test]
fn idle_completes_a_turn_once() {
    let mut m = TurnMapper::new("t");
    assert_eq!(
        types(&m.map(&RuntimeEvent::Idle, 1)),
        vec!["chat/turnComplete"]
    );
    assert!(m.map(&RuntimeEvent::Idle, 1).is_empty());
}

/// Applies actions with the official reducer, failing on any the state refuses.
fn apply(chat: &mut ahp_types::state::ChatState, actions: Vec<StateAction>) {
    use ahp::reducers::{apply_action_to_chat, ReduceOutcome};
    for a in actions {
        assert_eq!(
            apply_action_to_chat(chat, &a),
            ReduceOutcome::Applied,
            "{a:?}"
        );
    }
}

/// A chat whose turn `t` is running, as the official reducer has it.
fn chat_with_turn_t() -> ahp_types::state::ChatState {
    let mut chat: ahp_types::state::ChatState = serde_json::from_value(json!({
        "resource": "ahp-chat:/x", "title": "Chat", "status": 1,
        "modifiedAt": "2026-01-01T00:00:00Z", "turns": []}))
    .unwrap();
    let started = json!({"turnId": "t", "startedAt": "2026-01-01T00:00:00Z",
        "message": {"text": "go", "origin": {"kind": "user"}}});
    let started = StateAction::ChatTurnStarted(serde_json::from_value(started).unwrap());
    apply(&mut chat, vec![started]);
    chat
}

fn tool_status(chat: &ahp_types::state::ChatState, id: &str) -> String {
    let v = serde_json::to_value(chat).unwrap();
    let parts = v["activeTurn"]["responseParts"].as_array().unwrap().clone();
    let tc = parts
        .iter()
        .find(|p| p["toolCall"]["toolCallId"] == id)
        .unwrap_or_else(|| panic!("no tool call {id} in {v}"));
    tc["toolCall"]["status"].as_str().unwrap().to_owned()
}

#[test]
fn a_runtime_tool_that_needs_permission_is_never_running_before_it_is_confirmed() {
    let mut chat = chat_with_turn_t();
    let mut m = TurnMapper::new("t");
    let start = json!({"toolCallId": "c", "toolName": "bash", "arguments": {"command": "ls"}});
    apply(&mut chat, m.map(&event("tool.execution_start", start), 1));
    assert_eq!(tool_status(&chat, "c"), "streaming");
    let ask = m.ask_confirmation("c", "bash", &json!("ls"), "Allow shell: ls");
    assert_eq!(types(&ask), vec!["chat/toolCallReady"]);
    apply(&mut chat, ask);
    assert_eq!(tool_status(&chat, "c"), "pending-confirmation");
    assert!(
        m.shown_running("c").is_empty(),
        "a prompted call is not deferred any more"
    );
    // A tool without a prompt is shown running once it proves to run.
    let view = json!({"toolCallId": "v", "toolName": "view", "arguments": {"path": "."}});
    apply(&mut chat, m.map(&event("tool.execution_start", view), 1));
    assert_eq!(tool_status(&chat, "v"), "streaming");
    apply(&mut chat, m.shown_running("v"));
    assert_eq!(tool_status(&chat, "v"), "running");
    // A permission for a call never announced opens it, pending.
    let fresh = m.ask_confirmation("d", "write", &json!({}), "Allow write");
    assert_eq!(
        types(&fresh),
        vec!["chat/toolCallStart", "chat/toolCallReady"]
    );
    apply(&mut chat, fresh);
    assert_eq!(tool_status(&chat, "d"), "pending-confirmation");
}

/// A permission the policy refused reaches no client as a pending
/// confirmation, announced by the runtime first or not: the call goes
/// from streaming (or nothing) to ended, failed with the policy's reason.
#[test]
fn a_refused_permission_is_never_pending_on_any_client() {
    for announced in [true, false] {
        let mut chat = chat_with_turn_t();
        let mut m = TurnMapper::new("t");
        if announced {
            let start = json!({"toolCallId": "c", "toolName": "bash", "arguments": {"command": "rm -rf /"}});
            apply(&mut chat, m.map(&event("tool.execution_start", start), 1));
        }
        let refused = m.refuse("c", "bash", &json!("rm -rf /"), "Allow shell", "no rm");
        for a in &refused {
            if let StateAction::ChatToolCallReady(r) = a {
                assert!(r.confirmed.is_some(), "a pending confirmation: {a:?}");
            }
        }
        apply(&mut chat, refused);
        assert_eq!(
            tool_status(&chat, "c"),
            "completed",
            "announced: {announced}"
        );
        let v = serde_json::to_value(&chat).unwrap().to_string();
        assert!(v.contains("Denied by policy: no rm"), "{v}");
        // The runtime's own end of the call changes nothing after.
        let done = json!({"toolCallId": "c", "success": false});
        assert!(m.map(&event("tool.execution_complete", done), 1).is_empty());
    }
}
