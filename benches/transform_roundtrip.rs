//! Time the bridge adds to one transform round trip.
//!
//! Baseline: the host's peer asks the client `systemMessageTransform` directly
//! over its WebSocket. Bridged: the same request goes through the router
//! (active-client snapshot, ownership, plan, one batched call under the
//! deadline, validation, merge, hashing for the audit record). Both run in the
//! same process and run, interleaved, against the same official `ahp` client.
//! Policy: the same request through a second router whose policy has a
//! realistic rule set on both owned sections (append-only, limits, must_keep,
//! deny, and redaction of a token and an address that are in the text), so
//! the difference is what evaluating the rules costs.
//! Run: cargo bench --bench transform_roundtrip [-- ITERATIONS]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ahp_copilot_bridge::app::{self, Agent};
use ahp_copilot_bridge::bridge::transform_clients::HostClients;
use ahp_copilot_bridge::config::Config;
use ahp_copilot_bridge::transform::router::Router;
use serde_json::{json, Value};

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let iterations: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let mut cfg = Config::default();
    cfg.server.listen = "127.0.0.1:0".parse().unwrap();
    let cfg = Arc::new(cfg);
    let r = app::start(cfg.clone(), Agent::None).await.unwrap();
    let t = ahp_ws::WebSocketTransport::connect(&format!("ws://{}", r.addr))
        .await
        .unwrap();
    let c = ahp::Client::connect(t, ahp::ClientConfig::default())
        .await
        .unwrap();
    c.initialize("bench".into(), vec!["1.0.0".into()], vec![])
        .await
        .unwrap();
    c.set_server_request_handler(|_, p: Value| async move {
        let mut out = serde_json::Map::new();
        for (id, s) in p["sections"].as_object().unwrap() {
            out.insert(
                id.clone(),
                json!({"content": format!("{} (house style)", s["content"].as_str().unwrap())}),
            );
        }
        Ok(json!({"sections": out}))
    });
    let active = json!({"clientId": "bench", "tools": [], "systemMessageTransform": {"sections": ["tone", "guidelines"]}});
    let _: Value = c
        .request(
            "createSession",
            json!({"channel": "ahp-session:/bench", "activeClient": active}),
        )
        .await
        .unwrap();
    let router = Router::new(&cfg, None).unwrap();
    let mut ruled = (*cfg).clone();
    ruled.policy.sections = Config::parse(RULES).unwrap().policy.sections;
    ruled.validate().unwrap();
    let ruled_router = Router::new(&ruled, None).unwrap();
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
    let peer = r.host.client_peer("bench").unwrap();
    // One round: the direct call, then the same request through each router.
    let round = || async {
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
            .route(&clients, "ahp-session:/bench", "rt", &sections)
            .await;
        let routed = t0.elapsed();
        assert!(out["tone"].ends_with("(house style)"));
        let t0 = Instant::now();
        let out = ruled_router
            .route(&clients, "ahp-session:/bench", "rt", &sections)
            .await;
        let with_rules = t0.elapsed();
        assert!(
            out["guidelines"].ends_with("(house style)"),
            "the rules accept the append"
        );
        assert!(
            out["guidelines"].contains(&token),
            "the redacted token is restored"
        );
        (direct, routed, with_rules)
    };
    for _ in 0..200 {
        round().await; // warm-up
    }
    let (mut base, mut bridged, mut policed) = (
        Vec::with_capacity(iterations),
        Vec::with_capacity(iterations),
        Vec::with_capacity(iterations),
    );
    for _ in 0..iterations {
        let (d, r, p) = round().await;
        base.push(d);
        bridged.push(r);
        policed.push(p);
    }
    let (p50, p99) = (pct(&mut policed, 0.5), pct(&mut policed, 0.99));
    let (b50, b99, r50, r99) = (
        pct(&mut base, 0.5),
        pct(&mut base, 0.99),
        pct(&mut bridged, 0.5),
        pct(&mut bridged, 0.99),
    );
    println!(
        "transform round trip, {iterations} iterations, 3 sections (2 owned), loopback WebSocket"
    );
    println!("  direct client call : p50 {b50:?}  p99 {b99:?}");
    println!("  through the router : p50 {r50:?}  p99 {r99:?}");
    println!("  router + rules     : p50 {p50:?}  p99 {p99:?}");
    println!(
        "  added at p50       : {:?}  (ratio {:.2}x)",
        r50.saturating_sub(b50),
        r50.as_secs_f64() / b50.as_secs_f64()
    );
    println!(
        "  added at p99       : {:?}  (ratio {:.2}x)",
        r99.saturating_sub(b99),
        r99.as_secs_f64() / b99.as_secs_f64()
    );
    println!(
        "  rules add at p50   : {:?}  p99 {:?}  (over the router without rules)",
        p50.saturating_sub(r50),
        p99.saturating_sub(r99)
    );
    r.shutdown.cancel();
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
