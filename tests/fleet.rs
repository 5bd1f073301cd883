//! A fleet on one machine, with real parts: three bridges (on 127.0.0.2, .3
//! and .4, each with its real Copilot CLI on the scripted model), HAProxy
//! (Debian) in front with `deploy/haproxy/haproxy.cfg` (only its addresses
//! and ports put in), one rsyslogd collecting every bridge's audit records
//! into one file. Each principal's connections land on one bridge; SIGTERM
//! that bridge: within 10 s its principal's new connections are served by
//! another while its running turn completes; restarted on the same state,
//! its sessions are listed again; `audit verify --against --instance` holds
//! for each bridge and fails for one whose local log was altered.

use crate::support;

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ahp_bridge_join::Reply;
use ahp_bridge_join::ScriptedModel;
use ahp_types::actions::StateAction;
use serde_json::{json, Value};
use support::e2e::{ready_session, start_turn, wait_action, wait_turn_end};
use support::process::*;
use support::rsyslog::start_rsyslogd;
use support::*;

const ALICE: (&str, &str) = ("alice", "alice-token-0123456789abcdef");
const BOB: (&str, &str) = ("bob", "bob-token-0123456789abcdef01");
const DRAIN: Duration = Duration::from_secs(8);

/// One bridge of the fleet: its name, address, folder and config.
struct Member {
    name: String,
    dir: PathBuf,
    config: String,
    process: Option<BridgeProcess>,
}

impl Member {
    fn start(&mut self) {
        self.process = Some(BridgeProcess::start_config(&self.dir, &self.config));
    }
    fn process(&self) -> &BridgeProcess {
        self.process.as_ref().expect("running")
    }
    fn log(&self) -> PathBuf {
        self.dir.join("audit.jsonl")
    }
}

fn member(root: &Path, i: usize, model: &ScriptedModel, syslog_port: u16) -> Member {
    let (name, ip) = (format!("bridge-{i}"), format!("127.0.0.{}", i + 2));
    let dir = root.join(&name);
    std::fs::create_dir_all(&dir).unwrap();
    let principals: String = [ALICE, BOB]
        .iter()
        .map(|(n, t)| principal_toml(n, t, &["observe", "participate", "transform"], ""))
        .collect();
    let config = format!(
        "[admin]\nlisten = \"{ip}:0\"\n\
         [server]\nlisten = \"{ip}:0\"\ninstance = \"{name}\"\ndrain = \"{}s\"\nreload_on_change = false\n\
         {principals}\n\
         [audit]\npath = {:?}\n\
         [audit.syslog]\naddress = \"tcp:127.0.0.1:{syslog_port}\"\napp_name = \"ahp-bridge-test\"\n\
         {}",
        DRAIN.as_secs(),
        dir.join("audit.jsonl").display().to_string(),
        offline_runtime_toml(model, &dir),
    );
    Member {
        name,
        dir,
        config,
        process: None,
    }
}

/// HAProxy on `deploy/haproxy/haproxy.cfg`, its bind and servers pointed at
/// this fleet; killed when dropped.
struct Haproxy {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn haproxy(members: &[Member]) -> Haproxy {
    let shipped = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/haproxy/haproxy.cfg"),
    )
    .unwrap();
    let port = http::free_port();
    let mut cfg = shipped.replace("bind 127.0.0.1:8420", &format!("bind 127.0.0.1:{port}"));
    for (i, m) in members.iter().enumerate() {
        let p = m.process();
        let line = format!("server {} 127.0.0.{}:8421", m.name, i + 2);
        let ours = format!("server {} {} port {}", m.name, p.addr, p.admin.port());
        assert!(cfg.contains(&line), "the shipped config names {line}");
        cfg = cfg.replace(&line, &ours);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("haproxy.cfg");
    std::fs::write(&path, cfg).unwrap();
    let child = Command::new("haproxy")
        .arg("-db")
        .arg("-f")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("haproxy starts (Debian package haproxy; scripts/install-test-packages.sh)");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    eventually("haproxy listens", || {
        std::net::TcpStream::connect(addr).is_ok()
    })
    .await;
    // Its health checks find the bridges ready before anyone connects.
    let started = Instant::now();
    while !upgrades(addr, ALICE.1).await || !upgrades(addr, BOB.1).await {
        assert!(
            started.elapsed() < DEADLINE,
            "haproxy never found a bridge ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Haproxy {
        child,
        addr,
        _dir: dir,
    }
}

/// Waits until the bridge's `/readyz` says 200 (its runtime started: three
/// at once on two cores take a while).
async fn ready(m: &Member) {
    let what = format!("ready ({})", m.name);
    http::readyz_until(m.process().admin, DEADLINE, &what, |s, _| s == 200).await;
}

/// Whether a WebSocket upgrade with `token` through `addr` is let in.
async fn upgrades(addr: SocketAddr, token: &str) -> bool {
    tokio_tungstenite::connect_async(format!("ws://{addr}/?tkn={token}"))
        .await
        .is_ok()
}

/// The sessions `who` owns on bridge `m` (asked of it directly).
async fn sessions_on(m: &Member, who: (&str, &str)) -> BTreeSet<String> {
    let c = connect_as(m.process().addr, who.1, &format!("{}-lister", who.0)).await;
    let list: Value = c
        .request("listSessions", json!({"channel": "ahp-root://"}))
        .await
        .unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["resource"].as_str().unwrap().to_owned())
        .collect()
}

/// The bridge whose sessions of `who` are exactly `uris`; the others hold none.
async fn home_of(members: &[Member], who: (&str, &str), uris: &[&str]) -> usize {
    let want: BTreeSet<String> = uris.iter().map(|u| u.to_string()).collect();
    let mut home = None;
    for (i, m) in members.iter().enumerate() {
        let held = sessions_on(m, who).await;
        if held.is_empty() {
            continue;
        }
        assert_eq!(
            held, want,
            "{}: all of {}'s sessions on one bridge",
            m.name, who.0
        );
        assert!(
            home.replace(i).is_none(),
            "{}'s sessions on two bridges",
            who.0
        );
    }
    home.unwrap_or_else(|| panic!("{}'s sessions on no bridge", who.0))
}

fn verify(log: &Path, collected: &Path, instance: &str) -> (bool, String) {
    run_bin([
        OsStr::new("audit"),
        "verify".as_ref(),
        log.as_os_str(),
        "--against".as_ref(),
        collected.as_os_str(),
        "--instance".as_ref(),
        instance.as_ref(),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_bridges_behind_haproxy_keep_principals_drain_restart_and_verify() {
    let model = ScriptedModel::start().await.unwrap();
    let (rs, syslog_port) = start_rsyslogd(tempfile::tempdir().unwrap()).await;
    let root = tempfile::tempdir().unwrap();
    let mut members: Vec<Member> = (0..3)
        .map(|i| member(root.path(), i, &model, syslog_port))
        .collect();
    for m in &mut members {
        m.start();
    }
    for m in &members {
        ready(m).await;
    }
    let front = haproxy(&members).await;

    // Each principal's connections, through HAProxy, land on one bridge.
    for (who, ids) in [(ALICE, ["a1", "a2"]), (BOB, ["b1", "b2"])] {
        for id in ids {
            let c = connect_as(front.addr, who.1, &format!("{}-{id}", who.0)).await;
            ready_session(&c, &format!("ahp-session:/{id}"), None).await;
        }
    }
    let home = home_of(&members, ALICE, &["ahp-session:/a1", "ahp-session:/a2"]).await;
    home_of(&members, BOB, &["ahp-session:/b1", "ahp-session:/b2"]).await;

    // A turn of alice's runs on her bridge when it is told to stop.
    let c = connect_as(front.addr, ALICE.1, "alice-ide").await;
    model.push(Reply::Slow {
        chunks: (0..10).map(|i| format!("part{i} ")).collect(),
        delay: Duration::from_millis(200),
    });
    let mut sub = start_turn(&c, "a1", "t1", "take your time").await;
    wait_action(&mut sub, |a| {
        matches!(a, StateAction::ChatDelta(_)).then_some(())
    })
    .await;
    members[home].process().signal("TERM");
    let signalled = Instant::now();
    // Her new connections go to another bridge once HAProxy sees /readyz 503.
    // One connection both probes and lists: the draining bridge may still
    // take an upgrade before it has seen the signal, and refuse the next.
    let served_elsewhere = loop {
        if let Some(c) = try_connect_as(front.addr, ALICE.1, "alice-again").await {
            let list: Value = c
                .request("listSessions", json!({"channel": "ahp-root://"}))
                .await
                .unwrap();
            if list["items"].as_array().is_some_and(|i| i.is_empty()) {
                break signalled.elapsed();
            }
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(10),
            "alice's new connections still reach her draining bridge after 10 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    eprintln!("served by another bridge {served_elsewhere:?} after SIGTERM");
    let end = wait_turn_end(&mut sub, "t1").await;
    assert_eq!(end.kind, "complete", "the running turn completed: {end:?}");
    let status = {
        let mut p = members[home].process.take().unwrap();
        let limit = (DRAIN + Duration::from_secs(10)).saturating_sub(signalled.elapsed());
        tokio::task::spawn_blocking(move || p.wait_exit("TERM", limit))
            .await
            .unwrap()
    };
    assert_eq!(status.code(), Some(0), "{status:?}");

    // Restarted on the same state: her sessions are listed again.
    members[home].start();
    ready(&members[home]).await;
    assert_eq!(
        sessions_on(&members[home], ALICE).await,
        ["ahp-session:/a1", "ahp-session:/a2"]
            .iter()
            .map(|s| s.to_string())
            .collect::<BTreeSet<_>>()
    );

    // One collector file for the fleet; each bridge's chain checked in it.
    for m in &mut members {
        let mut p = m.process.take().unwrap();
        p.signal("INT");
        tokio::task::spawn_blocking(move || p.wait_exit("INT", Duration::from_secs(30)))
            .await
            .unwrap();
    }
    let total: usize = members
        .iter()
        .map(|m| std::fs::read_to_string(m.log()).unwrap().lines().count())
        .sum();
    eventually("rsyslogd wrote every bridge's records", || {
        std::fs::read_to_string(rs.shipped())
            .map(|t| t.lines().count() >= total)
            .unwrap_or(false)
    })
    .await;
    for m in &members {
        let (ok, out) = verify(&m.log(), &rs.shipped(), &m.name);
        assert!(ok, "{}: {out}", m.name);
    }
    let altered = std::fs::read_to_string(members[1].log()).unwrap().replacen(
        "\"kind\":\"policy\"",
        "\"kind\":\"policy\",\"x\":1",
        1,
    );
    std::fs::write(members[1].log(), altered).unwrap();
    let (ok, out) = verify(&members[1].log(), &rs.shipped(), &members[1].name);
    assert!(!ok, "an altered local log: {out}");
}
