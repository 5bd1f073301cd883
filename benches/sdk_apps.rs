//! An SDK app's turns through the bridge vs the same app on the runtime
//! directly, interleaved.
//!
//! Both targets run the real Copilot CLI (each its own process and home),
//! pointed at the same scripted model on loopback (short replies). The app
//! is the official Node SDK, unmodified (`benches/sdk_turns.mjs`), with a
//! callback on `tone`:
//! - Bridged: the bridge in this process, with `[sdk]`, an audit log and the
//!   state store as an operator runs it; the app connects to `[sdk] listen`.
//! - Direct: a CLI started listening (`--port 0`, its own token); the app
//!   connects to it as to any CLI server.
//!
//! The app reaches each target through a tap (`benches/common/sdk_tap.rs`) that
//! times each callback's leg at the app: from the `systemMessage.transform`
//! request passing toward the app to its answer passing back. Per callback,
//! what the runtime waits: directly, that leg; through the bridge, the
//! bridge's own time from the runtime's request to its answer (the audit's
//! `latencyUs`), which holds the same leg.
//!
//! Each round, on each target (alternating which goes first): a session, its
//! first turn (the render, with one `systemMessage.transform` to the app's
//! callback), a second turn (no callback), then disconnect. Timed at the
//! app, from `send` to idle. The bridge's own time for each callback (from
//! the runtime's request to its answer, the app's round trip included) is
//! read from the audit log's `transform` records (`latencyUs`).
//!
//! Run: cargo bench --bench sdk_apps [-- ROUNDS]

#[path = "../tests/support/mod.rs"]
mod support;

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use ahp_bridge_join::config::Config;
use ahp_bridge_join::offline_runtime;
use ahp_bridge_join::runtime::start_runtime;
use ahp_bridge_join::Agent;
use ahp_bridge_join::ScriptedModel;
use common::{ms, pct, us};
use serde_json::{json, Value};

fn config(model: &ScriptedModel, dir: &Path, sdk: bool) -> Config {
    let sha = ahp_bridge_join::audit::sha256_hex(b"unused");
    let text = if sdk {
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[[principals]]\nname = \"sdk-apps\"\ntoken_sha256 = \"{sha}\"\n\
             roles = [\"observe\", \"participate\", \"transform\"]\n\
             [sdk]\nlisten = \"127.0.0.1:0\"\nprincipal = \"sdk-apps\"\n[audit]\npath = {:?}\n",
            dir.join("audit.jsonl").display().to_string()
        )
    } else {
        String::new()
    };
    let mut cfg = Config::parse(&text).unwrap();
    offline_runtime(&mut cfg, &model.base_url(), dir);
    cfg.runtime.working_directory = Some(dir.to_owned());
    cfg
}

fn series(v: &Value) -> Vec<Duration> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| Duration::from_secs_f64(x.as_f64().unwrap() / 1e3))
        .collect()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(30);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sdk = root.join(".sdk-tools/node/node_modules/@github/copilot-sdk/dist/index.js");
    assert!(sdk.is_file(), "run scripts/install-sdks.sh first");
    let model = ScriptedModel::start().await.unwrap();
    let (bdir, ddir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let running =
        ahp_bridge_join::start(Arc::new(config(&model, bdir.path(), true)), Agent::Copilot)
            .await
            .unwrap();
    let bridged = running.sdk.expect("[sdk] listens").to_string();
    let direct_cfg = config(&model, ddir.path(), false);
    let direct = start_runtime(&direct_cfg.runtime, 0, Arc::new(support::e2e::Silent), true)
        .await
        .unwrap();
    let reach = direct.reach.clone().unwrap();
    let (bridged, bridged_legs) = common::sdk_tap::start(bridged).await;
    let (direct_at, direct_legs) = common::sdk_tap::start(reach.addr.clone()).await;
    let r = &direct_cfg.runtime;
    let p = r.provider.as_ref().unwrap();
    let scenario = json!({
        "sdk": sdk.display().to_string(),
        "rounds": rounds,
        "model": r.model,
        "prompt": "Say hello.",
        "provider": {"type": p.kind, "baseUrl": p.base_url, "apiKey": "sk-offline"},
        "targets": [
            {"name": "bridged", "uri": bridged},
            {"name": "direct", "uri": direct_at, "token": reach.token.as_ref().map(|t| t.0.clone())},
        ],
    });
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(root.join("benches/sdk_turns.mjs"))
            .arg(scenario.to_string())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    println!("SDK app (official Node SDK), {rounds} rounds, interleaved; timed at the app");
    println!(
        "{:<28} {:>10} {:>10} {:>10} {:>10}",
        "", "p50", "p99", "bridged/direct p50", "p99"
    );
    for what in ["first", "plain"] {
        let mut b = series(&result["bridged"][what]);
        let mut d = series(&result["direct"][what]);
        let (b50, b99, d50, d99) = (
            pct(&mut b, 0.5),
            pct(&mut b, 0.99),
            pct(&mut d, 0.5),
            pct(&mut d, 0.99),
        );
        let label = if what == "first" {
            "first turn (1 callback)"
        } else {
            "later turn"
        };
        println!(
            "{label:<28} bridged {} / {}  direct {} / {}  ratio {:.3} / {:.3}",
            ms(b50),
            ms(b99),
            ms(d50),
            ms(d99),
            b50.as_secs_f64() / d50.as_secs_f64(),
            b99.as_secs_f64() / d99.as_secs_f64()
        );
        println!("{label:<28} added at p50: {}", ms(b50.saturating_sub(d50)));
    }
    let text = std::fs::read_to_string(bdir.path().join("audit.jsonl")).unwrap();
    let mut lat: Vec<Duration> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["kind"] == "transform")
        .filter_map(|r| r["latencyUs"].as_u64())
        .map(Duration::from_micros)
        .collect();
    let mut direct_leg = direct_legs.lock().unwrap().clone();
    let mut bridged_leg = bridged_legs.lock().unwrap().clone();
    if !lat.is_empty() && !direct_leg.is_empty() && !bridged_leg.is_empty() {
        let mut own: Vec<Duration> = lat
            .iter()
            .zip(&bridged_leg)
            .map(|(l, a)| l.saturating_sub(*a))
            .collect();
        let (b50, b99) = (pct(&mut lat, 0.5), pct(&mut lat, 0.99));
        let (d50, d99) = (pct(&mut direct_leg, 0.5), pct(&mut direct_leg, 0.99));
        println!(
            "per callback, what the runtime waits: bridged p50 {} p99 {}; direct p50 {} p99 {}; added at p50 {}",
            us(b50),
            us(b99),
            us(d50),
            us(d99),
            us(b50.saturating_sub(d50))
        );
        println!(
            "the bridge's own part (its time less the app's leg behind it, {} callbacks): p50 {} p99 {}; the app's leg through the bridge p50 {}",
            own.len(),
            us(pct(&mut own, 0.5)),
            us(pct(&mut own, 0.99)),
            us(pct(&mut bridged_leg, 0.5))
        );
    }
    running.stop(Duration::from_secs(5)).await;
}
