//! The bridge's memory with 1000 stored sessions, idle, after a restart.
//!
//! The real binary (`serve --config`) with its state store, in front of a
//! fake runtime on TCP (`[runtime] connect`; `common::pipe`): the bridge's
//! own memory is what is measured, and a real CLI would hold about 4 MB per
//! session for nothing here. 1000 sessions are created through the bridge,
//! each with one completed turn (a prompt of about 200 characters streamed
//! back as the answer); the bridge is stopped with SIGTERM and started again
//! on the same config; VmRSS is read from `/proc` once it listens (restore
//! is done by then) and again after it sat idle, before any client
//! connects. Then a client checks that every session really came back.
//!
//! Run: cargo bench --bench restored_rss [-- SESSIONS]

#[path = "../tests/support/mod.rs"]
mod support;

mod common;

use std::time::{Duration, Instant};

use ahp_bridge_join::ScriptedModel;
use common::mib;
use common::pipe::PipeRuntime;
use futures_util::future::join_all;
use serde_json::{json, Value};
use support::e2e::{ready_session, run_turn};
use support::process::status_kib;
use support::process::LOAD_LIMITS;
use support::process::{connect, BridgeProcess};

fn prompt(i: usize) -> String {
    format!(
        "Session {i:04}: {}",
        "remember the quiet harbour at dawn. ".repeat(5)
    )
}

fn rss(b: &BridgeProcess) -> u64 {
    status_kib(b.child.id(), "VmRSS")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let sessions: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1000);
    // The binary's config names a model; nothing calls it here.
    let model = ScriptedModel::start().await.unwrap();
    let fake = PipeRuntime::start().await;
    let dir = tempfile::tempdir().unwrap();
    let runtime_toml = format!("connect = \"{}\"", fake.addr);
    let start =
        || BridgeProcess::start_with_runtime(&model, dir.path(), LOAD_LIMITS, &runtime_toml, None);

    let mut first = start();
    let empty = rss(&first);
    let t0 = Instant::now();
    // 25 clients, each making its share of the sessions one after another.
    let clients =
        join_all((0..25).map(|k| async move { connect(first.addr, &format!("c{k}")).await })).await;
    join_all(clients.iter().enumerate().map(|(k, c)| async move {
        for i in (k..sessions).step_by(25) {
            let uri = format!("ahp-session:/s{i:04}");
            ready_session(c, &uri, None).await;
            let end = run_turn(c, &format!("s{i:04}"), "t1", &prompt(i)).await;
            assert_eq!((end.kind, end.text), ("complete", prompt(i)));
            for ch in [support::chat_of(&format!("ahp-session:/s{i:04}")), uri] {
                c.unsubscribe(ch).await.unwrap();
            }
        }
    }))
    .await;
    let made = t0.elapsed();
    drop(clients);
    let live = rss(&first);
    let live_hwm = status_kib(first.child.id(), "VmHWM");
    let status = first.signal_and_wait("TERM", Duration::from_secs(30));
    assert!(status.success(), "SIGTERM: {status:?}");
    let store: u64 = ["state.sqlite3", "state.sqlite3-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(dir.path().join(f)).ok())
        .map(|m| m.len())
        .sum();

    let t1 = Instant::now();
    let second = start();
    let up = t1.elapsed();
    let restored = rss(&second);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let idle = rss(&second);
    let idle_hwm = status_kib(second.child.id(), "VmHWM");

    // Every session came back, with its turn.
    let c = connect(second.addr, "check").await;
    let list: Value = c.request("listSessions", json!({})).await.unwrap();
    let listed = list["items"].as_array().map_or(0, Vec::len);
    assert_eq!(
        listed, sessions,
        "every session is listed after the restart"
    );
    for i in [0, sessions / 2, sessions - 1] {
        let snap =
            support::raw_subscribe(&c, &support::chat_of(&format!("ahp-session:/s{i:04}"))).await;
        let turns = &snap["snapshot"]["state"]["turns"];
        assert_eq!(turns.as_array().map_or(0, Vec::len), 1, "s{i:04}: {snap}");
        assert!(
            turns.to_string().contains(&format!("Session {i:04}")),
            "{turns}"
        );
    }
    let with_client = rss(&second);

    println!(
        "{sessions} stored sessions, one completed turn each; the bridge binary, state store on"
    );
    println!("  fresh start, empty store        : VmRSS {}", mib(empty));
    println!(
        "  after creating them (live)      : VmRSS {}  (peak {}); {:.1} s to create and run them",
        mib(live),
        mib(live_hwm),
        made.as_secs_f64()
    );
    println!("  store file                      : {}", mib(store / 1024));
    println!(
        "  restarted, restore done         : VmRSS {}  ({:.2} s from spawn to listening)",
        mib(restored),
        up.as_secs_f64()
    );
    println!(
        "  restored, idle 5 s              : VmRSS {}  (peak {})",
        mib(idle),
        mib(idle_hwm)
    );
    println!(
        "  one client listed all {listed} and read 3 chats: VmRSS {}",
        mib(with_client)
    );
    println!(
        "  per restored session (idle - empty start): {:.1} KiB",
        (idle as f64 - empty as f64) / sessions as f64
    );
}
