//! The bridge as a process exposed to a hostile network: idle sockets at a
//! file-descriptor limit, large actions and a subscriber that stops reading,
//! a clientId made to forge log lines. Each test runs the real binary
//! (`serve`, the real Copilot CLI behind it, the scripted model) and reads
//! its log and `/proc`.

use crate::support;

use std::time::{Duration, Instant};

use ahp_bridge_join::Reply;
use ahp_bridge_join::ScriptedModel;
use serde_json::json;
use support::e2e::*;
use support::process::*;
use support::raw::Raw;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sockets_at_a_descriptor_limit_do_not_lock_out_a_client() {
    let model = ScriptedModel::start().await.unwrap();
    // The default config: the connection limits come from the fd limit.
    let bridge = BridgeProcess::start(&model, "", Some(256));
    let ide = connect(bridge.addr, "ide").await;
    ready_session(&ide, "ahp-session:/fd", None).await;
    // 300 sockets that never say a word: more than the bridge has descriptors.
    let mut idle = Vec::new();
    for _ in 0..300 {
        idle.push(tokio::net::TcpStream::connect(bridge.addr).await.unwrap());
    }
    // A client that arrives after them still gets in and completes a turn:
    // the oldest of them, never initialized, made room (refused, it could
    // not even connect until the handshake deadline closed them).
    let late = connect(bridge.addr, "ide-late").await;
    model.push(Reply::Text("Still here.".into()));
    let end = run_turn(&late, "fd", "t1", "anyone?").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    assert_eq!(end.text, "Still here.");
    // Every idle socket is closed by the bridge: to make room, or at its
    // handshake deadline.
    let started = Instant::now();
    for mut s in idle {
        let mut buf = [0u8; 64];
        let read =
            tokio::time::timeout(DEADLINE, tokio::io::AsyncReadExt::read(&mut s, &mut buf)).await;
        assert!(
            matches!(read, Ok(Ok(0)) | Ok(Err(_))),
            "an idle socket is closed (after {:?})",
            started.elapsed()
        );
    }
    // The derived limit leaves room: accept never ran out of descriptors.
    let failures = bridge.log_lines("accept failed");
    assert!(failures.is_empty(), "{failures:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_actions_and_a_stalled_subscriber_stay_within_the_byte_bounds() {
    const MIB: usize = 1024 * 1024;
    let model = ScriptedModel::start().await.unwrap();
    let bounds = format!(
        "max_frame_bytes = {}\nmax_action_bytes = {}\nreplay_buffer_bytes = {}\noutbound_queue_bytes = {}",
        4 * MIB,
        2 * MIB,
        8 * MIB,
        8 * MIB
    );
    let bridge = BridgeProcess::start(&model, &bounds, None);
    let writer = connect(bridge.addr, "writer").await;
    ready_session(&writer, "ahp-session:/big", None).await;
    // A subscriber that stops reading once subscribed.
    let url = format!("ws://{}/?tkn={TOKEN}", bridge.addr);
    let mut stalled = Raw::connect(&url).await;
    stalled
        .call(
            json!(1),
            "initialize",
            json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": "stalled"}),
        )
        .await;
    stalled
        .call(
            json!(2),
            "subscribe",
            json!({"channel": "ahp-session:/big"}),
        )
        .await;
    let before = bridge.rss_bytes();
    let title = "t".repeat(MIB);
    let mut rss = Vec::new();
    for i in 0..200 {
        dispatch_raw(
            &writer,
            "ahp-session:/big",
            i,
            json!({"type": "session/titleChanged", "title": title}),
        )
        .await;
        if i % 4 == 3 {
            writer.ping().await.unwrap(); // the host keeps up before the next batch
        }
        if i == 99 || i == 199 {
            writer.ping().await.unwrap();
            rss.push(bridge.rss_bytes());
        }
    }
    let (half, after) = (rss[0], rss[1]);
    let mib = |b: u64| b / MIB as u64;
    eprintln!(
        "bridge RSS: {} MiB before, {} MiB after 100 actions of 1 MiB, {} MiB after 200",
        mib(before),
        mib(half),
        mib(after)
    );
    // Documented bound: replay_buffer_bytes + outbound_queue_bytes (the
    // stalled subscriber's queue, until it is cut off) + 64 MiB for the
    // allocator's high-water mark of messages in flight.
    let bound = (8 + 8 + 64) * MIB as u64;
    let grown = after.saturating_sub(before);
    assert!(grown <= bound, "grew {grown} bytes, more than {bound}");
    // And it plateaus: the second 100 MiB of actions leave (almost) nothing behind.
    let second = after.saturating_sub(half);
    assert!(
        second <= 16 * MIB as u64,
        "grew {} MiB in the second half",
        mib(second)
    );
    let cut = bridge.log_lines("client is not reading");
    assert!(!cut.is_empty(), "the stalled subscriber was disconnected");
    drop(stalled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_strings_are_logged_escaped_and_any_case_bearer_authenticates() {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let model = ScriptedModel::start().await.unwrap();
    let bridge = BridgeProcess::start(&model, "", None);
    let mut req = format!("ws://{}", bridge.addr)
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("authorization", format!("bearer {TOKEN}").parse().unwrap());
    let (ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .expect("a lowercase bearer scheme is accepted");
    let mut raw = Raw { ws };
    let forged = "evil\nINFO forged: admin logged in";
    let a = raw
        .call(
            json!(1),
            "initialize",
            json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": forged}),
        )
        .await;
    assert!(a.get("result").is_some(), "{a}");
    let started = Instant::now();
    while bridge.log_lines("client initialized").is_empty() {
        assert!(started.elapsed() < DEADLINE, "the log line came");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let line = bridge.log_lines("client initialized").remove(0);
    assert!(line.contains(r#"evil\nINFO forged"#), "escaped: {line}");
    assert!(
        bridge
            .log_lines("forged")
            .iter()
            .all(|l| !l.starts_with("INFO forged")),
        "no forged line"
    );
}
