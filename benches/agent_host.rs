//! The bridge in front of the runtime's own AHP host (`[runtime] protocol =
//! "ahp"`) against the same client talking to such a host directly, in one
//! run, interleaved: a later turn (from `chat/turnStarted` sent to
//! `chat/turnComplete` received, at the client) and a session's creation
//! (from `createSession` sent until a turn can be sent: the session ready
//! and its chat subscribed), each round's first side alternating. Then
//! memory per session: the bridge's RSS
//! before and after N more sessions, divided by N.
//!
//! One host runs (the real CLI 1.0.102, started here as an operator would),
//! and both sides reach it: the bridge (the release binary, `serve
//! --config`, with `[runtime] connect` and the host's token file) and the
//! client directly, with the connection token and the sealed GitHub token.
//! So both sessions live in one host process, alike (`approvalMode`
//! manual on both), and answer from the one scripted model on loopback,
//! with a GitHub fake. The client is the official Rust one over `ahp-ws`
//! for both.
//!
//! The floor of any proxy is measured beside them: the direct client
//! again, through HAProxy in TCP mode (Debian's haproxy, a process of its
//! own as the bridge is), which adds the hop and nothing else. Without
//! haproxy on the PATH that side is left out. The bridge's own work on the
//! turns is reported as its CPU time, and under `AHP_BENCH_WRAP="valgrind
//! --tool=callgrind --callgrind-out-file=F"` counted in instructions: the
//! counts are dumped before the turns and after them, so the second dump
//! holds only theirs. Each turn's time at the client is also paired with
//! the host's own `duration` for it: the p50 of the difference is what a
//! side adds outside the host, which the host's variation between alike
//! sessions does not move.
//!
//! Run: cargo bench --bench agent_host [-- TURNS [CREATES [SESSIONS]]]

#[path = "../tests/support/mod.rs"]
mod support;

mod common;

use std::time::{Duration, Instant};

use ahp::{Client, ClientConfig, SubscriptionEvent};
use ahp_bridge_join::config::{Config, RuntimeProtocol, Secret};
use ahp_bridge_join::runtime::{spawn_ahp_host, AhpHostProcess};
use ahp_bridge_join::upstream::CopilotMeta;
use ahp_bridge_join::upstream::{sealed_token, SealBinding};
use ahp_bridge_join::GitHubFake;
use ahp_bridge_join::Reply;
use ahp_bridge_join::ScriptedModel;
use ahp_types::actions::StateAction;
use ahp_types::state::SnapshotState;
use common::{ms, pct};
use serde_json::{json, Value};
use support::agent_host::{agent_host_toml, start_fakes, GITHUB_TOKEN};
use support::process::{connect, BridgeProcess};

const GUARD: Duration = Duration::from_secs(120);

/// One side: a client, and how it names a session's chat.
struct Side {
    name: &'static str,
    client: Client,
    events: ahp::ClientEventStream,
    bridged: bool,
}

impl Side {
    /// Creates a session; returns its chat's URI once a turn can be sent.
    async fn create(&mut self) -> String {
        let uri = format!("copilot:/{}", uuid::Uuid::new_v4());
        // The bridge opens its upstream sessions with approvalMode manual;
        // the direct side asks the same, so both sessions are alike.
        let mut params = json!({"channel": uri, "provider": "copilot"});
        if !self.bridged {
            params["config"] = json!({"approvalMode": "manual"});
        }
        self.client
            .request::<_, Value>("createSession", params)
            .await
            .expect("createSession");
        let snap: Value = self
            .client
            .request("subscribe", json!({"channel": uri}))
            .await
            .unwrap();
        let state = &snap["snapshot"]["state"];
        if self.bridged && state["lifecycle"] != "ready" {
            self.wait(|a| matches!(a, StateAction::SessionReady(_)))
                .await;
        }
        let chat = state["defaultChat"]
            .as_str()
            .expect("a default chat")
            .to_owned();
        let _: Value = self
            .client
            .request("subscribe", json!({"channel": chat}))
            .await
            .unwrap();
        chat
    }

    /// One turn on `chat`: how long until its `chat/turnComplete` at the
    /// client, and the turn's `duration` as the host measured it.
    async fn turn(&mut self, chat: &str, model: &ScriptedModel) -> (Duration, Duration) {
        model.push(Reply::Text("Fine.".into()));
        let id = uuid::Uuid::new_v4().to_string();
        let begin = Instant::now();
        let seq = 1;
        self.client
            .notify(
                "dispatchAction",
                json!({"channel": chat, "clientSeq": seq, "action": {"type": "chat/turnStarted", "turnId": id,
                       "startedAt": jiff::Timestamp::now().to_string(),
                       "message": {"text": "ok?", "origin": {"kind": "user"}}}}),
            )
            .await
            .unwrap();
        let mut host_ms = 0;
        self.wait(|a| match a {
            StateAction::ChatTurnComplete(t) if t.turn_id == id => {
                host_ms = t.duration;
                true
            }
            StateAction::ChatError(e) if e.turn_id == id => {
                panic!("the turn failed: {}", e.part.error.message)
            }
            _ => false,
        })
        .await;
        let at_client = begin.elapsed();
        (at_client, Duration::from_millis(host_ms.max(0) as u64))
    }

    async fn wait(&mut self, mut pick: impl FnMut(&StateAction) -> bool) {
        tokio::time::timeout(GUARD, async {
            loop {
                let ev = self.events.recv().await.expect("events");
                if let SubscriptionEvent::Action(env) = ev.event {
                    if let Some(why) = &env.rejection_reason {
                        panic!("{}: an action was refused: {why}", self.name);
                    }
                    if pick(&env.action) {
                        return;
                    }
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{}: no such action within {GUARD:?}", self.name))
    }
}

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .nth(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

/// The host's environment for the fakes.
fn offline(cfg: &mut Config, model: &ScriptedModel, github: &GitHubFake) {
    for (k, v) in [
        ("COPILOT_GH_HOST", github.url()),
        ("COPILOT_DEBUG_GITHUB_API_URL", github.url()),
        ("COPILOT_API_URL", format!("http://{}", model.addr)),
    ] {
        cfg.runtime.env.insert(k.into(), v);
    }
}

/// The one host both sides reach, started here as an operator would.
async fn host(model: &ScriptedModel, github: &GitHubFake, dir: &std::path::Path) -> AhpHostProcess {
    let mut cfg = Config::default();
    cfg.runtime.protocol = RuntimeProtocol::Ahp;
    cfg.runtime.working_directory = Some(dir.to_owned());
    offline(&mut cfg, model, github);
    spawn_ahp_host(&cfg.runtime, &dir.join("host-home"))
        .await
        .expect("the host starts")
}

/// HAProxy in TCP mode in front of `host`, on a port of its own: the hop
/// of a proxy that reads nothing. `None` without haproxy on the PATH.
fn tcp_proxy(
    host: &AhpHostProcess,
    dir: &std::path::Path,
) -> Option<(std::process::Child, String)> {
    let upstream = host.url.trim_start_matches("ws://").trim_end_matches('/');
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = dir.join("haproxy.cfg");
    std::fs::write(
        &cfg,
        format!(
            "defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 1h\n  timeout server 1h\n\
             listen hop\n  bind 127.0.0.1:{port}\n  server host {upstream}\n"
        ),
    )
    .unwrap();
    let child = std::process::Command::new("haproxy")
        .args(["-db", "-f"])
        .arg(&cfg)
        .spawn()
        .ok()?;
    let until = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "haproxy does not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    Some((child, format!("ws://127.0.0.1:{port}/")))
}

/// Under callgrind, dumps the bridge's counts so far as `label`.
fn callgrind_dump(bridge: &BridgeProcess, label: &str) {
    if !std::env::var("AHP_BENCH_WRAP").is_ok_and(|w| w.contains("callgrind")) {
        return;
    }
    let ok = std::process::Command::new("callgrind_control")
        .args(["--dump", label, &bridge.pid().to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "callgrind_control --dump {label}");
}

/// A client of the host at `url` (the host's own, or a hop in front of
/// it), authenticated as the bridge would.
async fn client_of(url: &str, host: &AhpHostProcess, name: &'static str) -> Side {
    let url = format!("{url}?tkn={}", host.token.0);
    let t = ahp_ws::WebSocketTransport::connect(&url).await.unwrap();
    let client = Client::connect(t, ClientConfig::default()).await.unwrap();
    let events = client.events();
    let init: Value = client
        .request(
            "initialize",
            json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": name,
                   "initialSubscriptions": ["ahp-root://"]}),
        )
        .await
        .unwrap();
    let init: ahp_types::commands::InitializeResult = serde_json::from_value(init).unwrap();
    let challenge = CopilotMeta::of(init.meta.as_ref())
        .unwrap()
        .auth_challenge
        .unwrap();
    let root = init
        .snapshots
        .iter()
        .find_map(|s| match &s.state {
            SnapshotState::Root(r) => Some(r.clone()),
            _ => None,
        })
        .unwrap();
    let keys = CopilotMeta::of(root.meta.as_ref()).unwrap();
    let resource = root.agents[0].protected_resources.as_ref().unwrap()[0]
        .resource
        .clone();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let binding = SealBinding {
        resource: &resource,
        challenge: &challenge.challenge,
    };
    let token = sealed_token(
        keys.auth_key().unwrap(),
        &binding,
        &Secret(GITHUB_TOKEN.into()),
        now,
    )
    .unwrap();
    let _: Value = client
        .request(
            "authenticate",
            json!({"channel": "ahp-root://", "resource": resource, "token": token.0}),
        )
        .await
        .expect("the direct host takes the token");
    Side {
        name,
        client,
        events,
        bridged: false,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let (turns, creates, sessions) = (arg(0, 60), arg(1, 20), arg(2, 200));
    let (model, github) = start_fakes().await;
    let dir = tempfile::tempdir().unwrap();
    let host = host(&model, &github, dir.path()).await;
    let host_token = dir.path().join("host-token");
    std::fs::write(&host_token, &host.token.0).unwrap();
    let server = "max_sessions = 100000\nturns_per_minute = 100000\nmax_subscriptions = 4096";
    let runtime = format!("connect = {:?}", host.url);
    let ahp = format!(
        "connection_token_file = {:?}",
        host_token.display().to_string()
    );
    let config = agent_host_toml(&model, &github, dir.path(), (server, &runtime, &ahp));
    let bridge = BridgeProcess::start_config(dir.path(), &config);
    let client = connect(bridge.addr, "bench-bridged").await;
    let events = client.events();
    let mut bridged = Side {
        name: "bridged",
        client,
        events,
        bridged: true,
    };
    let mut direct = client_of(&host.url, &host, "direct").await;
    let hop = tcp_proxy(&host, dir.path());
    let mut proxied = match &hop {
        Some((_, url)) => Some(client_of(url, &host, "tcp-proxied").await),
        None => None,
    };

    // Session creation, interleaved (after one each, not counted).
    let chat_d = direct.create().await;
    let chat_b = bridged.create().await;
    let (mut create_d, mut create_b) = (Vec::new(), Vec::new());
    for i in 0..creates {
        for side in [i % 2, 1 - i % 2] {
            let (s, out) = match side {
                0 => (&mut direct, &mut create_d),
                _ => (&mut bridged, &mut create_b),
            };
            let t = Instant::now();
            s.create().await;
            out.push(t.elapsed());
        }
    }
    // A later turn: the first turn of each session is not counted.
    direct.turn(&chat_d, &model).await;
    bridged.turn(&chat_b, &model).await;
    let chat_p = match proxied.as_mut() {
        Some(p) => {
            let chat = p.create().await;
            p.turn(&chat, &model).await;
            Some(chat)
        }
        None => None,
    };
    callgrind_dump(&bridge, "before-turns");
    let cpu_before = bridge.cpu_time();
    let (mut turn_d, mut turn_b, mut turn_p) = (Vec::new(), Vec::new(), Vec::new());
    let (mut host_d, mut host_b, mut host_p) = (Vec::new(), Vec::new(), Vec::new());
    // Which side goes first rotates: the host's work after a turn
    // (saving, titles) lands on whichever turn follows it.
    for i in 0..turns {
        for k in 0..3 {
            match (i + k) % 3 {
                0 => {
                    let (c, h) = direct.turn(&chat_d, &model).await;
                    turn_d.push(c);
                    host_d.push(h);
                }
                1 => {
                    let (c, h) = bridged.turn(&chat_b, &model).await;
                    turn_b.push(c);
                    host_b.push(h);
                }
                _ => {
                    if let (Some(p), Some(chat)) = (proxied.as_mut(), &chat_p) {
                        let (c, h) = p.turn(chat, &model).await;
                        turn_p.push(c);
                        host_p.push(h);
                    }
                }
            }
        }
    }
    let cpu = bridge.cpu_time().saturating_sub(cpu_before);
    callgrind_dump(&bridge, "turns");
    // What each side adds outside the host's own timing of the same turn:
    // the host's time differs between alike sessions by more than the bound,
    // this difference does not carry it. Paired before the sorts below.
    let outside = |c: &[Duration], h: &[Duration]| {
        let mut v: Vec<Duration> = c.iter().zip(h).map(|(c, h)| c.saturating_sub(*h)).collect();
        pct(&mut v, 0.5)
    };
    let (out_d, out_b) = (outside(&turn_d, &host_d), outside(&turn_b, &host_b));
    let out_p = (!turn_p.is_empty()).then(|| outside(&turn_p, &host_p));
    let report = |what: &str, d: &mut [Duration], b: &mut [Duration]| {
        let (d50, d99, b50, b99) = (pct(d, 0.5), pct(d, 0.99), pct(b, 0.5), pct(b, 0.99));
        println!(
            "{what}: direct p50 {} p99 {} | bridged p50 {} p99 {} | ratio p50 {:.3} p99 {:.3}",
            ms(d50),
            ms(d99),
            ms(b50),
            ms(b99),
            b50.as_secs_f64() / d50.as_secs_f64(),
            b99.as_secs_f64() / d99.as_secs_f64()
        );
    };
    println!("{creates} creations and {turns} later turns each, interleaved");
    report("session creation", &mut create_d, &mut create_b);
    report("later turn", &mut turn_d, &mut turn_b);
    if !turn_p.is_empty() {
        let mut d = turn_d.clone();
        report(
            "  direct against the same client through HAProxy (tcp), as \"bridged\"",
            &mut d,
            &mut turn_p,
        );
    }
    report(
        "  the same turns as the host timed them",
        &mut host_d,
        &mut host_b,
    );
    let added = out_b.as_secs_f64() - out_d.as_secs_f64();
    let d50 = pct(&mut turn_d, 0.5).as_secs_f64();
    println!(
        "  outside the host's own time, p50: direct {} | bridged {} | the bridge adds {:.1} ms, \
         {:.3}x the direct turn's p50",
        ms(out_d),
        ms(out_b),
        added * 1000.0,
        (d50 + added) / d50
    );
    if let Some(out_p) = out_p {
        let added = out_p.as_secs_f64() - out_d.as_secs_f64();
        println!(
            "  the same through HAProxy (tcp): {} outside the host's time, it adds {:.1} ms, {:.3}x",
            ms(out_p),
            added * 1000.0,
            (d50 + added) / d50
        );
    }
    println!(
        "  the bridge's CPU time over the turns: {} ms, {:.2} ms a bridged turn",
        cpu.as_millis(),
        cpu.as_secs_f64() * 1000.0 / turns as f64
    );

    // Memory per session on the bridge.
    let before = bridge.rss_bytes();
    for _ in 0..sessions {
        bridged.create().await;
    }
    let after = bridge.rss_bytes();
    let per = (after.saturating_sub(before)) as f64 / sessions as f64 / 1024.0;
    println!(
        "bridge RSS {:.1} MiB -> {:.1} MiB over {sessions} more sessions: {per:.1} KiB per session",
        before as f64 / 1048576.0,
        after as f64 / 1048576.0
    );
    if let Some((mut child, _)) = hop {
        let _ = child.kill();
        let _ = child.wait();
    }
}
