//! Restarts and shutdowns as an operator meets them: the real binary, the
//! real Copilot CLI, stopped with SIGTERM (what systemd sends) and started
//! again on the same config and runtime home.

use crate::support;

use std::time::Duration;

use ahp_bridge_join::audit::verify_file;
use ahp_bridge_join::Reply;
use ahp_bridge_join::ScriptedModel;
use ahp_types::actions::StateAction;
use serde_json::{json, Value};
use support::e2e::*;
use support::process::*;
use support::raw::{Next, Raw};
use support::*;

/// A hang guard for the bridge's exit, not a speed claim.
const EXIT_GUARD: Duration = Duration::from_secs(60);

/// The text of every message the model was sent in its last request.
fn last_model_request(model: &ScriptedModel) -> String {
    model
        .requests()
        .last()
        .map(|r| r["messages"].to_string())
        .unwrap_or_default()
}

/// `serverSeq` as a fresh client's `initialize` reports it: the last issued.
async fn server_seq(addr: std::net::SocketAddr) -> i64 {
    let mut raw = Raw::connect(&format!("ws://{addr}/?tkn={TOKEN}")).await;
    let init = raw
        .call(
            json!(1),
            "initialize",
            json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": "seq-probe"}),
        )
        .await;
    init["result"]["serverSeq"].as_i64().expect("serverSeq")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_and_their_history_survive_a_sigterm_restart() {
    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut first = BridgeProcess::start_in(&model, dir.path(), "", None);
    let c = connect(first.addr, "ide").await;
    for (id, word) in [("one", "PELICAN-42"), ("two", "WALRUS-17")] {
        let uri = format!("ahp-session:/{id}");
        ready_session(&c, &uri, None).await;
        dispatch_raw(
            &c,
            &uri,
            1,
            json!({"type": "session/titleChanged", "title": format!("Session {id}")}),
        )
        .await;
        model.push(Reply::Text(format!("Noted: {word}.")));
        let end = run_turn(
            &c,
            id,
            "t1",
            &format!("The code word is {word}. Remember it."),
        )
        .await;
        assert_eq!(end.kind, "complete", "{end:?}");
    }
    let seq_before = server_seq(first.addr).await;
    let runtime = descendants(first.child.id());
    assert!(!runtime.is_empty(), "the runtime runs under the bridge");
    let status = first.signal_and_wait("TERM", EXIT_GUARD);
    assert_eq!(
        status.code(),
        Some(0),
        "SIGTERM is a clean exit: {status:?}"
    );
    assert!(
        runtime.iter().all(|p| !alive(*p)),
        "no runtime process is left"
    );

    let second = BridgeProcess::start_in(&model, dir.path(), "", None);
    let seq_after = server_seq(second.addr).await;
    assert!(
        seq_after > seq_before,
        "serverSeq never goes back: {seq_before} then {seq_after}"
    );
    let c = connect(second.addr, "ide").await;
    let list: Value = c
        .request("listSessions", json!({"channel": "ahp-root://"}))
        .await
        .unwrap();
    let mut titles: Vec<(String, String)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["resource"].as_str().unwrap().into(),
                s["title"].as_str().unwrap().into(),
            )
        })
        .collect();
    titles.sort();
    assert_eq!(
        titles,
        [
            ("ahp-session:/one".to_string(), "Session one".to_string()),
            ("ahp-session:/two".to_string(), "Session two".to_string())
        ]
    );
    let session = raw_subscribe(&c, "ahp-session:/one").await;
    assert_eq!(session["snapshot"]["state"]["lifecycle"], "ready");
    let chat = raw_subscribe(&c, &chat_of("ahp-session:/one")).await;
    let turns = chat["snapshot"]["state"]["turns"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(turns.len(), 1, "the completed turn is back: {turns:?}");
    assert!(turns[0].to_string().contains("PELICAN-42"));

    // The next turn resumes the runtime session: the model sees the history.
    model.push(Reply::Text("It was PELICAN-42.".into()));
    let end = run_turn(&c, "one", "t2", "What was the code word?").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    let sent = last_model_request(&model);
    assert!(
        sent.contains("The code word is PELICAN-42"),
        "history reaches the model: {sent}"
    );
    assert!(
        !sent.contains("WALRUS-17"),
        "and only this session's: {sent}"
    );

    // A client of the old instance, with its old lastSeenServerSeq, gets
    // snapshots: nothing it saw tells what this instance sent since.
    let mut old = Raw::connect(&format!("ws://{}/?tkn={TOKEN}", second.addr)).await;
    let r = old
        .call(
            json!(1),
            "reconnect",
            json!({"channel": "ahp-root://", "clientId": "ide-before", "lastSeenServerSeq": seq_before, "subscriptions": ["ahp-session:/two"]}),
        )
        .await;
    assert_eq!(r["result"]["type"], "snapshot", "{r}");
    assert_eq!(
        r["result"]["snapshots"][0]["state"]["title"], "Session two",
        "{r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_every_running_turn_and_closes_every_client_with_1001() {
    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut bridge = BridgeProcess::start_in(&model, dir.path(), "", None);
    let slow = || Reply::Slow {
        chunks: vec!["tick ".into(); 1200],
        delay: Duration::from_millis(50),
    };
    // Two turns on one connection (the official client)...
    let a = connect(bridge.addr, "ide-a").await;
    let mut subs = Vec::new();
    for id in ["a1", "a2"] {
        ready_session(&a, &format!("ahp-session:/{id}"), None).await;
        model.push(slow());
        let mut sub = start_turn(&a, id, "t1", "count slowly").await;
        wait_action(&mut sub, |x| {
            matches!(x, StateAction::ChatDelta(_)).then_some(())
        })
        .await;
        subs.push(sub);
    }
    // ...and one on a second (raw, to see the close frame).
    let mut b = Raw::connect(&format!("ws://{}/?tkn={TOKEN}", bridge.addr)).await;
    b.call(json!(1), "initialize", json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": "ide-b", "initialSubscriptions": []})).await;
    b.call(
        json!(2),
        "createSession",
        json!({"channel": "ahp-session:/b1", "provider": "copilot"}),
    )
    .await;
    b.call(
        json!(3),
        "subscribe",
        json!({"channel": chat_of("ahp-session:/b1")}),
    )
    .await;
    wait_raw_action(&mut b, |a| a["type"] == "session/ready").await;
    model.push(slow());
    let turn = json!({"type": "chat/turnStarted", "turnId": "t1", "startedAt": "2026-11-23T00:00:00Z", "message": {"text": "count slowly", "origin": {"kind": "user"}}});
    b.send_text(json!({"jsonrpc": "2.0", "method": "dispatchAction", "params": {"channel": chat_of("ahp-session:/b1"), "clientSeq": 1, "action": turn}}).to_string()).await;
    wait_raw_action(&mut b, |a| a["type"] == "chat/delta").await;

    let runtime = descendants(bridge.child.id());
    assert!(!runtime.is_empty(), "the runtime runs under the bridge");
    let status = bridge.signal_and_wait("TERM", EXIT_GUARD);
    assert_eq!(status.code(), Some(0), "{status:?}");

    for mut sub in subs {
        let error = wait_action(&mut sub, |x| match x {
            StateAction::ChatError(e) => Some(e.part.error.message.clone()),
            StateAction::ChatTurnComplete(_) => Some("completed instead".into()),
            _ => None,
        })
        .await;
        assert_eq!(error, "the host is shutting down");
    }
    let error = wait_raw_action(&mut b, |a| a["type"] == "chat/error").await;
    assert_eq!(
        error["part"]["error"]["message"], "the host is shutting down",
        "{error}"
    );
    let close = loop {
        match b.next().await {
            Next::Closed(c) => break c,
            Next::Json(_) => continue,
        }
    };
    assert_eq!(close, Some((1001, "the host is shutting down".to_string())));
    assert!(
        runtime.iter().all(|p| !alive(*p)),
        "no runtime process is left"
    );
    let audit = dir.path().join("audit.jsonl");
    if audit.exists() {
        verify_file(&audit).expect("the audit log verifies after the shutdown");
    }
    // The store holds every session, each turn ended.
    let again = BridgeProcess::start_in(&model, dir.path(), "", None);
    let c = connect(again.addr, "ide-c").await;
    let chat = raw_subscribe(&c, &chat_of("ahp-session:/b1")).await;
    let turns = chat["snapshot"]["state"]["turns"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(turns.len(), 1, "{turns:?}");
    assert!(
        turns[0].to_string().contains("the host is shutting down"),
        "{turns:?}"
    );
}

/// Reads raw notifications until an `action` whose action `pick` accepts.
async fn wait_raw_action(raw: &mut Raw, pick: impl Fn(&Value) -> bool) -> Value {
    tokio::time::timeout(DEADLINE, async {
        loop {
            match raw.next().await {
                Next::Json(v) if v["method"] == "action" && pick(&v["params"]["action"]) => {
                    return v["params"]["action"].clone()
                }
                Next::Json(_) => continue,
                Next::Closed(c) => panic!("closed while waiting for an action: {c:?}"),
            }
        }
    })
    .await
    .expect("the action within the deadline")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_never_loses_a_completed_turn() {
    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut first = BridgeProcess::start_in(&model, dir.path(), "", None);
    let c = connect(first.addr, "ide").await;
    ready_session(&c, "ahp-session:/k", None).await;
    model.push(Reply::Text("Done.".into()));
    let end = run_turn(&c, "k", "t1", "Finish this turn.").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    // No shutdown at all: whatever a completed turn wrote is already on disk.
    first.signal_and_wait("KILL", EXIT_GUARD);

    let second = BridgeProcess::start_in(&model, dir.path(), "", None);
    let c = connect(second.addr, "ide").await;
    let chat = raw_subscribe(&c, &chat_of("ahp-session:/k")).await;
    let turns = chat["snapshot"]["state"]["turns"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(turns.len(), 1, "{turns:?}");
    assert!(turns[0].to_string().contains("Done."), "{turns:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_bridge_leaves_no_runtime_behind() {
    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    // With `[sdk]` the runtime listens on a port: unlike one on stdio, it
    // does not end when the bridge's end of its pipes closes.
    let sdk = format!(
        "{}[sdk]\nlisten = \"127.0.0.1:0\"\nprincipal = \"sdk-apps\"\n",
        principal_toml("sdk-apps", "sdk-token", &["participate"], "")
    );
    let mut bridge = BridgeProcess::start_with_tables(&model, dir.path(), &sdk);
    // A readiness probe starts the runtime, as a session would.
    http::readyz_until(bridge.admin, EXIT_GUARD, "ready", |s, _| s == 200).await;
    let runtime = descendants(bridge.child.id());
    assert!(!runtime.is_empty(), "the runtime runs under the bridge");

    // No shutdown and no drop: nothing of the bridge's own runs.
    bridge.signal_and_wait("KILL", EXIT_GUARD);
    // A process's end has no event to wait on here: /proc is looked at.
    let killed = std::time::Instant::now();
    loop {
        let left: Vec<u32> = runtime.iter().copied().filter(|p| alive(*p)).collect();
        if left.is_empty() {
            break;
        }
        if killed.elapsed() > DEADLINE {
            // Not left running after the test either.
            for p in &left {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &p.to_string()])
                    .status();
            }
            panic!("runtime processes {left:?} outlived the bridge by {DEADLINE:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
