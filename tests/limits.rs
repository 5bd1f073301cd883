//! Per-principal rate limits and token rotation, on the real binary
//! (`serve --config`, the real Copilot CLI behind it, the scripted model):
//! a principal over a limit is refused naming it and when to retry, and
//! nothing else about its connection changes; SIGHUP puts new tokens in
//! force at once, closes a connection whose token was rotated away once its
//! running turn ends, and a broken file changes nothing.

use crate::support;

use std::time::Duration;

use ahp::{Client, SubscriptionEvent};
use ahp_bridge_join::Reply;
use ahp_bridge_join::ScriptedModel;
use serde_json::{json, Value};
use support::e2e::*;
use support::process::*;
use support::raw::{token_status, Next, Raw};
use support::*;

const TURNS: &str = "turns-token-0123456789ab";
const SESSIONS: &str = "sessions-token-0123456789";
const ACTIONS: &str = "actions-token-0123456789a";
const OTHER: &str = "other-token-0123456789abc";
const ROTATED: &str = "rotated-token-0123456789a";

const ROLES: &[&str] = &["observe", "participate"];

/// Dispatches `action` on `channel` with `seq`; the rejection reason it
/// comes back with, or `None` when it was applied (its echo).
async fn outcome(c: &Client, channel: &str, seq: i64, action: Value) -> Option<String> {
    let mut events = c.events();
    dispatch_raw(c, channel, seq, action).await;
    wait_event(&mut events, |e| match e {
        SubscriptionEvent::Action(env)
            if env.origin.as_ref().is_some_and(|o| o.client_seq == seq) =>
        {
            Some(env.rejection_reason.clone())
        }
        _ => None,
    })
    .await
}

fn title(t: &str) -> Value {
    json!({"type": "session/titleChanged", "title": t})
}

fn turn(turn_id: &str) -> Value {
    json!({"type": "chat/turnStarted", "turnId": turn_id, "startedAt": jiff::Timestamp::now().to_string(),
        "message": {"text": "again", "origin": {"kind": "user"}}})
}

/// The seconds a refusal says to wait ("retry in N s").
fn retry_in(reason: &str) -> f64 {
    let after = reason
        .split("retry in ")
        .nth(1)
        .unwrap_or_else(|| panic!("no retry time in {reason:?}"));
    after
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number of seconds in {reason:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_over_a_limit_is_refused_naming_it_and_its_connection_stays() {
    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let principals = [
        principal_toml("turns", TURNS, ROLES, "turns_per_minute = 1"),
        principal_toml("sessions", SESSIONS, ROLES, "max_sessions = 2"),
        principal_toml(
            "actions",
            ACTIONS,
            ROLES,
            "actions_per_second = 2\nactions_burst = 4",
        ),
    ]
    .concat();
    let bridge = BridgeProcess::start_with_principals(&model, dir.path(), "", &principals);

    // max_sessions: the third session is refused; disposing one makes room.
    let s = connect_as(bridge.addr, SESSIONS, "s").await;
    for id in ["s1", "s2"] {
        ready_session(&s, &format!("ahp-session:/{id}"), None).await;
    }
    let third = json!({"channel": "ahp-session:/s3", "provider": "copilot"});
    let e = s
        .request::<_, Value>("createSession", third.clone())
        .await
        .expect_err("over max_sessions");
    assert_eq!(rpc_code(&e), -32009, "PermissionDenied: {e}");
    assert!(e.to_string().contains("max_sessions"), "{e}");
    s.ping().await.expect("the connection stays");
    s.request::<_, Value>("disposeSession", json!({"channel": "ahp-session:/s1"}))
        .await
        .unwrap();
    ready_session(&s, "ahp-session:/s3", None).await;

    // turns_per_minute: one turn, then the next is refused until the minute refills.
    let t = connect_as(bridge.addr, TURNS, "t").await;
    ready_session(&t, "ahp-session:/t", None).await;
    model.push(Reply::Text("One.".into()));
    assert_eq!(run_turn(&t, "t", "t1", "one").await.kind, "complete");
    let chat = chat_of("ahp-session:/t");
    let reason = outcome(&t, &chat, 2, turn("t2")).await.expect("refused");
    assert!(reason.contains("turns_per_minute"), "{reason}");
    let wait = retry_in(&reason);
    assert!(wait > 0.0 && wait <= 60.0, "{reason}");
    let queued = json!({"type": "chat/pendingMessageSet", "kind": "queued", "id": "q1",
        "message": {"text": "later", "origin": {"kind": "user"}}});
    let reason = outcome(&t, &chat, 3, queued)
        .await
        .expect("a queued turn too");
    assert!(reason.contains("turns_per_minute"), "{reason}");
    t.ping().await.expect("the connection stays");
    let applied = outcome(&t, "ahp-session:/t", 4, title("still here")).await;
    assert_eq!(applied, None, "an action that starts no turn still applies");

    // actions_per_second: a burst of 4, then refused; after the wait it says, applied.
    let a = connect_as(bridge.addr, ACTIONS, "a").await;
    ready_session(&a, "ahp-session:/a", None).await;
    let mut events = a.events();
    for seq in 1..=5 {
        dispatch_raw(&a, "ahp-session:/a", seq, title(&format!("t{seq}"))).await;
    }
    let mut outcomes = Vec::new();
    while outcomes.len() < 5 {
        let o = wait_event(&mut events, |e| match e {
            SubscriptionEvent::Action(env) if env.origin.is_some() => {
                Some(env.rejection_reason.clone())
            }
            _ => None,
        })
        .await;
        outcomes.push(o);
    }
    assert!(outcomes[..4].iter().all(Option::is_none), "{outcomes:?}");
    let reason = outcomes[4].clone().expect("the fifth is over the burst");
    assert!(reason.contains("actions_per_second"), "{reason}");
    let wait = retry_in(&reason);
    assert!(wait > 0.0 && wait <= 0.5, "{reason}");
    a.ping().await.expect("the connection stays");
    tokio::time::sleep(Duration::from_secs_f64(wait)).await;
    assert_eq!(outcome(&a, "ahp-session:/a", 6, title("after")).await, None);
    // The other principals were never limited by this one.
    assert_eq!(outcome(&s, "ahp-session:/s2", 1, title("mine")).await, None);
}

/// Reads frames until the server closes; the JSON frames and the close.
async fn until_closed(raw: &mut Raw) -> (Vec<Value>, Option<(u16, String)>) {
    let mut frames = Vec::new();
    loop {
        match raw.next().await {
            Next::Json(v) => frames.push(v),
            Next::Closed(c) => return (frames, c),
        }
    }
}

/// Reads frames until one `pick` accepts.
async fn until(raw: &mut Raw, pick: impl Fn(&Value) -> bool) {
    loop {
        match raw.next().await {
            Next::Json(v) if pick(&v) => return,
            Next::Json(_) => {}
            Next::Closed(c) => panic!("closed early: {c:?}"),
        }
    }
}

fn action_type(frame: &Value) -> Option<&str> {
    frame["params"]["action"]["type"].as_str()
}

/// A raw connection with `token` that creates `session`, waits until it is
/// ready and watches its chat.
async fn raw_with_session(addr: std::net::SocketAddr, token: &str, session: &str) -> Raw {
    let mut raw = Raw::connect(&format!("ws://{addr}/?tkn={token}")).await;
    let init = json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": "old"});
    assert!(raw
        .call(json!(1), "initialize", init)
        .await
        .get("result")
        .is_some());
    let create = json!({"channel": session, "provider": "copilot"});
    let a = raw.call(json!(2), "createSession", create).await;
    assert!(a.get("result").is_some(), "{a}");
    let snap = raw
        .call(json!(3), "subscribe", json!({"channel": session}))
        .await;
    if snap["result"]["snapshot"]["state"]["lifecycle"] != "ready" {
        until(&mut raw, |f| action_type(f) == Some("session/ready")).await;
    }
    let chat = json!({"channel": chat_of(session)});
    raw.call(json!(4), "subscribe", chat).await;
    raw
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_token_works_at_once_and_the_old_one_closes_after_its_turn() {
    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let other = principal_toml("other", OTHER, ROLES, "");
    let before = format!("{}{other}", ide_principal());
    let bridge = BridgeProcess::start_with_principals(&model, dir.path(), "", &before);
    let bystander = connect_as(bridge.addr, OTHER, "bystander").await;

    // A connection with the old token runs a slow turn...
    let mut old = raw_with_session(bridge.addr, TOKEN, "ahp-session:/rot").await;
    model.push(Reply::Slow {
        chunks: vec!["tick ".into(); 30],
        delay: Duration::from_millis(100),
    });
    let chat = chat_of("ahp-session:/rot");
    let start = json!({"jsonrpc": "2.0", "method": "dispatchAction", "params": {"channel": chat, "clientSeq": 1,
        "action": {"type": "chat/turnStarted", "turnId": "t1", "startedAt": jiff::Timestamp::now().to_string(),
            "message": {"text": "count slowly", "origin": {"kind": "user"}}}}});
    old.send_text(start.to_string()).await;
    until(&mut old, |f| action_type(f) == Some("chat/delta")).await;

    // ...when "ide"'s token is rotated and the file reloaded.
    let after = format!(
        "{}{other}",
        principal_toml("ide", ROTATED, &["observe", "participate"], "")
    );
    bridge.rewrite_config("", &after);
    let line = bridge.hangup("principals reloaded").await;
    assert!(line.contains("closing=1"), "one connection closes: {line}");

    // The new token works at once; the old one opens nothing new.
    let fresh = connect_as(bridge.addr, ROTATED, "fresh").await;
    fresh.ping().await.unwrap();
    assert_eq!(token_status(bridge.addr, TOKEN).await, 401);
    // Meanwhile the revoked connection starts no new turn.
    let queue = json!({"jsonrpc": "2.0", "method": "dispatchAction", "params": {"channel": chat, "clientSeq": 2,
        "action": {"type": "chat/pendingMessageSet", "kind": "queued", "id": "q1",
            "message": {"text": "more", "origin": {"kind": "user"}}}}});
    old.send_text(queue.to_string()).await;

    // Its running turn completes, then it is closed with the reason.
    let (frames, close) = until_closed(&mut old).await;
    let completed = frames
        .iter()
        .any(|f| action_type(f) == Some("chat/turnComplete"));
    assert!(completed, "the running turn ended before the close");
    let refused = frames
        .iter()
        .filter_map(|f| f["params"]["rejectionReason"].as_str())
        .collect::<Vec<_>>();
    assert!(
        refused
            .iter()
            .any(|r| r.contains("credential revoked by reload")),
        "{refused:?}"
    );
    assert_eq!(
        close,
        Some((1008, "credential revoked by reload".to_string()))
    );

    // The unchanged principal's connection stays; the new one too.
    bystander
        .ping()
        .await
        .expect("an unchanged principal stays");
    fresh.ping().await.unwrap();
    let leaked: Vec<String> = bridge
        .all_log_lines()
        .into_iter()
        .filter(|l| l.contains(TOKEN) || l.contains(ROTATED))
        .collect();
    assert!(leaked.is_empty(), "no token in the log: {leaked:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_file_on_sighup_changes_nothing_and_names_the_key() {
    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bridge = BridgeProcess::start_with_principals(&model, dir.path(), "", &ide_principal());
    let c = connect(bridge.addr, "ide").await;
    // A rotation in a file that does not load: a bad limit beside it.
    let broken = principal_toml("ide", ROTATED, ROLES, "turns_per_minute = 0");
    bridge.rewrite_config("", &broken);
    let line = bridge.hangup("reload refused").await;
    assert!(line.contains("principals[0].turns_per_minute"), "{line}");
    assert!(bridge.log_lines("principals reloaded").is_empty());
    // Nothing changed: the old token connects, the new one does not, the
    // open connection stays.
    let again = connect(bridge.addr, "ide-again").await;
    again.ping().await.unwrap();
    assert_eq!(token_status(bridge.addr, ROTATED).await, 401);
    c.ping().await.expect("the open connection stays");
}
