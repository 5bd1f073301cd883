//! Time the bridge adds to one transform round trip, measured two ways in
//! the same run, interleaved, against the same official `ahp` client:
//!
//! 1. At the router. Baseline: the host's peer asks the client
//!    `systemMessageTransform` directly over its WebSocket. Bridged: the same
//!    request through the router (active-client snapshot, ownership, plan,
//!    one batched call under the deadline, validation, merge, hashing).
//! 2. At the runtime's pipe, as the runtime sees it. A fake runtime
//!    (`common::pipe`) that the bridge reaches over TCP (`[runtime] connect`)
//!    sends `systemMessage.transform` for a bound session and times it from
//!    writing the request to reading the answer. Bridged: the whole bridge
//!    (frame, typing, routing, the AHP request to the client over a real
//!    WebSocket, validation, merge, the audit record appended) answers.
//!    Direct: a client connected to the same fake the same way answers it
//!    itself (reads the frame, appends to the owned sections, writes).
//!
//! Every round is timed on a worker thread, where the bridge's own tasks run.
//!
//! 3. With rules: the router request again through a second router whose
//!    policy has a realistic rule set on both owned sections (append-only,
//!    limits, must_keep, deny, and redaction of a token and an address that
//!    are in the text), so the difference is what evaluating the rules costs.
//!
//! 4. With Rego: at the pipe again, through a second bridge whose
//!    `[policy.rego]` is the examples' transform policy (group-gated
//!    rewrites and the link allow-list, in report mode so the rewrite still
//!    applies and every section is decided), interleaved with the bridge
//!    without it; and one `ahp.transform` decision alone, timed in process.
//!
//! Run: cargo bench --bench transform_roundtrip [-- ITERATIONS]
//! (`-- ITERATIONS --profile-pipe [--rego]`: only the bridge at the pipe,
//! or the one with the Rego policy, for a profiler; see
//! docs/performance.md).

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ahp_bridge_join::config::Config;
use ahp_bridge_join::policy::{Policy, PolicyReader};
use ahp_bridge_join::transform::{RecordOptions, Router};
use ahp_bridge_join::Agent;
use ahp_bridge_join::HostClients;
use common::pipe::{frame, read_frame, PipeRuntime};
use common::{pct, us};
use serde_json::{json, Value};
use tokio::io::{AsyncWriteExt, BufReader};

/// The sections the client owns; a third one is asked but not owned.
const OWNED: [&str; 2] = ["tone", "guidelines"];

/// A client answering the runtime's transforms itself, on its own
/// connection: what the bridge is compared with at the pipe.
async fn answer_directly(addr: std::net::SocketAddr) {
    let s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.set_nodelay(true).unwrap();
    let (r, mut w) = s.into_split();
    let mut r = BufReader::new(r);
    while let Some(m) = read_frame(&mut r).await {
        let (Some(id), Some(method)) = (m.get("id"), m["method"].as_str()) else {
            continue;
        };
        let result = if method == "systemMessage.transform" {
            let mut out = serde_json::Map::new();
            for (k, s) in m["params"]["sections"].as_object().unwrap() {
                let v = if OWNED.contains(&k.as_str()) {
                    json!({"content": format!("{} (house style)", s["content"].as_str().unwrap())})
                } else {
                    s.clone()
                };
                out.insert(k.clone(), v);
            }
            json!({"sections": out})
        } else {
            json!({})
        };
        let reply = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
        if w.write_all(&frame(reply.as_bytes())).await.is_err() {
            break;
        }
    }
}

fn line(name: &str, v: &mut [Duration]) -> (Duration, Duration) {
    let (p50, p99) = (pct(v, 0.5), pct(v, 0.99));
    println!("  {name:<28}: p50 {:>9}  p99 {:>9}", us(p50), us(p99));
    (p50, p99)
}

fn added(base: (Duration, Duration), bridged: (Duration, Duration)) {
    for (what, b, r) in [("p50", base.0, bridged.0), ("p99", base.1, bridged.1)] {
        println!(
            "  added at {what}{:<19}: {:>9}  (ratio {:.2}x)",
            "",
            us(r.saturating_sub(b)),
            r.as_secs_f64() / b.as_secs_f64()
        );
    }
}

/// A collector that takes every export and answers 200, for `--traces`.
fn discard_collector() -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut buf = vec![0u8; 1 << 20];
            let mut seen = Vec::new();
            // The head, then as many body bytes as it says.
            while let Ok(n) = conn.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&seen);
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let len = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if body.len() >= len {
                        break;
                    }
                }
            }
            let _ = conn
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    url
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let iterations: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    // `--traces`: every transform also makes (and exports) its spans, as a
    // bridge with [telemetry] otlp_endpoint set does.
    let _traces = std::env::args().any(|a| a == "--traces").then(|| {
        let cfg = ahp_bridge_join::config::TelemetryConfig {
            otlp_endpoint: Some(discard_collector()),
            ..Default::default()
        };
        let (layer, traces) = ahp_bridge_join::telemetry::build_traces(&cfg)
            .unwrap()
            .unwrap();
        let log = ahp_bridge_join::config::LogConfig {
            level: "warn".into(),
            ..Default::default()
        };
        ahp_bridge_join::telemetry::init_logs(&log, Some(layer));
        println!("with traces exported");
        traces
    });
    // Measured on a worker thread, where the bridge's own tasks run: the
    // main thread (block_on) would add a cross-thread wake-up to every await.
    tokio::spawn(run(iterations)).await.unwrap();
}

/// The examples' `ahp.transform` policy (examples/policy/), in report mode.
fn examples_rego() -> Config {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/policy");
    let file = |f: &str| format!("{:?}", root.join(f).display().to_string());
    let toml = format!(
        "[policy.rego]\nmodules = [{}, {}, {}]\ndata = [{}]\nenforcement = \"report\"\n",
        file("group-gated-rewrites/writers.rego"),
        file("group-gated-rewrites/transform.rego"),
        file("link-allowlist/links.rego"),
        file("link-allowlist/allowed_hosts.json"),
    );
    Config::parse(&toml).unwrap()
}

/// A bridge on `fake` (with an audit log in `dir`, as an operator runs it)
/// and its client answering transforms; the runtime id it bound.
async fn bridge_on(
    fake: &mut PipeRuntime,
    dir: &std::path::Path,
    tune: impl FnOnce(&mut Config),
) -> (
    ahp_bridge_join::Running,
    ahp::Client,
    common::pipe::PipeConn,
    String,
    Arc<Config>,
) {
    let mut cfg = Config::default();
    cfg.server.listen = "127.0.0.1:0".parse().unwrap();
    cfg.runtime.connect = Some(fake.addr.to_string().into());
    cfg.audit.path = Some(dir.join("audit.jsonl"));
    // Two bridges in one process: no admin listener (its port is fixed).
    cfg.admin.listen = None;
    tune(&mut cfg);
    let cfg = Arc::new(cfg);
    let r = ahp_bridge_join::start(cfg.clone(), Agent::Copilot)
        .await
        .unwrap();
    let t = ahp_ws::WebSocketTransport::connect(&format!("ws://{}", r.addr))
        .await
        .unwrap();
    let client = common::bench_client(t).await;
    let mut pipe = fake.next_conn().await;
    let runtime_id = pipe.created().await;
    (r, client, pipe, runtime_id, cfg)
}

async fn run(iterations: usize) {
    let dir = tempfile::tempdir().unwrap();
    let rego_dir = tempfile::tempdir().unwrap();
    let mut fake = PipeRuntime::start().await;
    // The clients are kept to the end: they answer the transforms.
    let (r, _client, bridge_pipe, runtime_id, cfg) = bridge_on(&mut fake, dir.path(), |_| {}).await;
    let rego = examples_rego().policy.rego;
    let (rr, _rego_client, rego_pipe, rego_runtime_id, rego_cfg) =
        bridge_on(&mut fake, rego_dir.path(), |c| c.policy.rego = rego).await;
    // A direct answerer connects to the same fake the same way.
    tokio::spawn(answer_directly(fake.addr));
    let direct_pipe = fake.next_conn().await;
    let unaudited = |cfg: &Config| {
        let policy = PolicyReader::fixed(Policy::from_config(cfg).unwrap());
        Router::new(policy, None, RecordOptions::from_config(&cfg.audit))
    };
    let router = unaudited(&cfg);
    let mut ruled = (*cfg).clone();
    ruled.policy.sections = Config::parse(RULES).unwrap().policy.sections;
    ruled.validate().unwrap();
    let ruled_router = unaudited(&ruled);
    let clients = HostClients(Some(r.host.clone()));
    let token = format!("ghp_{}", "Ab12".repeat(9));
    let sections: BTreeMap<String, String> = [
        ("tone", 600),
        ("guidelines", 1200),
        ("environment_context", 900),
    ]
    .into_iter()
    .map(|(id, n)| {
        let mut text = String::new();
        while text.len() < n {
            text.push_str("Prefer small, reviewable changes; never run rm -rf. ");
        }
        if id == "guidelines" {
            text.push_str(&format!("Push with {token}; ask ops@example.com. "));
        }
        (id.to_string(), text)
    })
    .collect();
    let direct_params = json!({"channel": "ahp-session:/bench", "sections": {"tone": {"content": sections["tone"]}, "guidelines": {"content": sections["guidelines"]}}});
    let pipe_sections: serde_json::Map<String, Value> = sections
        .iter()
        .map(|(k, v)| (k.clone(), json!({"content": v})))
        .collect();
    let bridged_ask = json!({"sessionId": runtime_id, "sections": pipe_sections});
    let rego_ask = json!({"sessionId": rego_runtime_id, "sections": pipe_sections});
    let direct_ask = json!({"sessionId": "direct", "sections": pipe_sections});
    let peer = r.host.connections().client_peer("bench").unwrap();
    if std::env::args().any(|a| a == "--profile-pipe") {
        // Only the bridge at the pipe, one request after another: what a
        // profiler records is the bridge's side of a transform (beside the
        // fake runtime and the client, which are told apart by their frames).
        // `--rego`: the bridge with the examples' Rego policy instead.
        let (pipe, ask) = match std::env::args().any(|a| a == "--rego") {
            true => (&rego_pipe, &rego_ask),
            false => (&bridge_pipe, &bridged_ask),
        };
        let t0 = Instant::now();
        for _ in 0..iterations {
            pipe.ask("systemMessage.transform", ask.clone()).await;
        }
        println!("{iterations} transforms at the pipe in {:?}", t0.elapsed());
        r.shutdown.cancel();
        rr.shutdown.cancel();
        return;
    }
    // One round: the direct call, then the same request through the router;
    // then at the pipe, the direct answerer and the bridge, in turn first.
    let round = |i: usize| {
        let (router, ruled_router, clients, peer) = (&router, &ruled_router, &clients, &peer);
        let token = &token;
        let (direct_params, sections) = (&direct_params, &sections);
        let (bridge_pipe, direct_pipe) = (&bridge_pipe, &direct_pipe);
        let (bridged_ask, direct_ask) = (&bridged_ask, &direct_ask);
        let (rego_pipe, rego_ask) = (&rego_pipe, &rego_ask);
        async move {
            let t0 = Instant::now();
            peer.call(
                "systemMessageTransform",
                direct_params.clone(),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
            let direct = t0.elapsed();
            let t0 = Instant::now();
            let out = router
                .route(clients, "ahp-session:/bench", "rt", sections)
                .await;
            let routed = t0.elapsed();
            assert!(out["tone"].ends_with("(house style)"));
            let t0 = Instant::now();
            let out = ruled_router
                .route(clients, "ahp-session:/bench", "rt", sections)
                .await;
            let with_rules = t0.elapsed();
            assert!(
                out["guidelines"].ends_with("(house style)"),
                "the rules accept the append"
            );
            assert!(
                out["guidelines"].contains(token.as_str()),
                "the redacted token is restored"
            );
            let pipe = |conn: &'static str| async move {
                let (t, answer) = match conn {
                    "bridge" => bridge_pipe.ask("systemMessage.transform", bridged_ask.clone()),
                    "rego" => rego_pipe.ask("systemMessage.transform", rego_ask.clone()),
                    _ => direct_pipe.ask("systemMessage.transform", direct_ask.clone()),
                }
                .await;
                let tone = answer["result"]["sections"]["tone"]["content"].as_str();
                assert!(
                    tone.is_some_and(|t| t.ends_with("(house style)")),
                    "{conn}: {answer}"
                );
                t
            };
            let (pipe_direct, pipe_bridged) = if i.is_multiple_of(2) {
                let d = pipe("direct").await;
                (d, pipe("bridge").await)
            } else {
                let b = pipe("bridge").await;
                (pipe("direct").await, b)
            };
            // The bridge with Rego beside the one without, in turn first.
            let (plain, with_rego) = if i.is_multiple_of(2) {
                let p = pipe("bridge").await;
                (p, pipe("rego").await)
            } else {
                let g = pipe("rego").await;
                (pipe("bridge").await, g)
            };
            [
                direct,
                routed,
                with_rules,
                pipe_direct,
                pipe_bridged,
                plain,
                with_rego,
            ]
        }
    };
    for i in 0..200 {
        round(i).await; // warm-up
    }
    let mut samples: [Vec<Duration>; 7] = Default::default();
    for i in 0..iterations {
        for (v, d) in samples.iter_mut().zip(round(i).await) {
            v.push(d);
        }
    }
    let [base, bridged, policed, pipe_direct, pipe_bridged, plain, with_rego] = &mut samples;
    println!(
        "transform round trip, {iterations} iterations, 3 sections (2 owned), loopback WebSocket"
    );
    println!("at the router:");
    let b = line("direct client call", base);
    let r2 = line("through the router", bridged);
    added(b, r2);
    let p = line("router + rules", policed);
    println!(
        "  rules add at p50   : {:?}  p99 {:?}  (over the router without rules)",
        p.0.saturating_sub(r2.0),
        p.1.saturating_sub(r2.1)
    );
    println!("at the runtime's pipe (fake runtime on TCP, the bridge with an audit log):");
    let b = line("a client answering directly", pipe_direct);
    let r2 = line("through the bridge", pipe_bridged);
    added(b, r2);
    println!("at the runtime's pipe, the examples' Rego policy (report mode) against none:");
    let b = line("the bridge without Rego", plain);
    let r2 = line("the bridge with Rego", with_rego);
    added(b, r2);
    one_decision(&rego_cfg, &sections, iterations);
    let records = std::fs::read_to_string(rego_dir.path().join("audit.jsonl")).unwrap();
    assert!(records.contains("regoDecision"), "the policy decided");
    rr.shutdown.cancel();
    r.shutdown.cancel();
}

/// One `ahp.transform` decision of the examples' policy on the guidelines
/// section's rewrite (1.2 KB), timed alone: an append as the bench's client
/// makes it (no link), and one that adds two links (one not allowed).
fn one_decision(cfg: &Config, sections: &BTreeMap<String, String>, iterations: usize) {
    use ahp_bridge_join::policy::{Body, ClientKind, Input, Subject};
    let policy = Policy::from_config(cfg).unwrap();
    let rego = policy.rego().unwrap();
    let claims = json!({"groups": ["copilot-writers"]});
    let subject = Subject::new(
        Some("corp:alice".into()),
        vec!["transform"],
        Some(std::sync::Arc::new(claims)),
        Some("bench".into()),
        ClientKind::Ahp,
    );
    let before = &sections["guidelines"];
    let cases = [
        (
            "an append, no link",
            format!("{before} (house style)"),
            "allowed",
        ),
        (
            "an append adding 2 links",
            format!("{before}\nSee https://docs.example.com/style and https://evil.test/x."),
            "would_deny",
        ),
    ];
    println!("one ahp.transform decision of the examples' policy (1.2 KB section):");
    for (what, after, outcome) in &cases {
        let mut v = Vec::with_capacity(iterations);
        for i in 0..iterations + 200 {
            let body = Body::Transform {
                section: "guidelines",
                before,
                after,
                owner: "bench",
            };
            let input = Input::new(&subject, Some("ahp-session:/bench"), body);
            let t0 = Instant::now();
            let d = rego.decide(&input, Duration::from_secs(1));
            if i >= 200 {
                v.push(t0.elapsed());
            }
            assert_eq!(d.outcome.as_str(), *outcome, "{d:?}");
        }
        line(what, &mut v);
    }
}

/// A realistic rule set on the two owned sections.
const RULES: &str = r#"
[policy.sections.tone]
mode = "append-only"
max_growth_bytes = 2000
must_keep = ["reviewable changes"]
deny = ['(?i)ignore (all )?previous instructions', '(?i)you are now', '(?i)disregard .* rules']

[policy.sections.guidelines]
mode = "append-only"
max_growth_bytes = 4000
must_keep = ["never run rm -rf", "reviewable"]
deny = ['(?i)ignore (all )?previous instructions', '(?i)rm\s+-rf\s+/']
redact = ['ghp_[A-Za-z0-9]{36}', '[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[a-z]{2,}']
"#;
