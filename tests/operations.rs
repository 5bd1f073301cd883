//! The bridge as an operator watches it: the real binary with the real
//! Copilot CLI, `/metrics` scraped by a real Prometheus (whose HTTP API is
//! asked for what the test caused), `/readyz` through a stopped runtime and
//! a shutdown, `health`, and the JSON log of a real run.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ahp::Client;
use ahp_bridge_join::Reply;
use ahp_bridge_join::ScriptedModel;
use serde_json::{json, Value};
use support::append_to_each;
use support::e2e::*;
use support::http;
use support::process::*;
use support::prometheus::Prometheus;

/// A hang guard for waits on the bridge, not a speed claim.
const GUARD: Duration = Duration::from_secs(60);

/// Answers every `systemMessageTransform` by appending a line to each
/// section; counts the requests.
fn rewrite_transforms(c: &Client) -> Arc<Mutex<usize>> {
    let asked: Arc<Mutex<usize>> = Arc::default();
    let a = asked.clone();
    c.set_server_request_handler(move |_method, params: Value| {
        *a.lock().unwrap() += 1;
        async move { Ok(append_to_each(&params, |_| "Be brief.".to_owned())) }
    });
    asked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_sees_the_turns_and_transforms_a_client_caused() {
    let model = ScriptedModel::start().await.unwrap();
    let bridge = BridgeProcess::start(&model, "instance = \"bridge-7\"", None);
    let prom = Prometheus::start(&[bridge.admin]);
    let c = connect(bridge.addr, "ide").await;
    let asked = rewrite_transforms(&c);
    let entry =
        json!({"clientId": "ide", "tools": [], "systemMessageTransform": {"sections": ["tone"]}});
    ready_session(&c, "ahp-session:/m1", Some(entry)).await;
    model.push(Reply::Text("One.".into()));
    model.push(Reply::Text("Two.".into()));
    for turn in ["t1", "t2"] {
        let end = run_turn(&c, "m1", turn, "hello").await;
        assert_eq!(end.kind, "complete", "{end:?}");
    }
    let transforms = *asked.lock().unwrap();
    assert!(transforms >= 1, "the client was asked to transform");
    let prom = tokio::task::spawn_blocking(move || {
        let want = transforms as f64;
        prom.wait_for("the transforms in Prometheus", |p| {
            p.query("sum(ahp_bridge_transform_requests_total{outcome=\"transformed\"})")
                == Some(want)
        });
        prom.wait_for("the turns in Prometheus", |p| {
            p.query("sum(ahp_bridge_turns_total{outcome=\"completed\"})") == Some(2.0)
        });
        // Section labels are the catalogue's ids.
        let tone = p_query(
            &prom,
            "sum(ahp_bridge_transform_sections_total{section=\"tone\",decision=\"transformed\"})",
        );
        assert_eq!(tone, Some(want));
        assert_eq!(p_query(&prom, "ahp_bridge_sessions"), Some(1.0));
        assert!(p_query(&prom, "ahp_bridge_turn_duration_seconds_count") == Some(2.0));
        assert!(p_query(&prom, "process_resident_memory_bytes").is_some_and(|b| b > 1e6));
        assert_eq!(p_query(&prom, "ahp_bridge_runtime_up"), Some(1.0));
        // Which bridge of a fleet this is (`[server] instance`); Prometheus
        // keeps its own `instance` (the target) and renames ours.
        assert_eq!(
            p_query(
                &prom,
                "ahp_bridge_build_info{exported_instance=\"bridge-7\"}"
            ),
            Some(1.0)
        );
        prom
    })
    .await
    .unwrap();
    drop(prom);
    // Both exposition formats.
    let admin = bridge.admin;
    let (om, text) = tokio::task::spawn_blocking(move || {
        let om = http::get(
            admin,
            "/metrics",
            &[("Accept", "application/openmetrics-text; version=1.0.0")],
        )
        .unwrap();
        let text = http::get(admin, "/metrics", &[]).unwrap();
        (om, text)
    })
    .await
    .unwrap();
    assert!(om
        .header("content-type")
        .unwrap()
        .starts_with("application/openmetrics-text"));
    assert!(om.body.ends_with("# EOF\n"));
    assert!(text
        .header("content-type")
        .unwrap()
        .starts_with("text/plain; version=0.0.4"));
    assert!(
        text.body.contains("instance=\"bridge-7\""),
        "build_info names the instance"
    );
    assert!(
        text.body.contains("# TYPE ahp_bridge_turns_total counter"),
        "{}",
        text.body
    );
    // Nothing on the admin listener names a session, client or prompt.
    for body in [&om.body, &text.body] {
        assert!(!body.contains("m1") && !body.contains("\"ide\"") && !body.contains("hello"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_follows_the_runtime_and_the_shutdown() {
    let model = ScriptedModel::start().await.unwrap();
    let mut bridge = BridgeProcess::start(&model, "", None);
    let admin = bridge.admin;
    let body = http::readyz_until(admin, GUARD, "ready", |s, _| s == 200).await;
    assert_eq!(body["checks"]["runtime"], "ok", "{body}");
    assert_eq!(body["checks"]["audit"], "ok", "{body}");
    assert_eq!(body["checks"]["state"], "ok", "{body}");
    // `health` says the same, as a supervisor would read it.
    let (ok, out) = run_bin(["health", "--admin", &admin.to_string()]);
    assert!(ok, "{out}");

    // The runtime stops answering: not ready, naming it.
    let runtime = descendants(bridge.child.id());
    assert!(!runtime.is_empty());
    signal_all(&runtime, "STOP");
    let body = http::readyz_until(admin, GUARD, "503 naming the runtime", |s, b| {
        s == 503 && b["checks"]["runtime"] != "ok"
    })
    .await;
    assert_eq!(
        body["checks"]["audit"], "ok",
        "only the runtime fails: {body}"
    );
    let (ok, out) = run_bin(["health", "--admin", &admin.to_string()]);
    assert!(!ok && out.contains("runtime"), "{out}");
    signal_all(&runtime, "CONT");
    http::readyz_until(admin, GUARD, "ready again", |s, _| s == 200).await;

    // A runtime that does not stop at SIGTERM keeps the shutdown going (the
    // bridge waits, then kills it): /readyz says 503 all along.
    signal_all(&descendants(bridge.child.id()), "STOP");
    let pid = bridge.child.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let body = http::readyz_until(admin, GUARD, "503 during shutdown", |s, b| {
        s == 503 && b["checks"]["shutdown"].is_string()
    })
    .await;
    assert_eq!(body["ready"], false, "{body}");
    let status = bridge.signal_and_wait("TERM", GUARD);
    assert_eq!(status.code(), Some(0));
}

fn signal_all(pids: &[u32], signal: &str) {
    for p in pids {
        let _ = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(p.to_string())
            .status();
    }
}

fn p_query(p: &Prometheus, q: &str) -> Option<f64> {
    p.query(q)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_json_log_line_parses_and_none_holds_the_prompt() {
    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bridge = BridgeProcess::start_with_tables(&model, dir.path(), "[log]\nformat = \"json\"\n");
    let c = connect(bridge.addr, "ide\nINFO forged").await;
    const SECRET: &str = "PROMPT-TEXT-8c1f";
    ready_session(&c, "ahp-session:/j1", None).await;
    model.push(Reply::Text("REPLY-TEXT-77aa".into()));
    let end = run_turn(&c, "j1", "t1", SECRET).await;
    assert_eq!(end.kind, "complete", "{end:?}");
    drop(c);
    let mut bridge = bridge;
    let status = bridge.signal_and_wait("TERM", GUARD);
    assert_eq!(status.code(), Some(0));
    // Every line is a JSON object, where it listens included.
    let lines: Vec<String> = bridge.log_lines("");
    assert!(
        lines.iter().any(|l| l.contains("\"listening on ws://")),
        "the startup line, as JSON: {lines:?}"
    );
    let parsed: Vec<(Value, &String)> = lines
        .iter()
        .map(|l| {
            (
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")),
                l,
            )
        })
        .collect();
    assert!(parsed.len() > 5, "{lines:?}");
    let json_lines: Vec<Value> = parsed.iter().map(|(v, _)| v.clone()).collect();
    for (v, raw) in &parsed {
        for key in ["timestamp", "level", "target", "message"] {
            assert!(v.get(key).is_some(), "no {key}: {raw}");
        }
        assert!(
            !raw.contains(SECRET) && !raw.contains("REPLY-TEXT"),
            "prompt text logged: {raw}"
        );
    }
    let init = json_lines
        .iter()
        .find(|v| v["message"] == "client initialized")
        .expect("the initialize line");
    assert_eq!(init["client"], "ide\\nINFO forged", "{init}");
    let ts = init["timestamp"].as_str().unwrap();
    assert!(
        ts.ends_with('Z') && ts.parse::<jiff::Timestamp>().is_ok(),
        "{ts}"
    );
}

#[test]
fn the_sample_alert_rules_pass_promtool_and_name_only_real_metrics() {
    let rules = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/alerts.yml");
    let out = std::process::Command::new("promtool")
        .args(["check", "rules", rules])
        .output()
        .expect("promtool runs (Debian package `prometheus`)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The families labelled by free values appear with their first value.
    let m = ahp_bridge_join::telemetry::metrics();
    m.transform_section("tone", "transformed");
    m.policy_refusal("tone", "deny[0]".into());
    m.runtimes(1);
    let exposed = m.encode(false);
    let families: Vec<&str> = exposed
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let text = std::fs::read_to_string(rules).unwrap();
    let named = regex::Regex::new(r"\b(ahp_bridge_\w+|process_\w+)").unwrap();
    for m in named.find_iter(&text) {
        let name = m.as_str();
        let base = ["_bucket", "_count", "_sum"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        assert!(
            families.contains(&base),
            "{name} is not a metric of the bridge: {families:?}"
        );
    }
}
