//! Faults the real runtime cannot be made to show, driven by a fake runtime
//! on TCP: garbage frames, calls never answered, events for unknown sessions,
//! requests the bridge does not support, a runtime that stops answering.
//! The client side is the official `ahp` client over a real WebSocket.

use crate::support;

use std::time::Duration;

use ahp_bridge_join::config::Config;
use serde_json::{json, Value};
use support::e2e::{creation_outcome, wait_turn_end};
use support::fake_fixture::{bridge_on_fake, fixture, fixture_with, raw_chat_subscriber, Fixture};
use support::fake_runtime::FakeConn;
use support::*;

#[tokio::test]
async fn garbage_bodies_are_survived_and_a_broken_frame_reconnects() {
    let mut f = fixture(|_| {}).await;
    // Bodies that are not JSON-RPC: logged and skipped, the connection stays.
    f.conn.send_raw(b"Content-Length: 9\r\n\r\nnot json!");
    f.conn
        .send(&json!({"jsonrpc": "2.0", "id": 5, "nonsense": true}));
    let bad = f.conn.answer_to(json!(5)).await;
    assert_eq!(
        bad["error"]["code"], -32600,
        "an invalid request is refused: {bad}"
    );
    let end = f.turn("t1", "still here").await;
    assert_eq!((end.kind, end.text.as_str()), ("complete", "still here"));
    // A frame that cannot be parsed: the stream is lost, so the bridge drops
    // it and connects again; the session resumes on the next turn.
    f.conn.send_raw(b"Content-Length: banana\r\n\r\n{}");
    assert!(
        f.conn.closed().await,
        "the bridge drops a connection it cannot parse"
    );
    let mut conn2 = f.fake.next_conn().await;
    conn2.call_of("connect").await;
    f.conn = conn2;
    let mut sub = f.start_turn("t2", "again").await;
    let resume = f.conn.call_of("session.resume").await;
    assert_eq!(resume["params"]["sessionId"], f.runtime_id.as_str());
    let send = f.conn.call_of("session.send").await;
    assert_eq!(send["params"]["sessionId"], f.runtime_id.as_str());
    f.conn.event(&f.runtime_id, "session.idle", json!({}));
    assert_eq!(wait_turn_end(&mut sub, "t2").await.kind, "complete");
}

#[tokio::test]
async fn a_call_never_answered_ends_the_turn_at_its_deadline() {
    let f = fixture(|c| c.runtime.call_timeout = Duration::from_millis(500)).await;
    f.fake.apply("send-never-answered");
    let mut sub = f.start_turn("t1", "hello?").await;
    let end = wait_turn_end(&mut sub, "t1").await;
    assert_eq!(end.kind, "error", "{end:?}");
    let msg = end.error.unwrap();
    assert!(
        msg.contains("session.send") && msg.contains("no answer within"),
        "{msg}"
    );
}

#[tokio::test]
async fn events_for_an_unknown_session_are_ignored() {
    let f = fixture(|_| {}).await;
    f.fake.apply("unknown-session-events");
    let mut sub = f.start_turn("t1", "hi").await;
    let end = wait_turn_end(&mut sub, "t1").await;
    assert_eq!((end.kind, end.text.as_str()), ("complete", "mine"));
}

#[tokio::test]
async fn every_runtime_request_is_answered() {
    let mut f = fixture(|_| {}).await;
    let ask = |id: Value, method: &str, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    // Unsupported: method not found, with number and string ids.
    f.conn.send(&ask(
        json!(7),
        "exitPlanMode.request",
        json!({"sessionId": f.runtime_id}),
    ));
    let a = f.conn.answer_to(json!(7)).await;
    assert_eq!(a["error"]["code"], -32601, "{a}");
    f.conn
        .send(&ask(json!("s-1"), "some.future.request", json!({})));
    let a = f.conn.answer_to(json!("s-1")).await;
    assert_eq!(a["error"]["code"], -32601, "{a}");
    // Supported ones are answered even when nobody can act on them.
    f.conn.send(&ask(
        json!(8),
        "userInput.request",
        json!({"sessionId": f.runtime_id, "question": "no turn runs"}),
    ));
    assert_eq!(
        f.conn.answer_to(json!(8)).await["result"],
        json!({"noResponse": true})
    );
    f.conn.send(&ask(
        json!(9),
        "hooks.invoke",
        json!({"sessionId": f.runtime_id}),
    ));
    assert_eq!(
        f.conn.answer_to(json!(9)).await["result"],
        json!({"output": {}})
    );
    f.conn.send(&ask(
        json!(10),
        "systemMessage.transform",
        json!({"sessionId": "unknown", "sections": {"tone": {"content": "T"}}}),
    ));
    assert_eq!(
        f.conn.answer_to(json!(10)).await["result"],
        json!({"sections": {"tone": {"content": "T"}}}),
        "an unknown session's text comes back unchanged"
    );
}

#[tokio::test]
async fn a_runtime_that_stops_answering_is_replaced() {
    let mut f = fixture(|c| {
        c.runtime.health_interval = Duration::from_millis(200);
        c.runtime.health_timeout = Duration::from_millis(300);
    })
    .await;
    assert_eq!(f.turn("t0", "first").await.kind, "complete");
    // The runtime goes deaf in the middle of a turn.
    f.fake.apply("pings-unanswered");
    let mut sub = f.start_turn("t1", "hello?").await;
    f.conn.call_of("session.send").await;
    let end = wait_turn_end(&mut sub, "t1").await;
    assert_eq!(end.kind, "error", "{end:?}");
    assert!(f.conn.closed().await, "the deaf connection is dropped");
    f.fake.apply("default");
    f.conn = f.fake.next_conn().await;
    let mut sub = f.start_turn("t2", "back?").await;
    let resume = f.conn.call_of("session.resume").await;
    assert_eq!(resume["params"]["sessionId"], f.runtime_id.as_str());
    f.conn.call_of("session.send").await;
    f.conn.event(&f.runtime_id, "session.idle", json!({}));
    assert_eq!(wait_turn_end(&mut sub, "t2").await.kind, "complete");
}

#[tokio::test]
async fn another_protocol_version_is_refused_with_a_clear_error() {
    let (fake, _bridge, client) = bridge_on_fake(|_| {}).await;
    fake.apply("old-protocol");
    create_session(&client, "ahp-session:/old", None).await;
    let err = creation_outcome(&client, "ahp-session:/old")
        .await
        .expect("creation fails");
    assert!(
        err.contains("protocol version 2") && err.contains("only 3"),
        "{err}"
    );
}

#[tokio::test]
async fn a_runtime_without_connect_is_greeted_with_ping() {
    let (fake, _bridge, client) = bridge_on_fake(|_| {}).await;
    fake.apply("no-connect");
    create_session(&client, "ahp-session:/ping", None).await;
    let mut conn = fake.next_conn().await;
    conn.call_of("ping").await;
    assert_eq!(creation_outcome(&client, "ahp-session:/ping").await, None);
}

#[tokio::test]
async fn a_refused_create_is_creation_failed_with_the_runtimes_message() {
    let (fake, _bridge, client) = bridge_on_fake(|_| {}).await;
    fake.apply("refused-create");
    create_session(&client, "ahp-session:/no", None).await;
    let err = creation_outcome(&client, "ahp-session:/no")
        .await
        .expect("creation fails");
    assert!(err.contains("model gpt-9 is not available"), "{err}");
}

/// A bridge on the fake runtime whose session's active client `ide`
/// provides the tool `lookup` (which `client-tool-requested` calls).
async fn with_client_tool(tune: impl FnOnce(&mut Config)) -> Fixture {
    let tool =
        json!({"name": "lookup", "description": "Looks up", "inputSchema": {"type": "object"}});
    fixture_with(tune, Some(json!({"clientId": "ide", "tools": [tool]}))).await
}

/// The runtime's tool call `r-1` answered as failed, on both sides: the
/// text the runtime got, and the AHP result of tool call `tc-1`.
async fn tool_call_failed(
    conn: &mut FakeConn,
    chat: &mut ahp::SessionSubscription,
) -> (String, Value) {
    use ahp_types::actions::StateAction;
    let answer = conn.call_of("session.tools.handlePendingToolCall").await;
    let p = &answer["params"];
    assert_eq!(p["requestId"], "r-1");
    assert_eq!(p["result"]["resultType"], "failure", "{p}");
    let text = p["result"]["textResultForLlm"].as_str().unwrap().to_owned();
    let done = support::e2e::wait_action(chat, |a| match a {
        StateAction::ChatToolCallComplete(c) if c.tool_call_id == "tc-1" => Some(c.clone()),
        _ => None,
    })
    .await;
    let result = serde_json::to_value(&done.result).unwrap();
    assert_eq!(result["success"], false, "{result}");
    (text, result)
}

#[tokio::test]
async fn a_client_tool_whose_owner_is_gone_fails_with_a_clear_message() {
    use ahp_types::actions::StateAction;
    let mut f = with_client_tool(|c| c.server.client_grace = Duration::from_millis(200)).await;
    let watcher = initialized(&f.bridge, "watcher").await;
    let (_, mut sub) = watcher.subscribe(chat_of("ahp-session:/f")).await.unwrap();
    let (_, mut session) = watcher.subscribe("ahp-session:/f".into()).await.unwrap();
    f.fake.apply("client-tool-requested");
    let _turn = f.start_turn("t1", "look it up").await;
    support::e2e::wait_action(&mut sub, |a| {
        matches!(a, StateAction::ChatToolCallStart(s) if s.tool_call_id == "tc-1").then_some(())
    })
    .await;
    let needed = support::e2e::wait_input_needed(&mut session).await;
    assert_eq!(needed["kind"], "toolClientExecution", "{needed}");
    assert_eq!(needed["toolCall"]["toolCallId"], "tc-1", "{needed}");
    // The owner goes away and does not come back within its grace.
    drop(f.client);
    let (text, _) = tool_call_failed(&mut f.conn, &mut sub).await;
    assert!(text.contains("left"), "{text}");
    support::e2e::assert_no_input_needed(&watcher, "ahp-session:/f").await;
}

/// Waits for `fut` up to `limit`, failing with `what`.
async fn within<T>(limit: Duration, what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(limit, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within {limit:?}"))
}

/// `session.error` ends the turn and leaves the session idle at once, with no
/// `session.idle` from the runtime: the next turn is sent without waiting.
#[tokio::test]
async fn a_turn_after_a_session_error_without_idle_is_sent_at_once() {
    let mut f = fixture(|_| {}).await;
    let mut sub = f.start_turn("t1", "hi").await;
    f.conn.call_of("session.send").await;
    f.conn.event(
        &f.runtime_id,
        "session.error",
        json!({"errorType": "model", "message": "the model failed"}),
    );
    // No `session.idle` follows. The client sees the turn end with the error.
    let end = wait_turn_end(&mut sub, "t1").await;
    assert_eq!(end.kind, "error", "{end:?}");
    assert_eq!(end.error.as_deref(), Some("the model failed"), "{end:?}");
    let mut sub = f.start_turn("t2", "again").await;
    // The point of the test is this deadline. A new turn first waits until the
    // session is idle, for a cancelled turn's runtime up to DRAIN_LIMIT (10 s,
    // crates/bridge/src/bridge/session.rs), then sends anyway. Were the session left waiting
    // for the runtime's idle after the error (draining, or the turn still
    // running), the send would come only after those 10 s; 5 s tells the two
    // apart with room for a slow machine.
    let send = within(
        Duration::from_secs(5),
        "the second turn's session.send",
        f.conn.call_of("session.send"),
    )
    .await;
    assert_eq!(send["params"]["sessionId"], f.runtime_id.as_str());
    assert_eq!(send["params"]["prompt"], "again", "{send}");
    // And the second turn runs to its end.
    f.conn.event(
        &f.runtime_id,
        "assistant.message_delta",
        json!({"messageId": "m-2", "deltaContent": "second"}),
    );
    f.conn.event(&f.runtime_id, "session.idle", json!({}));
    let end = wait_turn_end(&mut sub, "t2").await;
    assert_eq!((end.kind, end.text.as_str()), ("complete", "second"));
}

#[tokio::test]
async fn a_client_tool_not_completed_in_time_fails_on_both_sides() {
    use ahp_types::actions::StateAction;
    let mut f =
        with_client_tool(|c| c.runtime.client_tool_timeout = Duration::from_millis(300)).await;
    f.fake.apply("client-tool-requested");
    let mut sub = f.start_turn("t1", "look it up").await;
    support::e2e::wait_action(&mut sub, |a| {
        matches!(a, StateAction::ChatToolCallStart(s) if s.tool_call_id == "tc-1").then_some(())
    })
    .await;
    // The owner stays connected and never completes the call.
    let (text, result) = tool_call_failed(&mut f.conn, &mut sub).await;
    assert!(
        text.contains("did not complete tool lookup within 300ms")
            && text.contains("client_tool_timeout"),
        "{text}"
    );
    assert!(
        result.to_string().contains("client_tool_timeout"),
        "{result}"
    );
    support::e2e::assert_no_input_needed(&f.client, "ahp-session:/f").await;
}

/// A raw client of the bridge in `f`, initialized and subscribed to the chat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_burst_reaches_a_slow_reader_whole_and_cuts_off_a_stalled_one() {
    use support::raw::Next;
    let mut f = fixture(|c| {
        c.server.outbound_queue = 16;
        c.server.outbound_queue_bytes = 8 * 1024 * 1024;
    })
    .await;
    let mut steady = raw_chat_subscriber(&f, "steady").await;
    let mut stalled = raw_chat_subscriber(&f, "stalled").await;

    // The steady reader: once told to start, reads everything, pausing after
    // every message, and says how much text it has.
    let (start, started) = tokio::sync::oneshot::channel::<()>();
    let (progress, mut seen) = tokio::sync::watch::channel(0usize);
    let reader = tokio::spawn(async move {
        let _ = started.await;
        let (mut text, mut turns) = (String::new(), 0);
        while turns < 2 {
            match steady.next().await {
                Next::Json(v) if v["method"] == "action" => {
                    let a = &v["params"]["action"];
                    if a["type"] == "chat/delta" {
                        text.push_str(a["content"].as_str().unwrap());
                        progress.send_replace(text.len());
                    } else if a["type"] == "chat/turnComplete" {
                        turns += 1;
                    }
                    tokio::time::sleep(Duration::from_micros(300)).await;
                }
                Next::Json(_) => {}
                Next::Closed(c) => panic!("the steady reader was disconnected: {c:?}"),
            }
        }
        text
    });

    // Burst: 5000 deltas while the reader is not reading yet. Far more than
    // the 16 messages its queue may hold once its socket is full; merged,
    // they are a few messages of ~1.5 MB.
    let small = |i: usize| format!("{i:05}{}", "s".repeat(295));
    let mut sub = f.start_turn("t1", "burst").await;
    f.conn.call_of("session.send").await;
    for i in 0..5000 {
        f.conn.event(
            &f.runtime_id,
            "assistant.message_delta",
            json!({"messageId": "m-1", "deltaContent": small(i)}),
        );
    }
    f.conn.event(&f.runtime_id, "session.idle", json!({}));
    assert_eq!(wait_turn_end(&mut sub, "t1").await.kind, "complete");
    let _ = start.send(());

    // A long answer, 20 MB, paced by the steady reader: each MB is sent once
    // it has read the one before. The stalled client's queue (8 MB) and
    // socket buffers cannot hold it.
    let big = |i: usize| format!("{i:05}{}", "b".repeat(10_000 - 5));
    let mut expected: String = (0..5000).map(small).collect();
    let mut sub = f.start_turn("t2", "long").await;
    f.conn.call_of("session.send").await;
    for batch in 0..20 {
        for i in batch * 100..(batch + 1) * 100 {
            f.conn.event(
                &f.runtime_id,
                "assistant.message_delta",
                json!({"messageId": "m-2", "deltaContent": big(i)}),
            );
            expected.push_str(&big(i));
        }
        let want = expected.len();
        tokio::time::timeout(DEADLINE, seen.wait_for(|n| *n >= want))
            .await
            .unwrap_or_else(|_| panic!("the steady reader did not get batch {batch}"))
            .unwrap();
    }
    f.conn.event(&f.runtime_id, "session.idle", json!({}));
    assert_eq!(wait_turn_end(&mut sub, "t2").await.kind, "complete");
    let text = reader.await.unwrap();
    assert_eq!(
        text.len(),
        expected.len(),
        "the whole answer reached the steady reader"
    );
    assert!(text == expected, "in order");
    // The stalled one was cut off: what reached its socket, then the end.
    let closed = loop {
        match stalled.next().await {
            Next::Json(_) => continue,
            Next::Closed(c) => break c,
        }
    };
    assert_eq!(
        closed, None,
        "dropped without a close frame, as a client that does not read is"
    );
}

#[tokio::test]
async fn authenticate_hands_the_token_to_the_runtime_sessions_of_its_principal() {
    let mut f = fixture(|_| {}).await;
    // No provider of the operator's: the runtime signs in to GitHub.
    let root = raw_subscribe(&f.client, "ahp-root://").await;
    let advertised = &root["snapshot"]["state"]["agents"][0]["protectedResources"][0];
    assert_eq!(advertised["resource"], "https://api.github.com", "{root}");
    let wrong = f
        .client
        .request::<_, Value>(
            "authenticate",
            json!({"channel": "ahp-root://", "resource": "https://example.com", "token": "t"}),
        )
        .await
        .unwrap_err();
    assert_eq!(rpc_code(&wrong), -32602, "{wrong:?}");
    f.client
        .request::<_, Value>("authenticate", json!({"channel": "ahp-root://", "resource": "https://api.github.com", "token": "gho_SECRET1"}))
        .await
        .unwrap();
    // The live session gets it at once...
    let call = f.conn.call_of("session.gitHubAuth.setCredentials").await;
    assert_eq!(call["params"]["sessionId"], f.runtime_id.as_str());
    assert_eq!(call["params"]["credentials"]["token"], "gho_SECRET1");
    // ...and a new one at create.
    create_session(&f.client, "ahp-session:/g", None).await;
    let create = f.conn.call_of("session.create").await;
    assert_eq!(create["params"]["gitHubToken"], "gho_SECRET1");
}

#[tokio::test]
async fn with_a_provider_nothing_is_advertised_and_authenticate_is_refused() {
    let (_fake, _bridge, client) = bridge_on_fake(|c| {
        c.runtime.provider = Some(ahp_bridge_join::config::ProviderConfig {
            kind: "openai".into(),
            base_url: "http://127.0.0.1:9/v1".into(),
            api_key: Some("sk-x".into()),
            api_key_env: None,
        })
    })
    .await;
    let root = raw_subscribe(&client, "ahp-root://").await;
    assert!(
        root["snapshot"]["state"]["agents"][0]
            .get("protectedResources")
            .is_none(),
        "{root}"
    );
    let e = client
        .request::<_, Value>(
            "authenticate",
            json!({"channel": "ahp-root://", "resource": "https://api.github.com", "token": "t"}),
        )
        .await
        .unwrap_err();
    assert_eq!(rpc_code(&e), -32602, "{e:?}");
}

/// A runtime that answers pings but never finishes the turn: at `[runtime]
/// turn_inactivity_timeout` the turn ends with an error naming it and the
/// runtime is told to abort.
#[tokio::test]
async fn a_silent_turn_ends_at_the_inactivity_timeout() {
    let mut f = fixture(|c| c.runtime.turn_inactivity_timeout = Duration::from_millis(600)).await;
    let mut sub = f.start_turn("t1", "hello?").await;
    f.conn.call_of("session.send").await;
    // One event keeps it alive; then nothing.
    f.conn.event(
        &f.runtime_id,
        "assistant.message_delta",
        json!({"messageId": "m-1", "deltaContent": "thinking"}),
    );
    let end = wait_turn_end(&mut sub, "t1").await;
    assert_eq!(end.kind, "error", "{end:?}");
    let msg = end.error.unwrap();
    assert!(msg.contains("turn_inactivity_timeout"), "{msg}");
    let abort = f.conn.call_of("session.abort").await["params"].clone();
    assert_eq!(abort["sessionId"], f.runtime_id.as_str());
}

/// A call shown running was never pending confirmation: confirming it is
/// rejected with a reason, and changes nothing.
#[tokio::test]
async fn confirming_a_call_that_is_not_pending_is_rejected() {
    use ahp::SubscriptionEvent;
    use ahp_types::actions::StateAction;
    let mut f = fixture(|_| {}).await;
    let chat = chat_of("ahp-session:/f");
    let mut sub = f.start_turn("t1", "look").await;
    f.conn.call_of("session.send").await;
    f.conn.event(
        &f.runtime_id,
        "tool.execution_start",
        json!({"toolCallId": "c1", "toolName": "view", "arguments": {"path": "a"}}),
    );
    // No permission prompt follows: the call is shown running.
    let ready = support::e2e::wait_action(&mut sub, |a| match a {
        StateAction::ChatToolCallReady(r) if r.tool_call_id == "c1" => Some(r.clone()),
        _ => None,
    })
    .await;
    assert!(ready.confirmed.is_some(), "{ready:?}");
    let mut events = f.client.events();
    let confirm = json!({"type": "chat/toolCallConfirmed", "turnId": "t1", "toolCallId": "c1",
                         "approved": true, "confirmed": "user-action"});
    dispatch_raw(&f.client, &chat, 7, confirm).await;
    let rejection = |e: &SubscriptionEvent| match e {
        SubscriptionEvent::Action(env) if env.origin.as_ref()?.client_seq == 7 => {
            Some(env.rejection_reason.clone())
        }
        _ => None,
    };
    let reason = wait_event(&mut events, rejection).await.expect("rejected");
    assert!(reason.contains("not pending confirmation"), "{reason}");
}
