//! The runtime's wire checked against its schema, end to end: what a
//! runtime release could send differently (a renamed field, a new event
//! type) is counted in `ahp_bridge_runtime_protocol_mismatches_total` and
//! never reaches a client as an empty value. Driven by the fake runtime
//! (only a fake sends what the real CLI does not); the real CLI's
//! conversations pass the same parser in every e2e test.

mod support;

use serde_json::json;
use support::e2e::wait_turn_end;
use support::fake_fixture::{fixture, raw_chat_subscriber};
use support::raw::Next;

/// The counter of mismatches of `kind`, as `/metrics` shows it.
fn mismatches(kind: &str) -> f64 {
    let text = ahp_copilot_bridge::telemetry::metrics().encode(false);
    let series = format!("ahp_bridge_runtime_protocol_mismatches_total{{kind=\"{kind}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no series {series} in\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_event_and_a_delta_without_its_text_are_counted_and_not_passed_on() {
    let mut f = fixture(|_| {}).await;
    let (unknown, missing) = (mismatches("unknown_event"), mismatches("missing_field"));
    let mut watcher = raw_chat_subscriber(&f, "watcher").await;
    let mut sub = f.start_turn("t1", "hi").await;
    f.conn.call_of("session.send").await;
    let id = f.runtime_id.clone();
    // A release that renamed `deltaContent`, and one that added an event type.
    f.conn
        .event(&id, "assistant.message_delta", json!({"messageId": "m"}));
    f.conn.event(
        &id,
        "assistant.text_delta",
        json!({"messageId": "m", "text": "?"}),
    );
    f.conn.event(
        &id,
        "assistant.message_delta",
        json!({"messageId": "m", "deltaContent": "mine"}),
    );
    f.conn.event(&id, "session.idle", json!({}));
    let end = wait_turn_end(&mut sub, "t1").await;
    assert_eq!((end.kind, end.text.as_str()), ("complete", "mine"));

    // Every delta the client saw carries text (a part opens empty; its
    // text comes in deltas).
    let mut texts = Vec::new();
    loop {
        let Next::Json(v) = watcher.next().await else {
            panic!("the watcher was disconnected")
        };
        let a = &v["params"]["action"];
        match a["type"].as_str() {
            Some("chat/delta") => texts.push(a["content"].clone()),
            Some("chat/turnComplete") => break,
            _ => {}
        }
    }
    assert!(!texts.is_empty());
    for t in &texts {
        assert!(
            t.as_str().is_some_and(|t| !t.is_empty()),
            "an empty text reached the client: {texts:?}"
        );
    }
    assert!(
        mismatches("unknown_event") > unknown,
        "the unknown event counted"
    );
    assert!(
        mismatches("missing_field") > missing,
        "the delta without text counted"
    );
}

#[tokio::test]
async fn a_runtime_request_not_as_expected_is_answered_with_an_error_and_counted() {
    let mut f = fixture(|_| {}).await;
    let before = mismatches("wrong_type");
    let id = f.runtime_id.clone();
    f.conn.send(
        &json!({"jsonrpc": "2.0", "id": 70, "method": "systemMessage.transform",
        "params": {"sessionId": id, "sections": {"tone": {"content": 7}}}}),
    );
    let answer = f.conn.answer_to(json!(70)).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("sections.tone.content"), "{message}");
    assert!(mismatches("wrong_type") > before);
}
