//! Bad input gets a clear answer and the connection lives on; limits close it
//! with a reason; auth and Origin are checked before the upgrade.

use crate::support;

use serde_json::{json, Value};
use support::raw::{Next, Raw};
use support::*;

async fn raw_initialized(url: &str) -> Raw {
    let mut raw = Raw::connect(url).await;
    let a = raw.call(json!(0), "initialize", json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": format!("raw-{}", uuid_like())})).await;
    assert!(a.get("result").is_some(), "{a}");
    raw
}

fn uuid_like() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

#[tokio::test]
async fn bad_inputs_get_exact_errors_and_ping_still_works() {
    let r = start_host(test_config()).await;
    let url = format!("ws://{}", r.addr);
    // (frame, expected code, expected id, text the message must contain)
    let table: Vec<(&str, i64, Value, &str)> = vec![
        ("{not json", -32700, Value::Null, "parse error"),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"noSuchMethod","params":{}}"#,
            -32601,
            json!(1),
            "noSuchMethod",
        ),
        (
            r#"{"jsonrpc":"2.0","id":"s-2","method":"createSession","params":{}}"#,
            -32602,
            json!("s-2"),
            "channel",
        ),
        (
            r#"{"jsonrpc":"2.0","id":3,"method":"subscribe","params":{"channel":7}}"#,
            -32602,
            json!(3),
            "channel",
        ),
        (
            r#"{"jsonrpc":"2.0","id":4,"method":"createSession","params":{"channel":"ahp-session:/x","workingDirectories":"no"}}"#,
            -32602,
            json!(4),
            "workingDirectories",
        ),
        (r#"[1,2]"#, -32600, Value::Null, "invalid request"),
        (
            r#"{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}"#,
            -32600,
            Value::Null,
            "id",
        ),
    ];
    for (frame, code, id, needle) in table {
        let mut raw = raw_initialized(&url).await;
        raw.send_text(frame).await;
        let a = match raw.next().await {
            Next::Json(v) => v,
            Next::Closed(c) => panic!("{frame}: closed {c:?}"),
        };
        assert_eq!(a["error"]["code"], code, "{frame} -> {a}");
        assert_eq!(a["id"], id, "{frame} -> {a}");
        assert!(
            a["error"]["message"].as_str().unwrap().contains(needle),
            "{frame} -> {a}"
        );
        assert!(raw.ping_ok().await, "ping after {frame}");
    }
    // A binary frame is an error, not a crash.
    let mut raw = raw_initialized(&url).await;
    raw.send_binary(vec![1, 2, 3]).await;
    match raw.next().await {
        Next::Json(a) => assert_eq!(a["error"]["code"], -32600),
        Next::Closed(c) => panic!("closed on binary: {c:?}"),
    }
    assert!(raw.ping_ok().await);
}

#[tokio::test]
async fn oversize_frame_and_deep_json_close_with_reason() {
    let mut cfg = test_config();
    cfg.server.max_frame_bytes = 64 * 1024;
    let r = start_host(cfg).await;
    let url = format!("ws://{}", r.addr);
    let mut raw = raw_initialized(&url).await;
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(100 * 1024)
    );
    raw.send_text(big).await;
    match raw.next().await {
        Next::Closed(Some((code, reason))) => {
            assert_eq!(code, 1009);
            assert!(reason.contains("max_frame_bytes"), "{reason}");
        }
        other => panic!("expected close with reason, got {other:?}"),
    }
    let mut raw = raw_initialized(&url).await;
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{}1{}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    raw.send_text(deep).await;
    match raw.next().await {
        Next::Closed(Some((code, reason))) => {
            assert_eq!(code, 1008);
            assert!(reason.contains("nested deeper than 128"), "{reason}");
        }
        other => panic!("expected close with reason, got {other:?}"),
    }
    // The server itself lives on.
    let mut raw = Raw::connect(&url).await;
    assert!(raw.ping_ok().await);
}

async fn upgrade_status(url: &str, headers: &[(&'static str, &str)]) -> Result<(), u16> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut req = url.into_client_request().unwrap();
    for (k, v) in headers {
        req.headers_mut().insert(*k, v.parse().unwrap());
    }
    match tokio_tungstenite::connect_async(req).await {
        Ok(_) => Ok(()),
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => Err(resp.status().as_u16()),
        Err(e) => panic!("unexpected error {e}"),
    }
}

#[tokio::test]
async fn token_and_origin_are_checked_before_upgrade() {
    let mut cfg = test_config();
    cfg.server.token = Some("secret-token-0123456789".into());
    cfg.server.allowed_origins = vec!["https://ide.example".into()];
    let r = start_host(cfg).await;
    let url = format!("ws://{}", r.addr);
    assert_eq!(upgrade_status(&url, &[]).await, Err(401));
    assert_eq!(
        upgrade_status(&url, &[("authorization", "Bearer wrong")]).await,
        Err(401)
    );
    assert_eq!(
        upgrade_status(&url, &[("authorization", "Bearer secret-token-0123456789")]).await,
        Ok(())
    );
    assert_eq!(
        upgrade_status(&format!("{url}/?token=secret-token-0123456789"), &[]).await,
        Ok(())
    );
    let auth = ("authorization", "Bearer secret-token-0123456789");
    assert_eq!(
        upgrade_status(&url, &[auth, ("origin", "https://evil.example")]).await,
        Err(403)
    );
    assert_eq!(
        upgrade_status(&url, &[auth, ("origin", "https://ide.example")]).await,
        Ok(())
    );
}

#[tokio::test]
async fn client_that_stops_reading_is_disconnected() {
    let mut cfg = test_config();
    cfg.server.outbound_queue = 16;
    // Large actions, to fill the queue fast (the default refuses them).
    cfg.server.max_action_bytes = 1024 * 1024;
    let r = start_host(cfg).await;
    let url = format!("ws://{}", r.addr);
    // The slow client subscribes and then never reads again.
    let mut slow = Raw::connect(&url).await;
    slow.call(
        json!(1),
        "initialize",
        json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": "slow"}),
    )
    .await;
    let writer = initialized(&r, "writer").await;
    create_session(&writer, "ahp-session:/bp", None).await;
    slow.call(json!(2), "subscribe", json!({"channel": "ahp-session:/bp"}))
        .await;
    assert!(r.host.connections().is_connected("slow"));
    let title = "x".repeat(256 * 1024);
    let mut sent = 0;
    while r.host.connections().is_connected("slow") {
        assert!(
            sent < 2000,
            "slow client still connected after {sent} large actions"
        );
        dispatch_raw(
            &writer,
            "ahp-session:/bp",
            sent,
            json!({"type": "session/titleChanged", "title": title}),
        )
        .await;
        sent += 1;
        if sent % 8 == 0 {
            writer.ping().await.unwrap(); // lets the host catch up; bounded by the loop count
        }
    }
    // The writer is unaffected.
    writer.ping().await.unwrap();
    drop(slow);
}

/// A `dispatchAction` whose `channel` and `clientSeq` can be read but whose
/// action is missing or malformed comes back as an echo with a
/// `rejectionReason` naming the field's path, so the client rolls back.
#[tokio::test]
async fn a_malformed_action_is_echoed_with_the_field_it_lacks() {
    let r = start_host(test_config()).await;
    let mut raw = raw_initialized(&format!("ws://{}", r.addr)).await;
    raw.create_session(json!(1), "ahp-session:/m").await;
    let chat = chat_of("ahp-session:/m");
    let cases = [
        (
            json!({"channel": chat, "clientSeq": 7}),
            "field `action` is missing",
        ),
        (
            json!({"channel": chat, "clientSeq": 8, "action": {"type": "chat/turnStarted", "turnId": "t",
                   "startedAt": "2026-01-01T00:00:00Z", "message": {"text": "x"}}}),
            "missing field `message.origin`",
        ),
    ];
    for (params, why) in cases {
        let seq = params["clientSeq"].clone();
        raw.send_text(
            json!({"jsonrpc": "2.0", "method": "dispatchAction", "params": params}).to_string(),
        )
        .await;
        let echo = loop {
            match raw.next().await {
                Next::Json(v)
                    if v["method"] == "action" && v["params"]["origin"]["clientSeq"] == seq =>
                {
                    break v["params"].clone()
                }
                Next::Json(_) => continue,
                Next::Closed(c) => panic!("closed: {c:?}"),
            }
        };
        let reason = echo["rejectionReason"].as_str().unwrap_or_default();
        assert!(reason.contains(why), "{why}: {echo}");
    }
}
