//! The transform bridge end to end: the official ahp client answers
//! `systemMessageTransform`, the REAL runtime renders, the scripted model
//! receives; assertions are on what the model received and on the audit log.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ahp::Client;
use ahp_bridge_join::audit::{sha256_hex, verify_text};
use ahp_bridge_join::ScriptedModel;
use ahp_types::messages::JsonRpcError;
use serde_json::{json, Value};
use support::e2e::*;
use support::*;

type Seen = Arc<Mutex<Vec<Value>>>;

/// Installs a transform handler; `mode` decides the answer. Returns what the client was asked.
fn answer_transforms(c: &Client, mode: &'static str) -> Seen {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    c.set_server_request_handler(move |method, params: Value| {
        let s = s.clone();
        async move {
            assert_eq!(method, "systemMessageTransform");
            s.lock().unwrap().push(params.clone());
            let mut out = serde_json::Map::new();
            for (id, sec) in params["sections"].as_object().unwrap() {
                let c = sec["content"].as_str().unwrap();
                out.insert(
                    id.clone(),
                    json!({"content": format!("{c}\nMARKER-{id}-REWRITTEN")}),
                );
            }
            match mode {
                "rewrite" => Ok(json!({"sections": out})),
                "extra" => {
                    out.insert("not_asked".into(), json!({"content": "sneaky"}));
                    Ok(json!({"sections": out}))
                }
                "hang" => {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    Ok(json!({"sections": out}))
                }
                "error" => Err(JsonRpcError {
                    code: -32000,
                    message: "no".into(),
                    data: None,
                }),
                "malformed" => Ok(json!({"nope": 1})),
                "oversize" => {
                    Ok(json!({"sections": {"tone": {"content": "x".repeat(300 * 1024)}}}))
                }
                _ => unreachable!(),
            }
        }
    });
    seen
}

fn asked_ids(seen: &Seen) -> Vec<String> {
    seen.lock()
        .unwrap()
        .iter()
        .flat_map(|p| {
            p["sections"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect::<Vec<_>>()
        })
        .collect()
}

fn client_entry(id: &str, sections: &[&str]) -> Value {
    json!({"clientId": id, "tools": [], "systemMessageTransform": {"sections": sections}})
}

/// The transform records, after checking the chain holds, that the log
/// starts with the policy in force, and that every record names its hash.
fn audit_records(st: &Stack) -> Vec<Value> {
    let text = std::fs::read_to_string(st.dir.path().join("audit.jsonl")).unwrap_or_default();
    verify_text(&text).expect("audit chain holds");
    let all: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(all[0]["kind"], "policy", "{}", all[0]);
    let policy = all[0]["policySha256"].clone();
    assert_eq!(policy.as_str().map(str::len), Some(64));
    let transforms: Vec<Value> = all
        .into_iter()
        .filter(|r| r["kind"] == "transform")
        .collect();
    for r in &transforms {
        assert_eq!(r["policySha256"], policy, "{r}");
    }
    transforms
}

/// Every section of every audit record: its before-hash is that of the text the
/// runtime sent (as the client was asked it), and its after-hash that of a text
/// the model received in a system prompt: the original, or the client's rewrite.
fn assert_audit_matches(st: &Stack, seen: &[&Seen]) {
    let asked: Vec<(String, String)> = seen
        .iter()
        .flat_map(|s| s.lock().unwrap().clone())
        .flat_map(|p| {
            p["sections"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(id, v)| (id.clone(), v["content"].as_str().unwrap().to_owned()))
                .collect::<Vec<_>>()
        })
        .collect();
    let prompts: Vec<String> = st
        .model
        .requests()
        .iter()
        .filter_map(ScriptedModel::system_prompt)
        .collect();
    let records = audit_records(st);
    assert!(!records.is_empty(), "there are audit records to check");
    for sec in records
        .iter()
        .flat_map(|r| r["sections"].as_array().unwrap())
    {
        let id = sec["id"].as_str().unwrap();
        let hash = |t: &str| sha256_hex(t.as_bytes());
        let before = asked
            .iter()
            .find(|(i, c)| i == id && hash(c) == sec["sha256Before"])
            .map(|(_, c)| c.clone())
            .unwrap_or_else(|| panic!("{id}: the before-hash is no text the runtime sent: {sec}"));
        let after = [before.clone(), format!("{before}\nMARKER-{id}-REWRITTEN")]
            .into_iter()
            .find(|c| hash(c) == sec["sha256After"])
            .unwrap_or_else(|| {
                panic!("{id}: the after-hash is neither original nor rewrite: {sec}")
            });
        assert_eq!(sec["lenAfter"], after.len());
        assert!(
            prompts.iter().any(|p| p.contains(&after)),
            "{id}: the model never received the audited text"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opted_in_section_is_rewritten_and_restricted_never_sent() {
    let st = start_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    let seen = answer_transforms(&c, "rewrite");
    ready_session(
        &c,
        "ahp-session:/x1",
        Some(client_entry("ide", &["tone", "safety", "bogus"])),
    )
    .await;
    let end = run_turn(&c, "x1", "t1", "hello").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    let ids = asked_ids(&seen);
    assert_eq!(
        ids,
        vec!["tone".to_string()],
        "only the effective opt-in is asked"
    );
    let prompt = last_system_prompt(&st.model);
    assert!(
        prompt.contains("MARKER-tone-REWRITTEN"),
        "the model received the rewrite"
    );
    assert!(
        !prompt.contains("MARKER-safety"),
        "restricted section untouched"
    );
    // The audit hashes are those of what the client was sent and what the model got.
    let recs = audit_records(&st);
    let tone = recs
        .iter()
        .flat_map(|r| r["sections"].as_array().unwrap().clone())
        .find(|s| s["id"] == "tone")
        .unwrap();
    let before = seen.lock().unwrap()[0]["sections"]["tone"]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let after = format!("{before}\nMARKER-tone-REWRITTEN");
    assert_eq!(tone["sha256Before"], sha256_hex(before.as_bytes()));
    assert_eq!(tone["sha256After"], sha256_hex(after.as_bytes()));
    assert_eq!(tone["decision"], "transformed");
    assert_audit_matches(&st, &[&seen]);
    assert!(
        prompt.contains(&after),
        "the model received exactly the audited text"
    );
    assert!(
        tone.get("contentBefore").is_none(),
        "no content in the audit unless asked"
    );
    // `audit verify` on the real file, and on a tampered copy.
    let path = st.dir.path().join("audit.jsonl");
    let (ok, out) = audit_verify(&path);
    assert!(ok, "{out}");
    let text = std::fs::read_to_string(&path).unwrap();
    let bad = st.dir.path().join("bad.jsonl");
    std::fs::write(&bad, text.replacen("\"lenBefore\"", "\"lenBefore \"", 1)).unwrap();
    let (ok, out) = audit_verify(&bad);
    assert!(!ok);
    assert!(out.contains("record 2"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_clients_fall_back_to_the_original_within_the_timeout() {
    const TRANSFORM_TIMEOUT: Duration = Duration::from_millis(1500);
    // A hang guard, not a claim about speed (timings belong in benchmarks):
    // generous for a slow machine, yet shorter than the 30 s a hanging client
    // sleeps, so a router that waited for the client instead of falling back
    // at its deadline still fails here.
    const HANG_GUARD: Duration = Duration::from_secs(20);
    let st = start_stack(|c| c.policy.transform_timeout = TRANSFORM_TIMEOUT).await;
    let mut seens = Vec::new();
    for (i, mode, outcome) in [
        (1, "hang", "timeout"),
        (2, "error", "error"),
        (3, "malformed", "malformed"),
        (4, "oversize", "oversize"),
    ] {
        let c = initialized(&st.bridge, &format!("c{i}")).await;
        let seen = answer_transforms(&c, mode);
        let uri = format!("ahp-session:/f{i}");
        ready_session(&c, &uri, Some(client_entry(&format!("c{i}"), &["tone"]))).await;
        let end = tokio::time::timeout(HANG_GUARD, run_turn(&c, &format!("f{i}"), "t1", "hello"))
            .await
            .unwrap_or_else(|_| panic!("{mode}: no fallback within {HANG_GUARD:?}"));
        assert_eq!(end.kind, "complete", "{mode}: {end:?}");
        assert!(!asked_ids(&seen).is_empty(), "{mode}: the client was asked");
        let prompt = last_system_prompt(&st.model);
        assert!(
            !prompt.contains("MARKER-") && !prompt.contains("xxxxxxxxxx"),
            "{mode}: the model got the original"
        );
        let rec = audit_records(&st)
            .into_iter()
            .rev()
            .find(|r| r["session"] == uri.as_str())
            .unwrap();
        assert_eq!(rec["owners"][0]["outcome"], outcome, "{mode}: {rec}");
        let tone = &rec["sections"][0];
        assert_eq!(tone["sha256Before"], tone["sha256After"], "{mode}");
        seens.push(seen);
    }
    assert_audit_matches(&st, &seens.iter().collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extra_ids_are_ignored_and_recorded() {
    let st = start_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    let seen = answer_transforms(&c, "extra");
    ready_session(&c, "ahp-session:/x2", Some(client_entry("ide", &["tone"]))).await;
    assert_eq!(run_turn(&c, "x2", "t1", "hi").await.kind, "complete");
    assert!(!last_system_prompt(&st.model).contains("sneaky"));
    let rec = audit_records(&st)
        .into_iter()
        .find(|r| {
            r["owners"][0]["ignored"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        })
        .unwrap();
    assert_eq!(rec["owners"][0]["ignored"], json!(["not_asked"]));
    assert_audit_matches(&st, &[&seen]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_each_get_only_their_sections() {
    let st = start_stack(|_| {}).await;
    let a = initialized(&st.bridge, "a").await;
    let b = initialized(&st.bridge, "b").await;
    let seen_a = answer_transforms(&a, "rewrite");
    let seen_b = answer_transforms(&b, "rewrite");
    ready_session(&a, "ahp-session:/two", Some(client_entry("a", &["tone"]))).await;
    // b joins as a second active client with an overlapping opt-in.
    dispatch_raw(&b, "ahp-session:/two", 1, json!({"type": "session/activeClientSet", "activeClient": client_entry("b", &["tone", "last_instructions"])})).await;
    eventually("b active", || {
        st.bridge
            .host
            .for_backend()
            .active_clients("ahp-session:/two")
            .len()
            == 2
    })
    .await;
    let end = run_turn(&a, "two", "t1", "hi").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    assert_eq!(asked_ids(&seen_a), vec!["tone".to_string()]);
    assert_eq!(asked_ids(&seen_b), vec!["last_instructions".to_string()]);
    let p = last_system_prompt(&st.model);
    assert!(
        p.contains("MARKER-tone-REWRITTEN") && p.contains("MARKER-last_instructions-REWRITTEN")
    );
    assert_audit_matches(&st, &[&seen_a, &seen_b]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opting_in_later_is_asked_next_turn_and_opting_out_stops_it() {
    let st = start_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    let seen = answer_transforms(&c, "rewrite");
    ready_session(&c, "ahp-session:/late", Some(client_entry("ide", &[]))).await;
    assert_eq!(
        run_turn(&c, "late", "t1", "first-turn-PLUM").await.kind,
        "complete"
    );
    assert!(asked_ids(&seen).is_empty());
    let plain = last_system_prompt(&st.model);
    dispatch_raw(
        &c,
        "ahp-session:/late",
        1,
        json!({"type": "session/activeClientSet", "activeClient": client_entry("ide", &["tone"])}),
    )
    .await;
    eventually("opt-in applied", || {
        st.bridge
            .host
            .for_backend()
            .active_clients("ahp-session:/late")[0]
            .opt_in
            == ["tone"]
    })
    .await;
    assert_eq!(run_turn(&c, "late", "t2", "two").await.kind, "complete");
    assert_eq!(asked_ids(&seen), vec!["tone".to_string()]);
    assert!(last_system_prompt(&st.model).contains("MARKER-tone-REWRITTEN"));
    let all = st.model.requests().last().unwrap()["messages"].to_string();
    assert!(
        all.contains("first-turn-PLUM"),
        "history kept across the re-bind"
    );
    dispatch_raw(
        &c,
        "ahp-session:/late",
        2,
        json!({"type": "session/activeClientSet", "activeClient": client_entry("ide", &[])}),
    )
    .await;
    eventually("opt-out applied", || {
        st.bridge
            .host
            .for_backend()
            .active_clients("ahp-session:/late")[0]
            .opt_in
            .is_empty()
    })
    .await;
    assert_eq!(run_turn(&c, "late", "t3", "three").await.kind, "complete");
    assert_eq!(asked_ids(&seen).len(), 1, "not asked after opting out");
    assert_eq!(
        last_system_prompt(&st.model),
        plain,
        "back to the runtime's own prompt, byte for byte"
    );
    assert_audit_matches(&st, &[&seen]);
}

/// Runs `audit verify` on `path`; returns (success, stdout + stderr).
fn audit_verify(path: &std::path::Path) -> (bool, String) {
    support::process::run_bin([
        std::ffi::OsStr::new("audit"),
        "verify".as_ref(),
        path.as_os_str(),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_verify_catches_every_kind_of_tampering_on_a_real_log() {
    let st = start_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    let seen = answer_transforms(&c, "rewrite");
    for i in 1..=3 {
        let uri = format!("ahp-session:/a{i}");
        ready_session(&c, &uri, Some(client_entry("ide", &["tone"]))).await;
        assert_eq!(
            run_turn(&c, &format!("a{i}"), "t1", "hi").await.kind,
            "complete"
        );
    }
    let path = st.dir.path().join("audit.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len(),
        4,
        "the policy, then one record per runtime request"
    );
    let (ok, out) = audit_verify(&path);
    assert!(ok && out.contains("4 records"), "{out}");
    assert_audit_matches(&st, &[&seen]);
    let join = |ls: &[&str]| ls.iter().map(|l| format!("{l}\n")).collect::<String>();
    // One byte changed in the middle record (a hash digit).
    let mut flipped = lines[2].to_owned();
    let at = flipped.find("\"sha256After\":\"").unwrap() + 15;
    let b = if &flipped[at..at + 1] == "0" {
        "1"
    } else {
        "0"
    };
    flipped.replace_range(at..at + 1, b);
    let cases = [
        (
            "byte",
            join(&[lines[0], lines[1], &flipped, lines[3]]),
            "record 3",
        ),
        ("removed", join(&[lines[0], lines[1], lines[3]]), "record 3"),
        (
            "swapped",
            join(&[lines[0], lines[1], lines[3], lines[2]]),
            "record 3",
        ),
        (
            "cut",
            format!("{}{}", join(&lines[..3]), &lines[3][..lines[3].len() / 2]),
            "record 4",
        ),
    ];
    for (what, body, first_bad) in cases {
        let bad = st.dir.path().join(format!("{what}.jsonl"));
        std::fs::write(&bad, body).unwrap();
        let (ok, out) = audit_verify(&bad);
        assert!(!ok, "{what}: verify must fail: {out}");
        assert!(out.contains(first_bad), "{what}: {out}");
    }
}

/// Replaces the one runtime session id (a UUID after `session-state/`).
fn without_session_id(prompt: &str) -> String {
    let at = prompt.find("session-state/").expect("a session folder") + 14;
    let id = &prompt[at..at + 36];
    assert!(uuid::Uuid::parse_str(id).is_ok(), "{id}");
    prompt.replace(id, "<session id>")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_opt_ins_the_prompt_is_byte_identical_to_a_direct_runtime_session() {
    let st = start_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/plain", Some(client_entry("ide", &[]))).await;
    assert_eq!(run_turn(&c, "plain", "t1", "hi").await.kind, "complete");
    let via_bridge = last_system_prompt(&st.model);
    // The same runtime, driven directly, with no systemMessage at all.
    let cfg = st.cfg.clone();
    let rt = ahp_bridge_join::runtime::start_runtime(
        &cfg.runtime,
        0,
        Arc::new(support::e2e::Silent),
        false,
    )
    .await
    .unwrap();
    let sid = uuid::Uuid::new_v4().to_string();
    let wd = st.dir.path().display().to_string();
    let p = cfg.runtime.provider.as_ref().unwrap();
    use ahp_bridge_join::runtime::{send_params, SessionCreate, SessionSend};
    use ahp_bridge_join::runtime::{ModelProvider, SessionConfig};
    // No systemMessage at all: the runtime's own prompt.
    let direct = SessionConfig {
        session_id: sid.clone(),
        model: cfg.runtime.model.clone(),
        working_directory: wd,
        tools: vec![],
        provider: Some(ModelProvider {
            kind: p.kind.clone(),
            base_url: p.base_url.clone(),
            api_key: p.api_key.clone(),
        }),
        system_message: None,
        github_token: None,
        customizations: Default::default(),
    };
    rt.conn.call::<SessionCreate>(&direct).await.unwrap();
    rt.conn
        .call::<SessionSend>(&send_params(&sid, "hi"))
        .await
        .unwrap();
    let reqs = st
        .model
        .wait_requests(2, DEADLINE)
        .await
        .expect("the direct session reached the model");
    let direct = ScriptedModel::system_prompt(&reqs[1]).unwrap();
    // The prompt names each session's own folder; nothing else may differ.
    assert!(direct.contains(&sid));
    let direct = direct.replace(&sid, "<session id>");
    let via_bridge = without_session_id(&via_bridge);
    assert_eq!(
        via_bridge, direct,
        "the bridge must not change the prompt of a session without opt-ins"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_in_flight_is_not_redirected_when_the_active_client_changes() {
    let st = start_stack(|_| {}).await;
    let a = initialized(&st.bridge, "a").await;
    let b = initialized(&st.bridge, "b").await;
    // a answers only when the test says so; b answers at once.
    let (asked_tx, mut asked_rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let go = Arc::new(tokio::sync::Notify::new());
    let seen_a: Seen = Arc::default();
    let (g, sa) = (go.clone(), seen_a.clone());
    a.set_server_request_handler(move |_m, params: Value| {
        let (tx, g) = (asked_tx.clone(), g.clone());
        sa.lock().unwrap().push(params.clone());
        async move {
            let _ = tx.send(params.clone());
            g.notified().await;
            let c = params["sections"]["tone"]["content"].as_str().unwrap();
            Ok(json!({"sections": {"tone": {"content": format!("{c}\nMARKER-tone-REWRITTEN")}}}))
        }
    });
    let seen_b = answer_transforms(&b, "rewrite");
    ready_session(&a, "ahp-session:/mid", Some(client_entry("a", &["tone"]))).await;
    let mut sub = start_turn(&a, "mid", "t1", "hi").await;
    tokio::time::timeout(DEADLINE, asked_rx.recv())
        .await
        .expect("a is asked")
        .unwrap();
    // While a holds the request: a leaves, b arrives with the same opt-in.
    dispatch_raw(
        &a,
        "ahp-session:/mid",
        2,
        json!({"type": "session/activeClientRemoved", "clientId": "a"}),
    )
    .await;
    dispatch_raw(
        &b,
        "ahp-session:/mid",
        1,
        json!({"type": "session/activeClientSet", "activeClient": client_entry("b", &["tone"])}),
    )
    .await;
    eventually("b is the only active client", || {
        let ac = st
            .bridge
            .host
            .for_backend()
            .active_clients("ahp-session:/mid");
        ac.len() == 1 && ac[0].client_id == "b"
    })
    .await;
    go.notify_one();
    let end = wait_turn_end(&mut sub, "t1").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    assert!(
        asked_ids(&seen_b).is_empty(),
        "b was not asked the request a held"
    );
    let rec = audit_records(&st).pop().unwrap();
    assert_eq!(rec["owners"][0]["clientId"], "a", "{rec}");
    assert_eq!(rec["owners"].as_array().unwrap().len(), 1, "{rec}");
    assert_eq!(rec["owners"][0]["outcome"], "transformed", "{rec}");
    assert!(last_system_prompt(&st.model).contains("MARKER-tone-REWRITTEN"));
    assert_audit_matches(&st, &[&seen_a, &seen_b]);
}
