//! Where clients differ: the WebSocket close handshake, JSON-RPC ids as
//! written, typed params, the versions a client may negotiate (0.9.0 is sent
//! only what 0.9.0 defines; 1.1 may reconnect channel by channel), and a
//! fast writer that reads its echoes is slowed, not cut. Raw sockets, the
//! host alone.

use crate::support;

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use support::raw::{Next, Raw};
use support::*;
use tokio::io::AsyncReadExt;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

async fn raw_at(r: &ahp_bridge_join::Running) -> Raw {
    Raw::connect(&format!("ws://{}", r.addr)).await
}

/// A raw connection initialized as `client_id`, offering `versions`.
async fn raw_speaking(r: &ahp_bridge_join::Running, client_id: &str, versions: &[&str]) -> Raw {
    let mut raw = raw_at(r).await;
    let init = raw
        .call(
            json!(0),
            "initialize",
            json!({"channel": "ahp-root://", "protocolVersions": versions, "clientId": client_id,
                   "initialSubscriptions": ["ahp-root://"]}),
        )
        .await;
    assert!(init.get("result").is_some(), "{init}");
    raw
}

/// The next text frame as written, unparsed.
async fn next_text(raw: &mut Raw) -> String {
    let next = tokio::time::timeout(DEADLINE, async {
        loop {
            match raw.ws.next().await {
                Some(Ok(Message::Text(t))) => return t.as_str().to_owned(),
                Some(Ok(_)) => continue,
                other => panic!("no text frame: {other:?}"),
            }
        }
    });
    next.await.expect("a frame within the deadline")
}

#[tokio::test]
async fn a_client_close_is_answered_with_the_same_code_then_the_socket_ends() {
    let r = start_host(test_config()).await;
    for code in [1000u16, 4000] {
        let mut raw = raw_speaking(&r, &format!("closer-{code}"), &["1.0.0"]).await;
        let frame = CloseFrame {
            code: CloseCode::from(code),
            reason: "bye".into(),
        };
        raw.ws.send(Message::Close(Some(frame))).await.unwrap();
        match raw.next().await {
            Next::Closed(Some((echoed, _))) => assert_eq!(echoed, code),
            other => panic!("the close was not answered with a close: {other:?}"),
        }
        // Then the host ends the TCP connection: the stream ends cleanly.
        let end = tokio::time::timeout(DEADLINE, raw.ws.next()).await.unwrap();
        assert!(end.is_none(), "{end:?}");
    }
}

#[tokio::test]
async fn a_whole_oversize_frame_gets_1009_not_a_reset() {
    // The default limit (4 MiB); the client writes all of 5 MiB first.
    let r = start_host(test_config()).await;
    let mut raw = raw_speaking(&r, "big", &["1.0.0"]).await;
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(5 * 1024 * 1024)
    );
    raw.send_text(big).await;
    match raw.next().await {
        Next::Closed(Some((code, reason))) => {
            assert_eq!(code, 1009);
            assert!(reason.contains("max_frame_bytes"), "{reason}");
        }
        other => panic!("expected a 1009 close, got {other:?}"),
    }
}

#[tokio::test]
async fn ids_are_answered_as_written() {
    let r = start_host(test_config()).await;
    let mut raw = raw_at(&r).await;
    for id in [
        "9223372036854775808",
        "18446744073709551616",
        "1e3",
        "-0.5",
        "1.0",
    ] {
        let frame = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"ping","params":{{"channel":"ahp-root://"}}}}"#
        );
        raw.send_text(frame).await;
        let answer = next_text(&mut raw).await;
        assert!(answer.contains(&format!(r#""id":{id}"#)), "{id}: {answer}");
    }
}

#[tokio::test]
async fn a_param_of_the_wrong_type_is_refused_naming_it() {
    let r = start_host(test_config()).await;
    let mut raw = raw_speaking(&r, "typed", &["1.0.0"]).await;
    let a = raw
        .call(
            json!(1),
            "createSession",
            json!({"channel": "copilot:/p5", "provider": 5}),
        )
        .await;
    assert_eq!(a["error"]["code"], -32602, "{a}");
    assert!(
        a["error"]["message"].as_str().unwrap().contains("provider"),
        "{a}"
    );
    let a = raw
        .call(
            json!(2),
            "createSession",
            json!({"channel": "copilot:/p6", "provider": "copilot", "fork": {"session": "copilot:/p5", "turnId": "t"}}),
        )
        .await;
    assert_eq!(
        a["error"]["code"], -32602,
        "a fork is refused, not ignored: {a}"
    );
    assert!(
        a["error"]["message"].as_str().unwrap().contains("fork"),
        "{a}"
    );
}

#[tokio::test]
async fn a_0_9_client_is_sent_only_what_0_9_defines() {
    let r = start_host(test_config()).await;
    let newer = initialized(&r, "newer").await;
    let mut older = raw_speaking(&r, "older", &["0.9.0"]).await;
    create_session(&newer, "copilot:/v09", None).await;
    let added = older
        .until_json(|f| {
            (f["method"] == "root/sessionAdded").then(|| f["params"]["summary"].clone())
        })
        .await;
    assert_eq!(added["resource"], "copilot:/v09");
    assert!(
        added.get("defaultChat").is_none() && added.get("chats").is_none(),
        "{added}"
    );
    let listed = older.call(json!(1), "listSessions", json!({})).await;
    let item = &listed["result"]["items"][0];
    assert_eq!(item["resource"], "copilot:/v09");
    assert!(
        item.get("defaultChat").is_none() && item.get("chats").is_none(),
        "{item}"
    );

    let chat = chat_of("copilot:/v09");
    older
        .call(json!(2), "subscribe", json!({"channel": chat}))
        .await;
    older
        .call(json!(3), "subscribe", json!({"channel": "copilot:/v09"}))
        .await;
    // An action 1.0 added, then one 0.9 knows: only the second reaches 0.9.
    dispatch_raw(
        &newer,
        &chat,
        1,
        json!({"type": "chat/isReadChanged", "isRead": true}),
    )
    .await;
    let title = json!({"type": "session/titleChanged", "title": "seen"});
    dispatch_raw(&newer, "copilot:/v09", 2, title).await;
    let first = older
        .until_json(|f| (f["method"] == "action").then(|| f["params"]["action"].clone()))
        .await;
    assert_eq!(first["type"], "session/titleChanged", "{first}");
}

#[tokio::test]
async fn reconnect_names_every_channel_it_cannot_resume() {
    let mut cfg = test_config();
    cfg.server.replay_buffer = 2;
    let r = start_host(cfg).await;
    let a = initialized(&r, "away").await;
    create_session(&a, "copilot:/r1", None).await;
    a.shutdown().await;
    let b = initialized(&r, "b").await;
    for i in 0..4 {
        let title = json!({"type": "session/titleChanged", "title": format!("t{i}")});
        dispatch_raw(&b, "copilot:/r1", i + 1, title).await;
    }
    eventually("titles applied", || {
        r.host.snapshot("copilot:/r1").unwrap()["state"]["title"] == "t3"
    })
    .await;
    // Too far behind for a replay: snapshots, and the unknown one missing.
    let mut raw = raw_at(&r).await;
    let rec = raw
        .call(
            json!(1),
            "reconnect",
            json!({"channel": "ahp-root://", "clientId": "away", "lastSeenServerSeq": 0,
                   "subscriptions": ["copilot:/r1", "copilot:/never"]}),
        )
        .await;
    assert_eq!(rec["result"]["type"], "snapshot", "{rec}");
    assert_eq!(rec["result"]["missing"], json!(["copilot:/never"]));
    assert_eq!(rec["result"]["snapshots"][0]["state"]["title"], "t3");
}

#[tokio::test]
async fn a_1_1_client_reconnects_channel_by_channel() {
    let r = start_host(test_config()).await;
    let mut first = raw_speaking(&r, "v11", &["1.1.0"]).await;
    first.create_session(json!(1), "copilot:/c1").await;
    let seen = first
        .call(json!(2), "subscribe", json!({"channel": "copilot:/c1"}))
        .await;
    let cursor = seen["result"]["snapshot"]["fromSeq"].as_i64().unwrap();
    drop(first);
    let b = initialized(&r, "b").await;
    dispatch_raw(
        &b,
        "copilot:/c1",
        1,
        json!({"type": "session/titleChanged", "title": "later"}),
    )
    .await;
    eventually("title applied", || {
        r.host.snapshot("copilot:/c1").unwrap()["state"]["title"] == "later"
    })
    .await;
    let mut raw = raw_at(&r).await;
    let subs = json!([
        {"channel": "copilot:/c1", "lastSeenServerSeq": cursor},
        {"channel": "copilot:/gone", "lastSeenServerSeq": 0},
    ]);
    let rec = raw
        .call(
            json!(1),
            "reconnect",
            json!({"channel": "ahp-root://", "clientId": "v11", "lastSeenServerSeq": cursor, "subscriptions": subs}),
        )
        .await;
    let result = &rec["result"];
    assert_eq!(result["type"], "channels", "{rec}");
    assert_eq!(result["missing"], json!(["copilot:/gone"]));
    let c1 = &result["channels"][0];
    assert_eq!(
        (&c1["channel"], &c1["type"]),
        (&json!("copilot:/c1"), &json!("replay")),
        "{c1}"
    );
    assert_eq!(c1["actions"][0]["action"]["title"], "later", "{c1}");
    // What 1.1 adds and this host does not offer is refused by name.
    let a = raw
        .call(
            json!(2),
            "createTcpConnection",
            json!({"channel": "ahp-tcp:/1", "host": "x", "port": 1}),
        )
        .await;
    assert_eq!(a["error"]["code"], -32601, "{a}");
    assert!(
        a["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not offered"),
        "{a}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_writer_that_reads_its_echoes_is_slowed_not_cut() {
    let r = start_host(test_config()).await;
    let c = initialized(&r, "setup").await;
    create_session(&c, "copilot:/fast", None).await;
    let raw = raw_speaking(&r, "fast", &["1.0.0"]).await;
    let (mut write, mut read) = raw.ws.split();
    write
        .send(Message::text(json!({"jsonrpc": "2.0", "id": 1, "method": "subscribe", "params": {"channel": "copilot:/fast"}}).to_string()))
        .await
        .unwrap();
    const ACTIONS: i64 = 5000;
    let writer = tokio::spawn(async move {
        let pad = "t".repeat(2048);
        for seq in 1..=ACTIONS {
            let action = json!({"type": "session/titleChanged", "title": format!("{seq}{pad}")});
            let params = json!({"channel": "copilot:/fast", "clientSeq": seq, "action": action});
            let frame = json!({"jsonrpc": "2.0", "method": "dispatchAction", "params": params});
            if write.send(Message::text(frame.to_string())).await.is_err() {
                return seq;
            }
        }
        ACTIONS
    });
    // The reader: echoes in the background, a 20 ms pause every 200 frames.
    let mut echoes = 0;
    let mut frames = 0u64;
    let read_all = async {
        while echoes < ACTIONS {
            match read.next().await {
                Some(Ok(Message::Text(t))) => {
                    let v: Value = serde_json::from_str(t.as_str()).unwrap();
                    if v["method"] == "action" && v["params"]["origin"]["clientId"] == "fast" {
                        echoes += 1;
                    }
                }
                Some(Ok(Message::Close(f))) => panic!("cut after {echoes} echoes: {f:?}"),
                Some(Ok(_)) => {}
                other => panic!("lost after {echoes} echoes: {other:?}"),
            }
            frames += 1;
            if frames.is_multiple_of(200) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(120), read_all)
        .await
        .expect("every echo within the hang guard");
    assert_eq!(writer.await.unwrap(), ACTIONS, "every action was written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_stops_is_still_cut() {
    let mut cfg = test_config();
    cfg.server.outbound_queue = 64;
    // No rate limit in the way: what is under test is the reader that stops.
    cfg.server.actions_per_second = 1_000_000;
    cfg.server.actions_burst = 1_000_000;
    let r = start_host(cfg).await;
    let mut writer = raw_speaking(&r, "writer", &["1.0.0"]).await;
    writer.create_session(json!(1), "copilot:/stall").await;
    // Subscribed, then never reads again.
    let mut stalled = raw_speaking(&r, "stalled", &["1.0.0"]).await;
    stalled
        .call(json!(1), "subscribe", json!({"channel": "copilot:/stall"}))
        .await;
    // The writer reads its own 16 KB echoes while it sends: the official
    // client, which does not read while its send waits, could wedge
    // against the host's back-pressure on it (the host stops reading a
    // client whose queue is over half), and the test would hang.
    let (mut sink, mut echoes) = writer.ws.split();
    let reading = tokio::spawn(async move { while let Some(Ok(_)) = echoes.next().await {} });
    let pad = "s".repeat(16 * 1024);
    let sent = tokio::time::timeout(Duration::from_secs(120), async {
        for seq in 1..=2000 {
            let title = json!({"type": "session/titleChanged", "title": format!("{seq}{pad}")});
            let dispatch = json!({"jsonrpc": "2.0", "method": "dispatchAction",
                "params": {"channel": "copilot:/stall", "clientSeq": seq, "action": title}});
            sink.send(Message::text(dispatch.to_string()))
                .await
                .unwrap();
        }
    });
    sent.await.expect("every action sent within the hang guard");
    eventually("the stalled reader is disconnected", || {
        !r.host.connections().is_connected("stalled")
    })
    .await;
    // The writer, which reads, is untouched.
    assert!(r.host.connections().is_connected("writer"));
    reading.abort();
    // The stalled socket was closed by the host: reading it ends.
    let mut tcp = stalled.ws.into_inner();
    let mut sink = vec![0u8; 1 << 20];
    let drained = tokio::time::timeout(DEADLINE, async {
        loop {
            match tcp.read(&mut sink).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    });
    drained.await.expect("the host closed the stalled socket");
}

trait UntilJson {
    async fn until_json<T>(&mut self, pick: impl FnMut(&Value) -> Option<T>) -> T;
}

impl UntilJson for Raw {
    /// Reads frames until `pick` takes one.
    async fn until_json<T>(&mut self, mut pick: impl FnMut(&Value) -> Option<T>) -> T {
        loop {
            match self.next().await {
                Next::Json(v) => {
                    if let Some(t) = pick(&v) {
                        return t;
                    }
                }
                Next::Closed(c) => panic!("closed: {c:?}"),
            }
        }
    }
}
