//! The runtime's wire checked against its schema, end to end: what a
//! runtime release could send differently (a renamed field, a new event
//! type) is counted in `ahp_bridge_runtime_protocol_mismatches_total` and
//! never reaches a client as an empty value, and an event that comes again
//! (its id seen before) is counted and reaches no client twice. Driven by the fake runtime
//! (only a fake sends what the real CLI does not); the real CLI's
//! conversations pass the same parser in every e2e test.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::e2e::wait_turn_end;
use support::fake_fixture::{fixture, raw_chat_subscriber};
use support::raw::Next;
use support::DEADLINE;

/// The counter of mismatches of `kind`, as `/metrics` shows it.
fn mismatches(kind: &str) -> f64 {
    let text = ahp_bridge_join::telemetry::metrics().encode(false);
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

/// A runtime event that comes again with its id (the runtime telling of a
/// session on two connections while it moves between them, or sending one
/// twice) reaches no client twice: over several turns of many deltas, a
/// fast reader and a slow one each get the model's text whole, character
/// for character, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_event_reaches_no_client_twice_over_many_turns() {
    use support::raw::Raw;
    const TURNS: usize = 4;
    const DELTAS: usize = 1000;
    let mut f = fixture(|_| {}).await;
    let repeated = mismatches("repeated_event");
    // Each reader's text per turn, a turn ending at its turnComplete.
    let read = |mut raw: Raw, pause: Duration| {
        tokio::spawn(async move {
            let mut texts = vec![String::new()];
            while texts.len() <= TURNS {
                match raw.next().await {
                    Next::Json(v) if v["method"] == "action" => {
                        let a = &v["params"]["action"];
                        if a["type"] == "chat/delta" {
                            let t = texts.last_mut().unwrap();
                            t.push_str(a["content"].as_str().unwrap());
                        } else if a["type"] == "chat/turnComplete" {
                            texts.push(String::new());
                        }
                        // Load: the slow reader lets its queue fill.
                        tokio::time::sleep(pause).await;
                    }
                    Next::Json(_) => {}
                    Next::Closed(c) => panic!("a reader was disconnected: {c:?}"),
                }
            }
            texts.pop();
            texts
        })
    };
    let fast = read(raw_chat_subscriber(&f, "fast").await, Duration::ZERO);
    let slow = read(
        raw_chat_subscriber(&f, "slow").await,
        Duration::from_micros(200),
    );
    let mut expected = Vec::new();
    for t in 0..TURNS {
        let turn = format!("t{t}");
        let mut sub = f.start_turn(&turn, "go").await;
        f.conn.call_of("session.send").await;
        let mut want = String::new();
        let delta = |i: usize| {
            let text = format!("{t}:{i:04}:{}", "x".repeat(993));
            (format!("t{t}-d{i}"), text)
        };
        for i in 0..DELTAS {
            let (id, text) = delta(i);
            let data = json!({"messageId": format!("m-{t}"), "deltaContent": text});
            f.conn
                .event_with_id(&f.runtime_id, &id, "assistant.message_delta", data.clone());
            // Some come again at once, some a hundred events later.
            if i % 97 == 0 {
                f.conn
                    .event_with_id(&f.runtime_id, &id, "assistant.message_delta", data);
            }
            if i >= 100 && i % 211 == 0 {
                let (id, text) = delta(i - 100);
                let data = json!({"messageId": format!("m-{t}"), "deltaContent": text});
                f.conn
                    .event_with_id(&f.runtime_id, &id, "assistant.message_delta", data);
            }
            want.push_str(&text);
        }
        f.conn.event_with_id(
            &f.runtime_id,
            &format!("t{t}-idle"),
            "session.idle",
            json!({}),
        );
        let end = wait_turn_end(&mut sub, &turn).await;
        assert_eq!(end.kind, "complete");
        assert!(
            end.text == want,
            "turn {t}: the chat's text is the model's, once"
        );
        expected.push(want);
    }
    // Each repeat counted (11 at once and 4 later per turn), none shown.
    assert_eq!(mismatches("repeated_event") - repeated, (TURNS * 15) as f64);
    for (who, reader) in [("fast", fast), ("slow", slow)] {
        let texts = tokio::time::timeout(DEADLINE, reader)
            .await
            .unwrap_or_else(|_| panic!("the {who} reader did not see every turn end"))
            .unwrap();
        for (t, (got, want)) in texts.iter().zip(&expected).enumerate() {
            assert_eq!(got.len(), want.len(), "{who} reader, turn {t}: length");
            assert!(
                got == want,
                "{who} reader, turn {t}: character for character"
            );
        }
    }
}
