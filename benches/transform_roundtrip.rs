//! Time the bridge adds to one transform round trip.
//!
//! Baseline: the host's peer asks the client `systemMessageTransform` directly
//! over its WebSocket. Bridged: the same request goes through the router
//! (active-client snapshot, ownership, plan, one batched call under the
//! deadline, validation, merge, hashing for the audit record). Both run in the
//! same process and run, interleaved, against the same official `ahp` client.
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
    let clients = HostClients(Some(r.host.clone()));
    let sections: BTreeMap<String, String> = [
        ("tone", 600),
        ("guidelines", 1200),
        ("environment_context", 900),
    ]
    .into_iter()
    .map(|(id, n)| (id.to_string(), "x".repeat(n)))
    .collect();
    let direct_params = json!({"channel": "ahp-session:/bench", "sections": {"tone": {"content": sections["tone"]}, "guidelines": {"content": sections["guidelines"]}}});
    let peer = r.host.client_peer("bench").unwrap();
    // One round: the direct call, then the same request through the router.
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
        (direct, routed)
    };
    for _ in 0..200 {
        round().await; // warm-up
    }
    let (mut base, mut bridged) = (
        Vec::with_capacity(iterations),
        Vec::with_capacity(iterations),
    );
    for _ in 0..iterations {
        let (d, r) = round().await;
        base.push(d);
        bridged.push(r);
    }
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
    r.shutdown.cancel();
}
