//! The audit log when the disk says no: the bridge binary runs under
//! `prlimit --fsize` (RLIMIT_FSIZE: a write past the limit is cut short, then
//! fails with EFBIG; the bridge ignores SIGXFSZ so it is not killed), in front
//! of a fake runtime that asks for transforms (the fault the real one cannot
//! be made to show). With `on_failure = "keep-original"` turns keep
//! completing, no rewrite that was not audited reaches the runtime, and once
//! the limit is lifted the log goes on, counts what it lost, and verifies.

use crate::support;

use std::process::Stdio;
use std::sync::{Arc, Mutex};

use ahp_bridge_join::audit::sha256_hex;
use serde_json::{json, Value};
use support::e2e::{creation_outcome, wait_turn_end};
use support::fake_runtime::{FakeConn, FakeRuntime};
use support::*;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The file-size limit: the startup `policy` record (about 2.2 KB with the
/// default policy document) and a few transform records fit, then writes fail.
const LIMIT: u64 = 4500;

struct Bridge {
    child: tokio::process::Child,
    pid: u32,
    stderr: Arc<Mutex<Vec<String>>>,
}

/// The binary under `prlimit --fsize=LIMIT` (soft; hard unlimited, so the
/// test can lift it), and the address it listens on.
async fn spawn_limited(config: &std::path::Path) -> (Bridge, std::net::SocketAddr) {
    let mut child = tokio::process::Command::new("prlimit")
        .arg(format!("--fsize={LIMIT}:unlimited"))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_ahp-copilot-bridge"))
        .args(["serve", "--config"])
        .arg(config)
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("prlimit (util-linux) runs");
    let pid = child.id().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let addr = tokio::time::timeout(DEADLINE, async {
        loop {
            let l = lines
                .next_line()
                .await
                .unwrap()
                .expect("bridge stderr open");
            stderr.lock().unwrap().push(l.clone());
            if let Some(a) = l.strip_prefix("listening on ws://") {
                return a.parse().unwrap();
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("bridge did not start: {:?}", stderr.lock().unwrap()));
    let keep = stderr.clone();
    tokio::spawn(async move {
        while let Ok(Some(l)) = lines.next_line().await {
            keep.lock().unwrap().push(l);
        }
    });
    (Bridge { child, pid, stderr }, addr)
}

/// The runtime asks for `tone` once; returns the content it gets back.
async fn transform(conn: &mut FakeConn, runtime_id: &str, id: u64, original: &str) -> String {
    conn.send(
        &json!({"jsonrpc": "2.0", "id": id, "method": "systemMessage.transform",
        "params": {"sessionId": runtime_id, "sections": {"tone": {"content": original}}}}),
    );
    let a = conn.answer_to(json!(id)).await;
    a["result"]["sections"]["tone"]["content"]
        .as_str()
        .unwrap_or_else(|| panic!("no content: {a}"))
        .to_owned()
}

/// A whole turn the fake runtime answers; true when it completed.
async fn turn(c: &ahp::Client, conn: &mut FakeConn, turn_id: &str) -> bool {
    let mut sub = support::e2e::start_turn(c, "w", turn_id, "hi").await;
    let send = conn.call_of("session.send").await;
    let sid = send["params"]["sessionId"].as_str().unwrap().to_owned();
    conn.event(
        &sid,
        "assistant.message_delta",
        json!({"messageId": turn_id, "deltaContent": "ok"}),
    );
    conn.event(&sid, "session.idle", json!({}));
    wait_turn_end(&mut sub, turn_id).await.kind == "complete"
}

fn prlimit(pid: u32, fsize: &str) {
    let ok = std::process::Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &format!("--fsize={fsize}")])
        .status()
        .unwrap()
        .success();
    assert!(ok, "prlimit --pid");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_keeps_the_original_and_the_log_verifies_after() {
    init_test_logs();
    let fake = FakeRuntime::start().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let config = dir.path().join("bridge.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\ndrain = \"0s\"\n[runtime]\nconnect = \"{}\"\nhealth_interval = \"0s\"\n\
             [audit]\npath = \"{}\"\nfsync = \"always\"\non_failure = \"keep-original\"\n\
             [state]\nenabled = false\n",
            fake.addr,
            log.display()
        ),
    )
    .unwrap();
    let (mut bridge, addr) = spawn_limited(&config).await;
    let c = client_at(addr).await;
    c.initialize(
        "ide".into(),
        vec!["1.0.0".into()],
        vec!["ahp-root://".into()],
    )
    .await
    .unwrap();
    answer_by_appending(&c, "REWRITTEN");
    let entry =
        json!({"clientId": "ide", "tools": [], "systemMessageTransform": {"sections": ["tone"]}});
    create_session(&c, "ahp-session:/w", Some(entry)).await;
    let mut conn = fake.next_conn().await;
    let create = conn.call_of("session.create").await;
    let rid = create["params"]["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(creation_outcome(&c, "ahp-session:/w").await, None);

    // Rewrites are applied while they can be audited; past the limit, the
    // runtime gets the original, and turns go on.
    let mut answers = Vec::new();
    let mut kept = 0;
    for i in 0..12u64 {
        let original = format!("tone text {i} {}", "x".repeat(200));
        let got = transform(&mut conn, &rid, 100 + i, &original).await;
        if got == original {
            kept += 1;
        } else {
            assert_eq!(got, format!("{original}\nREWRITTEN"));
        }
        answers.push(got);
        assert!(
            turn(&c, &mut conn, &format!("t{i}")).await,
            "turn {i} completes"
        );
        if kept == 3 {
            break;
        }
    }
    assert_eq!(kept, 3, "the limit was reached: {answers:?}");
    assert!(std::fs::metadata(&log).unwrap().len() <= LIMIT);
    assert!(
        bridge.child.try_wait().unwrap().is_none(),
        "SIGXFSZ did not kill the bridge"
    );
    let rewritten_before = answers.len() - kept;
    assert!(rewritten_before >= 2, "some rewrites fit: {answers:?}");

    // Space returns: the next records are written, after one that counts the loss.
    prlimit(bridge.pid, "unlimited:unlimited");
    for i in 20..22u64 {
        let original = format!("tone text {i}");
        let got = transform(&mut conn, &rid, 100 + i, &original).await;
        assert_eq!(
            got,
            format!("{original}\nREWRITTEN"),
            "rewrites apply again"
        );
        answers.push(got);
    }
    let term = std::process::Command::new("kill")
        .args(["-TERM", &bridge.pid.to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let status = tokio::time::timeout(DEADLINE, bridge.child.wait())
        .await
        .expect("the bridge stops on SIGTERM")
        .unwrap();
    assert!(
        status.success(),
        "{status:?}: {:?}",
        bridge.stderr.lock().unwrap()
    );
    assert!(
        bridge
            .stderr
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("keep-original")),
        "the operator is told: {:?}",
        bridge.stderr.lock().unwrap()
    );

    let (ok, text) = support::process::run_bin([
        std::ffi::OsStr::new("audit"),
        "verify".as_ref(),
        log.as_os_str(),
    ]);
    assert!(ok, "{text}");
    let records: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Every rewrite the runtime got is in the log, by its hash.
    let audited: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "transform")
        .map(|r| &r["sections"][0]["sha256After"])
        .collect();
    for a in answers.iter().filter(|a| a.ends_with("REWRITTEN")) {
        let h = Value::from(sha256_hex(a.as_bytes()));
        assert!(
            audited.contains(&&h),
            "an unaudited rewrite reached the runtime: {a:?}"
        );
    }
    assert_eq!(audited.len(), rewritten_before + 2);
    let recovered: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "recovered")
        .collect();
    // A small `recovered` record may fit under the limit where a transform
    // record does not: then more than one accounts for the loss, each for
    // the records lost since the one before.
    assert!(!recovered.is_empty(), "{records:?}");
    let lost: u64 = recovered
        .iter()
        .map(|r| r["lostRecords"].as_u64().unwrap())
        .sum();
    assert_eq!(lost, kept as u64, "every record not written counted once");
    for r in &recovered {
        assert_eq!(r["cutBytes"], 0, "the torn write was cut back");
    }
}
