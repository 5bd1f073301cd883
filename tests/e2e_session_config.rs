//! What real AHP clients call around a conversation, against the real CLI:
//! the session config (model choice, per session and per message) and the
//! pending messages (queued, steering).

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ahp::Client;
use ahp_bridge_join::Reply;
use ahp_bridge_join::ScriptedModel;
use ahp_types::actions::StateAction;
use serde_json::{json, Value};
use support::e2e::*;
use support::*;

/// Answers every transform request by appending a marker naming the
/// section and the model switch count; counts the requests.
fn rewrite_with_marker(c: &Client) -> Arc<Mutex<Vec<Value>>> {
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let s = seen.clone();
    c.set_server_request_handler(move |_method, params: Value| {
        let s = s.clone();
        async move {
            let n = {
                let mut g = s.lock().unwrap();
                g.push(params.clone());
                g.len()
            };
            Ok(append_to_each(&params, |id| format!("MARKER-{id}-{n}")))
        }
    });
    seen
}

fn requested_model(request: &Value) -> String {
    request["model"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_config_chooses_the_model_and_a_message_switches_it() {
    let st = start_stack(|c| c.runtime.models = vec!["model-b".into(), "model-c".into()]).await;
    let c = initialized(&st.bridge, "ide").await;
    let resolved: Value = c
        .request(
            "resolveSessionConfig",
            json!({"channel": "ahp-root://", "provider": "copilot"}),
        )
        .await
        .unwrap();
    assert_eq!(
        resolved["schema"]["properties"]["model"]["enum"],
        json!(["gpt-4.1", "model-b", "model-c"])
    );
    assert_eq!(resolved["values"]["model"], "gpt-4.1");
    let completions: Value = c
        .request(
            "sessionConfigCompletions",
            json!({"channel": "ahp-root://", "property": "model", "query": "-C"}),
        )
        .await
        .unwrap();
    assert_eq!(
        completions["items"],
        json!([{"value": "model-c", "label": "model-c"}])
    );
    // A model nobody offers is refused before anything exists.
    let refused = c
        .request::<_, Value>(
            "createSession",
            json!({"channel": "ahp-session:/bad", "config": {"model": "model-z"}}),
        )
        .await
        .unwrap_err();
    assert_eq!(rpc_code(&refused), -32602, "{refused:?}");

    let seen = rewrite_with_marker(&c);
    let entry =
        json!({"clientId": "ide", "tools": [], "systemMessageTransform": {"sections": ["tone"]}});
    let uri = "ahp-session:/m";
    c.request::<_, Value>(
        "createSession",
        json!({"channel": uri, "provider": "copilot", "config": {"model": "model-b"}, "activeClient": entry}),
    )
    .await
    .unwrap();
    assert_eq!(creation_outcome(&c, uri).await, None);
    st.model.push(Reply::Text("On B.".into()));
    assert_eq!(run_turn(&c, "m", "t1", "hello").await.kind, "complete");
    let first = st.model.requests().last().unwrap().clone();
    assert_eq!(
        requested_model(&first),
        "model-b",
        "the session's config chose B"
    );
    let asked_before = seen.lock().unwrap().len();
    assert!(
        asked_before >= 1,
        "the opted-in client was asked on the first render"
    );

    // A message that chooses C switches the runtime session before its turn:
    // the prompt is rendered again, the client asked again, the model is C.
    st.model.push(Reply::Text("On C.".into()));
    let chat = &chat_of("ahp-session:/m");
    let (_, mut sub) = c.subscribe(chat.into()).await.unwrap();
    dispatch_raw(
        &c,
        chat,
        2,
        json!({"type": "chat/turnStarted", "turnId": "t2", "startedAt": "2026-11-23T00:00:00Z",
        "message": {"text": "and now?", "origin": {"kind": "user"}, "model": {"id": "model-c"}}}),
    )
    .await;
    assert_eq!(wait_turn_end(&mut sub, "t2").await.kind, "complete");
    let second = st.model.requests().last().unwrap().clone();
    assert_eq!(requested_model(&second), "model-c", "the message chose C");
    let asked_after = seen.lock().unwrap().len();
    assert!(
        asked_after > asked_before,
        "the switch re-rendered the prompt and asked again"
    );
    // The runtime may ask once more after the model's request (a render of
    // its own): the model got one of the rewrites asked after the switch.
    let prompt = ScriptedModel::system_prompt(&second).unwrap();
    assert!(
        (asked_before + 1..=asked_after).any(|n| prompt.contains(&format!("MARKER-tone-{n}"))),
        "the model received a rewrite asked after the switch"
    );
    // The audit shows the second render: one transform record per render
    // (a render of the runtime's own may still be on its way: its record
    // follows its ask).
    let transforms = || {
        let audit = std::fs::read_to_string(st.dir.path().join("audit.jsonl")).unwrap();
        audit
            .lines()
            .filter(|l| serde_json::from_str::<Value>(l).unwrap()["kind"] == "transform")
            .count()
    };
    eventually("one audit record per render", || {
        transforms() == seen.lock().unwrap().len()
    })
    .await;
    assert!(transforms() >= asked_after, "the second render is audited");
    // A message choosing a model nobody offers is refused.
    let bad = json!({"type": "chat/turnStarted", "turnId": "t3", "startedAt": "2026-11-23T00:00:00Z",
        "message": {"text": "x", "origin": {"kind": "user"}, "model": {"id": "model-z"}}});
    let reason = reject_reason(&c, chat, bad).await;
    assert!(reason.contains("model-z"), "{reason}");
}

fn queued(id: &str, text: &str) -> Value {
    json!({"type": "chat/pendingMessageSet", "kind": "queued", "id": id,
        "message": {"text": text, "origin": {"kind": "user"}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_messages_run_in_order_as_further_turns() {
    let st = start_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/q", None).await;
    st.model.push(Reply::Slow {
        chunks: vec!["busy ".into(); 20],
        delay: Duration::from_millis(50),
    });
    for word in ["ONE", "TWO", "THREE"] {
        st.model.push(Reply::Text(format!("Answer {word}.")));
    }
    let mut sub = start_turn(&c, "q", "t1", "work for a while").await;
    wait_action(&mut sub, |a| {
        matches!(a, StateAction::ChatDelta(_)).then_some(())
    })
    .await;
    let chat = &chat_of("ahp-session:/q");
    // Queued during the turn; the second moved before the first.
    for (i, (id, text)) in [
        ("m1", "first ONE"),
        ("m2", "second TWO"),
        ("m3", "third THREE"),
    ]
    .iter()
    .enumerate()
    {
        dispatch_raw(&c, chat, 10 + i as i64, queued(id, text)).await;
    }
    dispatch_raw(
        &c,
        chat,
        20,
        json!({"type": "chat/queuedMessagesReordered", "order": ["m2", "m1", "m3"]}),
    )
    .await;
    // No client action from here: the host starts each as the previous ends.
    let mut started = Vec::new();
    let mut completed = 0;
    while completed < 4 {
        let a = wait_action(&mut sub, |a| match a {
            StateAction::ChatTurnStarted(s) => Some((Some(s.clone()), false)),
            StateAction::ChatTurnComplete(_) => Some((None, true)),
            _ => None,
        })
        .await;
        match a {
            (Some(s), _) => started.push((s.message.text.clone(), s.queued_message_id.clone())),
            (None, _) => completed += 1,
        }
    }
    assert_eq!(
        started,
        [
            ("second TWO".to_string(), Some("m2".to_string())),
            ("first ONE".to_string(), Some("m1".to_string())),
            ("third THREE".to_string(), Some("m3".to_string())),
        ]
    );
    let asked: Vec<String> = st
        .model
        .requests()
        .iter()
        .filter_map(|r| {
            r["messages"].as_array()?.last()?["content"]
                .as_str()
                .map(String::from)
        })
        .collect();
    let order: Vec<&str> = ["second TWO", "first ONE", "third THREE"]
        .into_iter()
        .filter(|t| asked.iter().any(|a| a.contains(t)))
        .collect();
    assert_eq!(
        order.len(),
        3,
        "each queued message reached the model: {asked:?}"
    );
    let snap = raw_subscribe(&c, chat).await;
    assert!(snap["snapshot"]["state"]["queuedMessages"]
        .as_array()
        .is_none_or(|q| q.is_empty()));
    // Queued while idle: started at once.
    st.model.push(Reply::Text("Right away.".into()));
    dispatch_raw(&c, chat, 30, queued("m4", "idle FOUR")).await;
    let text = wait_action(&mut sub, |a| match a {
        StateAction::ChatTurnStarted(s) => Some(s.message.text.clone()),
        _ => None,
    })
    .await;
    assert_eq!(text, "idle FOUR");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steering_message_reaches_the_running_turn() {
    let st = start_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/s", None).await;
    st.model.push(Reply::Slow {
        chunks: vec!["busy ".into(); 20],
        delay: Duration::from_millis(50),
    });
    st.model.push(Reply::Text("Steered: yes.".into()));
    let mut sub = start_turn(&c, "s", "t1", "work for a while").await;
    wait_action(&mut sub, |a| {
        matches!(a, StateAction::ChatDelta(_)).then_some(())
    })
    .await;
    let chat = &chat_of("ahp-session:/s");
    dispatch_raw(
        &c,
        chat,
        10,
        json!({"type": "chat/pendingMessageSet", "kind": "steering", "id": "s1",
        "message": {"text": "STEER-NOW: also say yes", "origin": {"kind": "user"}}}),
    )
    .await;
    let removed = wait_action(&mut sub, |a| match a {
        StateAction::ChatPendingMessageRemoved(r) => Some(r.id.clone()),
        _ => None,
    })
    .await;
    assert_eq!(removed, "s1", "the host consumed the steering message");
    let end = wait_turn_end(&mut sub, "t1").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    // The runtime answers it within the same turn (after the response it was
    // streaming, or at the next tool boundary): one turn, both answers.
    assert!(end.text.contains("Steered: yes."), "{end:?}");
    let steered = st
        .model
        .requests()
        .iter()
        .any(|r| r["messages"].to_string().contains("STEER-NOW"));
    assert!(steered, "the model received the steering message");
    let snap = raw_subscribe(&c, chat).await;
    assert_eq!(
        snap["snapshot"]["state"]["turns"].as_array().unwrap().len(),
        1
    );
}
