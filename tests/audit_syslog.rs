//! Shipping to a real rsyslogd (Debian package `rsyslog`), started by the test
//! with its own config: imptcp on a loopback port and on a unix stream socket,
//! every message of our APP-NAME written as its MSG (the record) to a file.
//! The bridge runs the real Copilot CLI against the scripted model. Without
//! rsyslogd the tests FAIL: CI installs it (.ci/run).

use crate::support;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use ahp_bridge_join::config::SyslogConfig;
use serde_json::{json, Value};
use support::e2e::{ready_session, run_turn, start_stack, Stack};
use support::process::run_bin;
use support::rsyslog::{start_rsyslogd, Rsyslogd};
use support::*;

fn syslog(address: String, queue: usize) -> SyslogConfig {
    SyslogConfig {
        address,
        app_name: "ahp-bridge-test".into(),
        queue,
        ..Default::default()
    }
}

fn keygen(dir: &Path) -> PathBuf {
    let (ok, out) = run_bin([
        OsStr::new("audit"),
        "keygen".as_ref(),
        "--out".as_ref(),
        dir.join("k").as_os_str(),
    ]);
    assert!(ok, "{out}");
    dir.join("k.key")
}

async fn turns(st: &Stack, names: &[&str]) {
    let c = initialized(&st.bridge, "ide").await;
    answer_by_appending(&c, "shipped");
    for n in names {
        let entry = json!({"clientId": "ide", "tools": [], "systemMessageTransform": {"sections": ["tone"]}});
        ready_session(&c, &format!("ahp-session:/{n}"), Some(entry)).await;
        assert_eq!(run_turn(&c, n, "t1", "hi").await.kind, "complete");
    }
}

fn read_lines(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

/// `audit verify` with the key and the shipped copy: (passed, output).
fn verify_against(log: &Path, key: &Path, shipped: &Path) -> (bool, String) {
    let pubkey = key.with_extension("pub");
    run_bin([
        OsStr::new("audit"),
        "verify".as_ref(),
        log.as_os_str(),
        "--pubkey".as_ref(),
        pubkey.as_os_str(),
        "--against".as_ref(),
        shipped.as_os_str(),
    ])
}

/// Two bridges of a fleet ship to one rsyslogd: its one file holds both
/// trails interleaved, each message's HOSTNAME the bridge's `[server]
/// instance`, and `audit verify --against FILE --instance NAME` checks each
/// bridge's chain in it, and fails for a bridge whose local log was altered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleets_trail_in_one_collector_file_is_verified_bridge_by_bridge() {
    let (rs, port) = start_rsyslogd(tempfile::tempdir().unwrap()).await;
    let bridge = |name: &'static str| {
        start_stack(move |c| {
            c.server.instance = Some(name.into());
            c.audit.syslog = Some(syslog(format!("tcp:127.0.0.1:{port}"), 1000));
        })
    };
    let (a, b) = (bridge("bridge-a").await, bridge("bridge-b").await);
    turns(&a, &["a1", "a2"]).await;
    turns(&b, &["b1"]).await;
    a.bridge.stop(std::time::Duration::from_secs(10)).await;
    b.bridge.stop(std::time::Duration::from_secs(10)).await;
    let log = |st: &Stack| st.dir.path().join("audit.jsonl");
    let total = read_lines(&log(&a)).len() + read_lines(&log(&b)).len();
    eventually("rsyslogd wrote both bridges' records", || {
        read_lines(&rs.shipped()).len() >= total
    })
    .await;
    for (st, name) in [(&a, "bridge-a"), (&b, "bridge-b")] {
        for l in read_lines(&log(st)) {
            assert_eq!(serde_json::from_str::<Value>(&l).unwrap()["instance"], name);
        }
    }
    let mut hosts = read_lines(&rs.hosts());
    hosts.sort();
    hosts.dedup();
    assert_eq!(hosts, ["bridge-a", "bridge-b"], "each message's HOSTNAME");

    let verify = |log: &Path, instance: &str| {
        run_bin([
            OsStr::new("audit"),
            "verify".as_ref(),
            log.as_os_str(),
            "--against".as_ref(),
            rs.shipped().as_os_str(),
            "--instance".as_ref(),
            instance.as_ref(),
        ])
    };
    for (st, name) in [(&a, "bridge-a"), (&b, "bridge-b")] {
        let n = read_lines(&log(st)).len();
        let (ok, out) = verify(&log(st), name);
        assert!(ok, "{name}: {out}");
        assert!(out.contains(&format!("{n} shipped records match")), "{out}");
    }
    // One bridge's local log altered (a record's text changed, its chain
    // re-hashed would not match the collector's copy either).
    let altered = read_lines(&log(&a))
        .iter()
        .map(|l| {
            format!(
                "{}\n",
                l.replacen("\"kind\":\"policy\"", "\"kind\":\"policy\",\"x\":1", 1)
            )
        })
        .collect::<String>();
    std::fs::write(log(&a), altered).unwrap();
    let (ok, out) = verify(&log(&a), "bridge-a");
    assert!(!ok, "{out}");
    let (ok, out) = verify(&log(&b), "bridge-b");
    assert!(ok, "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rsyslogd_receives_every_record_and_checkpoint_over_tcp_and_catches_a_cut_tail() {
    let (rs, port) = start_rsyslogd(tempfile::tempdir().unwrap()).await;
    let keys = tempfile::tempdir().unwrap();
    let key = keygen(keys.path());
    let st = start_stack(|c| {
        c.audit.signing_key = Some(key.clone());
        c.audit.checkpoint_every = 2;
        c.audit.syslog = Some(syslog(format!("tcp:127.0.0.1:{port}"), 1000));
    })
    .await;
    turns(&st, &["s1", "s2", "s3"]).await;
    st.bridge.stop(std::time::Duration::from_secs(10)).await;
    let log = st.dir.path().join("audit.jsonl");
    let local = read_lines(&log);
    let kinds: Vec<Value> = local
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["kind"].clone())
        .collect();
    assert!(
        kinds.contains(&json!("checkpoint")) && kinds.contains(&json!("policy")),
        "{kinds:?}"
    );
    let (sent, dropped) = st
        .bridge
        .audit
        .as_ref()
        .unwrap()
        .shipper
        .as_ref()
        .unwrap()
        .stats();
    assert_eq!((sent, dropped), (local.len() as u64, 0));
    eventually("rsyslogd wrote every record", || {
        read_lines(&rs.shipped()).len() >= local.len()
    })
    .await;
    assert_eq!(
        read_lines(&rs.shipped()),
        local,
        "the shipped records are the local ones, byte for byte"
    );

    let (ok, out) = verify_against(&log, &key, &rs.shipped());
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!("{} shipped records match", local.len())),
        "{out}"
    );
    // The local tail cut (the last two records): the shipped copy catches it.
    let cut = st.dir.path().join("cut.jsonl");
    std::fs::write(
        &cut,
        local[..local.len() - 2]
            .iter()
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
    )
    .unwrap();
    let (ok, out) = verify_against(&cut, &key, &rs.shipped());
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!("record {} ", local.len() - 1)) && out.contains("tail was cut"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_a_unix_socket_the_shipper_reconnects_and_reports_what_a_full_queue_skipped() {
    let rs_dir = tempfile::tempdir().unwrap();
    let sock = Rsyslogd::socket(rs_dir.path());
    let keys = tempfile::tempdir().unwrap();
    let key = keygen(keys.path());
    // The daemon is not up yet: records queue (2 at most), the rest are counted.
    let st = start_stack(|c| {
        c.audit.signing_key = Some(key.clone());
        c.audit.checkpoint_every = 2;
        c.audit.syslog = Some(syslog(format!("unix:{}", sock.display()), 2));
    })
    .await;
    turns(&st, &["u1", "u2"]).await;
    let shipper = st.bridge.audit.as_ref().unwrap().shipper.clone().unwrap();
    let local_before = read_lines(&st.dir.path().join("audit.jsonl")).len() as u64;
    assert_eq!(
        shipper.stats(),
        (0, local_before - 2),
        "all but two were counted as not queued"
    );
    let (rs, _) = start_rsyslogd(rs_dir).await;
    // The shipper reconnects by itself (backoff) and drains the queue;
    // later records flow again.
    eventually("the queue drains after the reconnect", || {
        shipper.stats().0 == 2
    })
    .await;
    turns(&st, &["u3"]).await;
    st.bridge.stop(std::time::Duration::from_secs(10)).await;
    let log = st.dir.path().join("audit.jsonl");
    let local = read_lines(&log);
    let (sent, dropped) = shipper.stats();
    assert_eq!(
        sent + dropped,
        local.len() as u64,
        "every record sent or counted"
    );
    eventually("rsyslogd wrote what was sent", || {
        read_lines(&rs.shipped()).len() as u64 > sent
    })
    .await;
    let shipped = read_lines(&rs.shipped());
    let gap: Value = shipped
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["kind"] == "shipping_gap")
        .expect("a shipping_gap message");
    assert_eq!(gap["dropped"], dropped, "{gap}");
    assert!(
        shipped.contains(local.last().unwrap()),
        "the last record arrived after the reconnect"
    );
    let (ok, out) = verify_against(&log, &key, &rs.shipped());
    assert!(ok, "{out}");
    assert!(out.contains("could not queue"), "{out}");
}
