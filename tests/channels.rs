//! The host's extension channel `x-audit://log` over a real WebSocket: it
//! is advertised, subscribing needs `admin` (refused naming the role), its
//! snapshot and its actions carry the records, and a client that comes back
//! gets what it missed by the same replay as every channel.

use crate::support;

use ahp_bridge_join::ahp::WrittenRecord;
use ahp_bridge_join::config::Config;
use serde_json::{json, Value};
use support::process::principal_toml;
use support::raw::{Next, Raw};
use support::*;

const ADMIN: &str = "admin-token-0123456789";
const IDE: &str = "ide-token-0123456789ab";

async fn host() -> ahp_bridge_join::Running {
    let principals = [
        principal_toml("ops", ADMIN, &["observe", "admin"], ""),
        principal_toml("ide", IDE, &["observe", "participate"], ""),
    ]
    .concat();
    let mut cfg = test_config();
    cfg.principals = Config::parse(&principals).unwrap().principals;
    start_host(cfg).await
}

async fn initialized_raw(r: &ahp_bridge_join::Running, token: &str, id: &str) -> (Raw, Value) {
    let mut raw = Raw::connect(&format!("ws://{}/?token={token}", r.addr)).await;
    let init = raw
        .call(
            json!(1),
            "initialize",
            json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": id}),
        )
        .await;
    (raw, init)
}

/// A record's line as the audit log wrote it.
fn record(seq: u64) -> WrittenRecord {
    let line = json!({"kind": "transform", "seq": seq, "hash": format!("h{seq}"), "session": "ahp-session:/s"});
    WrittenRecord::parse(&line.to_string()).unwrap()
}

/// The next `action` notification on `channel`.
async fn next_action(raw: &mut Raw, channel: &str) -> Value {
    loop {
        match raw.next().await {
            Next::Json(v) if v["method"] == "action" && v["params"]["channel"] == channel => {
                return v["params"].clone()
            }
            Next::Json(_) => continue,
            Next::Closed(c) => panic!("closed: {c:?}"),
        }
    }
}

#[tokio::test]
async fn the_audit_channel_needs_admin_and_streams_records() {
    let r = host().await;
    let (mut ide, init) = initialized_raw(&r, IDE, "ide").await;
    assert_eq!(
        init["result"]["_meta"]["x-audit://log"]["role"], "admin",
        "{init}"
    );
    let refused = ide
        .call(json!(2), "subscribe", json!({"channel": "x-audit://log"}))
        .await;
    assert_eq!(refused["error"]["code"], -32009, "{refused}");
    assert!(refused["error"]["message"]
        .as_str()
        .unwrap()
        .contains("`admin`"));
    r.host.publish_audit_record(record(1), 0);
    let (mut ops, _) = initialized_raw(&r, ADMIN, "ops").await;
    let snap = ops
        .call(json!(2), "subscribe", json!({"channel": "x-audit://log"}))
        .await;
    let state = &snap["result"]["snapshot"]["state"];
    assert_eq!(state["head"], "1:h1", "{snap}");
    assert_eq!(state["recent"][0]["seq"], 1);
    r.host.publish_audit_record(record(2), 4);
    let action = next_action(&mut ops, "x-audit://log").await;
    assert_eq!(action["action"]["type"], "x-audit/recordAppended");
    assert_eq!(action["action"]["head"], "2:h2");
    assert_eq!(action["action"]["shippingGap"], 4);
    // A client that comes back gets what it missed, replayed.
    let seen = action["serverSeq"].as_u64().unwrap();
    drop(ops);
    // The client id is free once the host has seen the close: before that,
    // a reconnect under it is refused (it belongs to a live connection).
    eventually("disconnect noticed", || {
        !r.host.connections().is_connected("ops")
    })
    .await;
    r.host.publish_audit_record(record(3), 4);
    let mut back = Raw::connect(&format!("ws://{}/?token={ADMIN}", r.addr)).await;
    let rec = back
        .call(
            json!(1),
            "reconnect",
            json!({"channel": "ahp-root://", "clientId": "ops", "lastSeenServerSeq": seen,
                   "subscriptions": ["x-audit://log"]}),
        )
        .await;
    assert_eq!(rec["result"]["type"], "replay", "{rec}");
    assert_eq!(
        rec["result"]["actions"][0]["action"]["record"]["seq"], 3,
        "{rec}"
    );
    // Another `x-` channel is not there.
    let own = ide
        .call(json!(3), "subscribe", json!({"channel": "x-audit://nope"}))
        .await;
    assert!(own.get("error").is_some(), "{own}");
}

#[tokio::test]
async fn the_policy_channel_holds_the_policy_and_says_each_reload() {
    let r = host().await;
    let (mut ide, init) = initialized_raw(&r, IDE, "ide").await;
    assert_eq!(
        init["result"]["_meta"]["x-policy://effective"]["role"],
        "admin"
    );
    let refused = ide
        .call(
            json!(2),
            "subscribe",
            json!({"channel": "x-policy://effective"}),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32009, "{refused}");
    let (mut ops, _) = initialized_raw(&r, ADMIN, "ops").await;
    let snap = ops
        .call(
            json!(2),
            "subscribe",
            json!({"channel": "x-policy://effective"}),
        )
        .await;
    let state = &snap["result"]["snapshot"]["state"];
    assert_eq!(state["sha256"].as_str().unwrap().len(), 64, "{snap}");
    assert_eq!(
        state["policy"]["sections"]["tone"]["access"], "transform",
        "{snap}"
    );
    assert!(state.get("type").is_none(), "a state is no action: {state}");
    r.host.publish_policy_loaded();
    let action = next_action(&mut ops, "x-policy://effective").await;
    assert_eq!(action["action"]["type"], "x-policy/loaded");
    assert_eq!(action["action"]["sha256"], state["sha256"]);
}

#[tokio::test]
async fn the_status_channel_is_for_observers_and_follows_clients() {
    let r = host().await;
    let (mut ide, init) = initialized_raw(&r, IDE, "ide").await;
    assert_eq!(
        init["result"]["_meta"]["x-host://status"]["role"],
        "observe"
    );
    let snap = ide
        .call(json!(2), "subscribe", json!({"channel": "x-host://status"}))
        .await;
    let state = &snap["result"]["snapshot"]["state"];
    assert_eq!(state["clients"], 1, "{snap}");
    assert_eq!(
        state["runtimes"][0]["up"], false,
        "no agent, no runtime: {snap}"
    );
    assert_eq!(state["version"], env!("CARGO_PKG_VERSION"));
    let (_ops, _) = initialized_raw(&r, ADMIN, "ops").await;
    // The host's tick sends the change; waited for, not slept on.
    let action = loop {
        let a = next_action(&mut ide, "x-host://status").await;
        if a["action"]["clients"] == 2 {
            break a;
        }
    };
    assert_eq!(action["action"]["type"], "x-host/statusChanged");
}
