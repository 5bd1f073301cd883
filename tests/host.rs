//! The AHP host, driven over a real WebSocket by the official `ahp` client.

use crate::support;

use std::time::Duration;

use ahp::SubscriptionEvent;
use ahp_bridge_join::ahp::errors::AhpError;
use ahp_bridge_join::jsonrpc::ErrorCode;
use ahp_types::actions::StateAction;
use serde_json::{json, Value};
use support::raw::{Next, Raw};
use support::*;

fn opted_in(client: &str, sections: &[&str]) -> Value {
    json!({"clientId": client, "tools": [], "systemMessageTransform": {"sections": sections}})
}

#[tokio::test]
async fn handshake_gives_root_snapshot_with_catalogue() {
    let r = start_host(test_config()).await;
    let c = client(&r).await;
    let init: Value = c
        .request(
            "initialize",
            json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": "a", "initialSubscriptions": ["ahp-root://"]}),
        )
        .await
        .unwrap();
    assert_eq!(init["protocolVersion"], "1.0.0");
    assert_eq!(init["serverInfo"]["name"], "ahp-copilot-bridge");
    let agent = &init["snapshots"][0]["state"]["agents"][0];
    assert_eq!(agent["provider"], "copilot");
    assert_eq!(agent["models"][0]["id"], "gpt-4.1");
    let secs = agent["systemMessageSections"].as_array().unwrap();
    assert!(secs
        .iter()
        .any(|s| s["id"] == "safety" && s["restricted"] == true));
    assert!(secs
        .iter()
        .any(|s| s["id"] == "tone" && s.get("restricted").is_none()));
    // The typed client API parses the same answer.
    let c2 = client(&r).await;
    let typed = c2
        .initialize("b".into(), vec!["1.0.0".into()], vec!["ahp-root://".into()])
        .await
        .unwrap();
    assert_eq!(typed.snapshots.len(), 1);
}

#[tokio::test]
async fn failed_negotiation_is_32005_and_closes() {
    let r = start_host(test_config()).await;
    let mut raw = Raw::connect(&format!("ws://{}", r.addr)).await;
    let a = raw
        .call(
            json!(1),
            "initialize",
            json!({"channel": "ahp-root://", "protocolVersions": ["9.0.0"], "clientId": "x"}),
        )
        .await;
    assert_eq!(a["error"]["code"], -32005);
    let supported = a["error"]["data"]["supportedVersions"].as_array().unwrap();
    assert!(supported.contains(&json!("1.0.0")));
    assert!(matches!(raw.next().await, Next::Closed(_)));
}

#[tokio::test]
async fn ping_before_initialize() {
    let r = start_host(test_config()).await;
    let c = client(&r).await;
    c.ping().await.expect("ping answered before initialize");
    let e = c
        .request::<_, Value>("listSessions", json!({"channel": "ahp-root://"}))
        .await
        .unwrap_err();
    assert_eq!(rpc_code(&e), i32::from(ErrorCode::InvalidRequest), "{e}");
    assert!(e.to_string().contains("initialize"), "{e}");
}

#[tokio::test]
async fn create_session_is_seen_by_second_client() {
    let r = start_host(test_config()).await;
    let a = initialized(&r, "a").await;
    let b = initialized(&r, "b").await;
    let mut events = b.events();
    create_session(&a, "ahp-session:/s1", None).await;
    let added = wait_event(&mut events, |e| match e {
        SubscriptionEvent::SessionAdded(p) => Some(p.summary.resource.clone()),
        _ => None,
    })
    .await;
    assert_eq!(added, "ahp-session:/s1");
    let snap = raw_subscribe(&b, "ahp-session:/s1").await;
    assert_eq!(snap["snapshot"]["state"]["lifecycle"], "ready");
    let list: Value = b
        .request("listSessions", json!({"channel": "ahp-root://"}))
        .await
        .unwrap();
    assert_eq!(list["items"][0]["resource"], "ahp-session:/s1");
    // Duplicate and malformed URIs.
    let dup = a
        .request::<_, Value>("createSession", json!({"channel": "ahp-session:/s1"}))
        .await
        .unwrap_err();
    assert_eq!(
        rpc_code(&dup),
        i32::from(AhpError::SessionAlreadyExists),
        "{dup}"
    );
    let bad = a
        .request::<_, Value>("createSession", json!({"channel": "nope"}))
        .await
        .unwrap_err();
    assert_eq!(rpc_code(&bad), i32::from(ErrorCode::InvalidParams), "{bad}");
    assert!(bad.to_string().contains("channel"), "{bad}");
    // Dispose is seen too.
    a.request::<_, Value>("disposeSession", json!({"channel": "ahp-session:/s1"}))
        .await
        .unwrap();
    let removed = wait_event(&mut events, |e| match e {
        SubscriptionEvent::SessionRemoved(p) => Some(p.session.clone()),
        _ => None,
    })
    .await;
    assert_eq!(removed, "ahp-session:/s1");
}

#[tokio::test]
async fn opt_in_survives_in_snapshots_and_echoes() {
    let r = start_host(test_config()).await;
    let a = initialized(&r, "a").await;
    create_session(&a, "ahp-session:/s2", Some(opted_in("a", &["tone"]))).await;
    // A second observer on a raw socket sees the echoed action with the field.
    let mut raw = Raw::connect(&format!("ws://{}", r.addr)).await;
    raw.call(json!(1), "initialize", json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": "watcher", "initialSubscriptions": ["ahp-session:/s2"]})).await;
    dispatch_raw(&a, "ahp-session:/s2", 1, json!({"type": "session/activeClientSet", "activeClient": opted_in("a", &["tone", "guidelines"])})).await;
    let echoed = loop {
        match raw.next().await {
            Next::Json(v)
                if v["method"] == "action"
                    && v["params"]["action"]["type"] == "session/activeClientSet" =>
            {
                break v
            }
            Next::Json(_) => continue,
            Next::Closed(c) => panic!("closed: {c:?}"),
        }
    };
    assert_eq!(echoed["params"]["origin"]["clientId"], "a");
    assert_eq!(
        echoed["params"]["action"]["activeClient"]["systemMessageTransform"]["sections"],
        json!(["tone", "guidelines"])
    );
    let b = initialized(&r, "b").await;
    let snap = raw_subscribe(&b, "ahp-session:/s2").await;
    let clients = snap["snapshot"]["state"]["activeClients"]
        .as_array()
        .unwrap();
    assert_eq!(clients.len(), 1);
    assert_eq!(
        clients[0]["systemMessageTransform"]["sections"],
        json!(["tone", "guidelines"])
    );
}

#[tokio::test]
async fn refused_actions_carry_rejection_reason() {
    let r = start_host(test_config()).await;
    let a = initialized(&r, "a").await;
    create_session(&a, "ahp-session:/s3", None).await;
    let mut events = a.events();
    // A server-only action.
    dispatch_raw(&a, "ahp-session:/s3", 1, json!({"type": "session/ready"})).await;
    let reason = wait_event(&mut events, |e| match e {
        SubscriptionEvent::Action(env)
            if env.origin.as_ref().is_some_and(|o| o.client_seq == 1) =>
        {
            Some(env.rejection_reason.clone())
        }
        _ => None,
    })
    .await;
    assert!(reason.unwrap().contains("only be dispatched by the host"));
    // Setting somebody else's active client.
    dispatch_raw(&a, "ahp-session:/s3", 2, json!({"type": "session/activeClientSet", "activeClient": {"clientId": "mallory", "tools": []}})).await;
    let reason = wait_event(&mut events, |e| match e {
        SubscriptionEvent::Action(env)
            if env.origin.as_ref().is_some_and(|o| o.client_seq == 2) =>
        {
            Some(env.rejection_reason.clone())
        }
        _ => None,
    })
    .await;
    assert!(reason.unwrap().contains("own clientId"));
}

#[tokio::test]
async fn tool_call_complete_only_from_owner() {
    let r = start_host(test_config()).await;
    let owner = initialized(&r, "owner").await;
    let other = initialized(&r, "other").await;
    create_session(&owner, "ahp-session:/s4", None).await;
    let chat = &chat_of("ahp-session:/s4");
    raw_subscribe(&other, chat).await;
    // The host starts a turn and a client tool call owned by "owner".
    let typed = |v: Value| serde_json::from_value::<ahp_types::actions::StateAction>(v).unwrap();
    r.host.dispatch(chat, typed(json!({"type": "chat/turnStarted", "turnId": "t1", "startedAt": "2026-01-01T00:00:00Z", "message": {"text": "hi", "origin": {"kind": "user"}}}))).unwrap();
    r.host.dispatch(chat, typed(json!({"type": "chat/toolCallStart", "turnId": "t1", "toolCallId": "c1", "toolName": "x", "displayName": "x", "contributor": {"kind": "client", "clientId": "owner"}}))).unwrap();
    let complete = json!({"type": "chat/toolCallComplete", "turnId": "t1", "toolCallId": "c1", "result": {"success": true, "pastTenseMessage": "done"}});
    let mut ev = other.events();
    dispatch_raw(&other, chat, 7, complete.clone()).await;
    let reason = wait_event(&mut ev, |e| match e {
        SubscriptionEvent::Action(env)
            if env.origin.as_ref().is_some_and(|o| o.client_id == "other") =>
        {
            Some(env.rejection_reason.clone())
        }
        _ => None,
    })
    .await;
    assert!(reason.unwrap().contains("owns tool call"));
    dispatch_raw(&owner, chat, 1, complete).await;
    let accepted = wait_event(&mut ev, |e| match e {
        SubscriptionEvent::Action(env)
            if env.origin.as_ref().is_some_and(|o| o.client_id == "owner") =>
        {
            Some(env.clone())
        }
        _ => None,
    })
    .await;
    assert!(accepted.rejection_reason.is_none());
    assert!(matches!(
        accepted.action,
        StateAction::ChatToolCallComplete(_)
    ));
}

#[tokio::test]
async fn reconnect_by_replay_and_by_snapshot() {
    let mut cfg = test_config();
    cfg.server.replay_buffer = 8;
    let r = start_host(cfg).await;
    let a = initialized(&r, "a").await;
    create_session(&a, "ahp-session:/s5", None).await;
    let seen: Value = a
        .request("subscribe", json!({"channel": "ahp-session:/s5"}))
        .await
        .unwrap();
    let last = seen["snapshot"]["fromSeq"].as_i64().unwrap();
    a.shutdown().await;
    let b = initialized(&r, "b").await;
    dispatch_raw(
        &b,
        "ahp-session:/s5",
        1,
        json!({"type": "session/titleChanged", "title": "while away"}),
    )
    .await;
    eventually("title applied", || {
        r.host.snapshot("ahp-session:/s5").unwrap()["state"]["title"] == "while away"
    })
    .await;

    let a2 = client(&r).await;
    let rec: Value = a2
        .request("reconnect", json!({"channel": "ahp-root://", "clientId": "a", "lastSeenServerSeq": last, "subscriptions": ["ahp-session:/s5", "ahp-session:/gone"]}))
        .await
        .unwrap();
    assert_eq!(rec["type"], "replay");
    assert_eq!(rec["missing"], json!(["ahp-session:/gone"]));
    let actions = rec["actions"].as_array().unwrap();
    assert_eq!(actions.len(), 1);
    assert_eq!(actions[0]["action"]["title"], "while away");
    a2.shutdown().await;

    // Push the gap past the replay buffer: a snapshot comes back instead.
    for i in 0..10 {
        dispatch_raw(
            &b,
            "ahp-session:/s5",
            2 + i,
            json!({"type": "session/titleChanged", "title": format!("t{i}")}),
        )
        .await;
    }
    eventually("titles applied", || {
        r.host.snapshot("ahp-session:/s5").unwrap()["state"]["title"] == "t9"
    })
    .await;
    let a3 = client(&r).await;
    let rec: Value = a3
        .request("reconnect", json!({"channel": "ahp-root://", "clientId": "a", "lastSeenServerSeq": last, "subscriptions": ["ahp-session:/s5"]}))
        .await
        .unwrap();
    assert_eq!(rec["type"], "snapshot");
    assert_eq!(rec["snapshots"][0]["state"]["title"], "t9");
}

#[tokio::test]
async fn vanished_active_client_is_removed_after_grace() {
    let mut cfg = test_config();
    cfg.server.client_grace = Duration::from_millis(300);
    let r = start_host(cfg).await;
    let a = initialized(&r, "a").await;
    create_session(&a, "ahp-session:/s6", Some(opted_in("a", &["tone"]))).await;
    let b = initialized(&r, "b").await;
    let (_, mut sub) = b.subscribe("ahp-session:/s6".into()).await.unwrap();
    let started = std::time::Instant::now();
    a.shutdown().await;
    let removed = tokio::time::timeout(DEADLINE, async {
        loop {
            if let Some(SubscriptionEvent::Action(env)) = sub.recv().await {
                if let StateAction::SessionActiveClientRemoved(x) = env.action {
                    return x.client_id;
                }
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(removed, "a");
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "not before the grace period"
    );
    assert!(r
        .host
        .for_backend()
        .active_clients("ahp-session:/s6")
        .is_empty());
}

#[tokio::test]
async fn reconnect_within_grace_keeps_the_client() {
    let mut cfg = test_config();
    cfg.server.client_grace = Duration::from_millis(400);
    let r = start_host(cfg).await;
    let a = initialized(&r, "a").await;
    create_session(&a, "ahp-session:/s7", Some(opted_in("a", &["tone"]))).await;
    a.shutdown().await;
    eventually("disconnect noticed", || {
        !r.host.connections().is_connected("a")
    })
    .await;
    let a2 = client(&r).await;
    let _: Value = a2
        .request("reconnect", json!({"channel": "ahp-root://", "clientId": "a", "lastSeenServerSeq": 0, "subscriptions": []}))
        .await
        .unwrap();
    // Wait past the grace period by waiting on a later action's arrival.
    let b = initialized(&r, "b").await;
    let (_, mut sub) = b.subscribe("ahp-session:/s7".into()).await.unwrap();
    eventually("grace timer ran", || {
        r.host.connections().grace_timers_fired() >= 1
    })
    .await;
    dispatch_raw(
        &b,
        "ahp-session:/s7",
        1,
        json!({"type": "session/titleChanged", "title": "marker"}),
    )
    .await;
    loop {
        match tokio::time::timeout(DEADLINE, sub.recv()).await.unwrap() {
            Some(SubscriptionEvent::Action(env)) => match env.action {
                StateAction::SessionActiveClientRemoved(_) => {
                    panic!("client removed although it came back")
                }
                StateAction::SessionTitleChanged(_) => break,
                _ => {}
            },
            _ => continue,
        }
    }
    assert_eq!(
        r.host.for_backend().active_clients("ahp-session:/s7").len(),
        1
    );
}

/// A `lastSeenServerSeq` this host never sent, up to the largest a JSON
/// unsigned 64-bit number can say, is answered with snapshots.
#[tokio::test]
async fn reconnect_from_any_server_seq_up_to_u64_max_gets_snapshots() {
    let r = start_host(test_config()).await;
    let a = initialized(&r, "a").await;
    create_session(&a, "ahp-session:/big", None).await;
    a.shutdown().await;
    for seen in [u64::MAX, i64::MAX as u64 + 1] {
        eventually("disconnect noticed", || {
            !r.host.connections().is_connected("a")
        })
        .await;
        let c = client(&r).await;
        let answer: Value = c
            .request("reconnect", json!({"channel": "ahp-root://", "clientId": "a", "lastSeenServerSeq": seen, "subscriptions": ["ahp-session:/big"]}))
            .await
            .expect("not -32602");
        assert_eq!(answer["type"], "snapshot", "{answer}");
        c.shutdown().await;
    }
}
