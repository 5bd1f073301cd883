//! The router without Node or the real CLI: each client is an in-process
//! JSON-RPC [`Peer`] whose far end is played by a script, the audit log is a
//! real file, and time is tokio's paused clock, so the deadline cases are exact.

use std::sync::Mutex;

use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::*;
use crate::AskFuture;
use ahp_bridge_audit::verify_text;
use ahp_bridge_audit::AuditLog;
use ahp_bridge_base::config::Config;
use ahp_bridge_jsonrpc::{classify, CallError, Incoming, Peer, RpcError};
use ahp_bridge_policy::{ClientKind, Subject};
use ahp_bridge_policy::{OptIn, PolicySource};

/// How a scripted client answers a transform request.
#[derive(Clone)]
enum Script {
    /// Appends this text to every section it is asked for.
    Append(&'static str),
    /// Never answers.
    Hang,
    /// Answers with a JSON-RPC error.
    Error,
    /// Answers with this result, whatever it was asked.
    Raw(Value),
    /// Appends, and also answers a section it was not asked for.
    AppendWithExtra(&'static str, &'static str),
}

/// One scripted client: its opt-in, its peer, and what it was asked.
struct Client {
    opt_in: OptIn,
    peer: Arc<Peer>,
    asked: Arc<Mutex<Vec<Value>>>,
}

/// The session's active clients, in active-client order.
#[derive(Default)]
struct ScriptedClients {
    clients: Vec<Client>,
}

impl ScriptedClients {
    fn add(&mut self, client_id: &str, sections: &[&str], script: Script) -> Arc<Peer> {
        let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
        let peer = Peer::new(move |m: String| tx.send(serde_json::from_str(&m).unwrap()).is_ok());
        let asked = Arc::new(Mutex::new(Vec::new()));
        let (far_peer, far_asked) = (peer.clone(), asked.clone());
        tokio::spawn(async move {
            while let Some(message) = rx.recv().await {
                let Ok(Incoming::Request { id, method, params }) = classify(message) else {
                    continue;
                };
                assert_eq!(method, "systemMessageTransform");
                far_asked.lock().unwrap().push(params.clone());
                let answer = match &script {
                    Script::Hang => continue,
                    Script::Error => Err(RpcError::new(-32000, "client failed")),
                    Script::Raw(v) => Ok(v.clone()),
                    Script::Append(tail) => Ok(appended(&params, tail, None)),
                    Script::AppendWithExtra(tail, extra) => {
                        Ok(appended(&params, tail, Some(extra)))
                    }
                };
                far_peer.complete(&id, answer, 0);
            }
        });
        self.clients.push(Client {
            opt_in: OptIn {
                client_id: client_id.into(),
                sections: sections.iter().map(|s| s.to_string()).collect(),
                allowed: None,
                subject: Subject::new(
                    Some(format!("p-{client_id}")),
                    vec!["transform"],
                    None,
                    Some(client_id.into()),
                    ClientKind::Ahp,
                ),
            },
            peer: peer.clone(),
            asked,
        });
        peer
    }

    /// The params of every request `client_id` received.
    fn asked(&self, client_id: &str) -> Vec<Value> {
        let c = self
            .clients
            .iter()
            .find(|c| c.opt_in.client_id == client_id);
        c.map(|c| c.asked.lock().unwrap().clone())
            .unwrap_or_default()
    }
}

/// A client's answer: every section it was sent, with `tail` appended.
fn appended(params: &Value, tail: &str, extra: Option<&str>) -> Value {
    let mut out = serde_json::Map::new();
    for (id, s) in params["sections"].as_object().unwrap() {
        let content = format!("{}{tail}", s["content"].as_str().unwrap());
        out.insert(id.clone(), json!({ "content": content }));
    }
    if let Some(extra) = extra {
        out.insert(extra.into(), json!({"content": "not asked"}));
    }
    json!({ "sections": out })
}

impl TransformClients for ScriptedClients {
    fn opt_ins(&self, _session: &str) -> Vec<OptIn> {
        self.clients.iter().map(|c| c.opt_in.clone()).collect()
    }

    fn ask(
        &self,
        client_id: &str,
        session: &str,
        sections: &Sections,
        timeout: Duration,
    ) -> AskFuture {
        let peer = self
            .clients
            .iter()
            .find(|c| c.opt_in.client_id == client_id);
        let peer = peer.map(|c| c.peer.clone());
        let sections: serde_json::Map<String, Value> = sections
            .iter()
            .map(|(id, c)| (id.clone(), json!({ "content": c })))
            .collect();
        let params = json!({"channel": session, "sections": sections});
        Box::pin(async move {
            let Some(p) = peer else {
                return Err(AskError::Disconnected);
            };
            match p.call("systemMessageTransform", params, timeout).await {
                Ok(result) => typed_answer(result),
                Err(CallError::Timeout(_)) => Err(AskError::Timeout),
                Err(CallError::Closed) => Err(AskError::Disconnected),
                Err(CallError::Rpc(_)) => Err(AskError::Failed),
            }
        })
    }
}

/// A result as the bridge reads it off the wire (the AHP shape, in short).
fn typed_answer(result: Value) -> Result<ClientAnswer, AskError> {
    #[derive(Deserialize)]
    struct Section {
        content: String,
    }
    #[derive(Deserialize)]
    struct Answer {
        sections: BTreeMap<String, Section>,
    }
    let bytes = result.to_string().len();
    let parsed: Answer =
        serde_json::from_value(result).map_err(|_| AskError::Malformed { bytes })?;
    let sections = parsed
        .sections
        .into_iter()
        .map(|(id, s)| (id, s.content))
        .collect();
    Ok(ClientAnswer { sections, bytes })
}

/// The audit log as the bridge gives it to the router: appended in place.
struct LogPort(Arc<AuditLog>);

impl AuditPort for LogPort {
    fn append(&self, record: ahp_bridge_audit::TransformRecord) -> super::super::AppendFuture {
        let written = self.0.append(&record).map(drop);
        Box::pin(std::future::ready(
            written.map_err(super::super::AppendError::from),
        ))
    }
}

/// The router under test, with the source of its policy.
struct Fixture {
    router: Router,
    source: PolicySource,
}

impl std::ops::Deref for Fixture {
    type Target = Router;
    fn deref(&self) -> &Router {
        &self.router
    }
}

impl Fixture {
    fn set_policy(&self, policy: Policy) {
        self.source.replace(policy);
    }
}

const TIMEOUT: Duration = Duration::from_millis(1500);

/// A router with the default policy (`safety` restricted), a 1.5 s
/// deadline, and a real audit log in `dir`.
fn router(dir: &tempfile::TempDir, edit: impl FnOnce(&mut Config)) -> (Fixture, Arc<AuditLog>) {
    let mut cfg = Config::default();
    cfg.policy.transform_timeout = TIMEOUT;
    edit(&mut cfg);
    let (log, _) = AuditLog::open(&dir.path().join("audit.jsonl"), FsyncPolicy::Always).unwrap();
    cfg.validate().expect("a valid test config");
    let source = PolicySource::new(Policy::from_config(&cfg).unwrap());
    let options = RecordOptions::from_config(&cfg.audit);
    let port = Arc::new(LogPort(log.clone()));
    let router = Router::new(source.reader(), Some(port), options);
    (Fixture { router, source }, log)
}

fn request(ids: &[&str]) -> BTreeMap<String, String> {
    ids.iter()
        .map(|id| (id.to_string(), format!("original {id} text")))
        .collect()
}

/// The audit records written so far, after checking the chain holds.
fn records(dir: &tempfile::TempDir) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.path().join("audit.jsonl")).unwrap();
    verify_text(&text).expect("the audit chain verifies");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The decision and owner the record gives one section.
fn decision(record: &Value, id: &str) -> (String, Value) {
    let s = record["sections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("no section {id} in {record}"));
    (s["decision"].as_str().unwrap().into(), s["owner"].clone())
}

/// What the audit says `id` became, checked against the merged text.
fn assert_audited(
    record: &Value,
    merged: &BTreeMap<String, String>,
    original: &BTreeMap<String, String>,
) {
    for (id, after) in merged {
        let s = record["sections"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == *id)
            .unwrap();
        assert_eq!(
            s["sha256Before"],
            ahp_bridge_audit::sha256_hex(original[id].as_bytes())
        );
        assert_eq!(
            s["sha256After"],
            ahp_bridge_audit::sha256_hex(after.as_bytes())
        );
    }
}

use ahp_bridge_base::config::{FsyncPolicy, OnFailure};

#[tokio::test(start_paused = true)]
async fn a_rewrite_is_merged_and_audited_with_both_hashes() {
    let dir = tempfile::tempdir().unwrap();
    let (router, _log) = router(&dir, |_| {});
    let mut clients = ScriptedClients::default();
    clients.add("ide", &["tone", "guidelines"], Script::Append(" +ide"));
    let original = request(&["tone", "guidelines", "identity"]);

    let merged = router
        .route(&clients, "ahp-session:/s1", "rt-1", &original)
        .await;

    assert_eq!(merged["tone"], "original tone text +ide");
    assert_eq!(merged["guidelines"], "original guidelines text +ide");
    assert_eq!(
        merged["identity"], "original identity text",
        "nobody owns identity"
    );
    let asked = clients.asked("ide");
    assert_eq!(asked.len(), 1, "one batched request per owner: {asked:?}");
    let sent: BTreeSet<&String> = asked[0]["sections"].as_object().unwrap().keys().collect();
    assert_eq!(
        sent,
        BTreeSet::from([&"guidelines".to_string(), &"tone".to_string()])
    );
    assert_eq!(asked[0]["channel"], "ahp-session:/s1");

    let recs = records(&dir);
    assert_eq!(recs.len(), 1);
    assert_eq!(
        decision(&recs[0], "tone"),
        ("transformed".into(), json!("ide"))
    );
    assert_eq!(
        decision(&recs[0], "identity"),
        ("passthrough:no_owner".into(), Value::Null)
    );
    assert_eq!(
        recs[0]["owners"],
        json!([{"clientId": "ide", "principal": "p-ide", "outcome": "transformed", "ignored": []}]),
        "the record names the principal the owner acts for"
    );
    assert_eq!(recs[0]["runtimeSession"], "rt-1");
    assert_audited(&recs[0], &merged, &original);
}

#[tokio::test(start_paused = true)]
async fn a_disconnected_owner_falls_back_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (router, _log) = router(&dir, |_| {});
    let mut clients = ScriptedClients::default();
    clients
        .add("gone", &["tone"], Script::Append(" +gone"))
        .close();
    let original = request(&["tone"]);

    let started = tokio::time::Instant::now();
    let merged = router.route(&clients, "s", "rt", &original).await;

    assert_eq!(merged, original);
    assert_eq!(
        started.elapsed(),
        Duration::ZERO,
        "a closed peer is not waited for"
    );
    let recs = records(&dir);
    assert_eq!(
        decision(&recs[0], "tone"),
        ("disconnected".into(), json!("gone"))
    );
    assert_eq!(recs[0]["owners"][0]["outcome"], "disconnected");
}

#[tokio::test(start_paused = true)]
async fn a_silent_owner_is_given_up_at_the_one_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let (router, _log) = router(&dir, |_| {});
    let mut clients = ScriptedClients::default();
    clients.add("slow", &["tone"], Script::Hang);
    clients.add("quick", &["guidelines"], Script::Append(" +quick"));
    let original = request(&["tone", "guidelines"]);

    let started = tokio::time::Instant::now();
    let merged = router.route(&clients, "s", "rt", &original).await;

    // Paused time: the router waits exactly its deadline, no nested margins.
    assert_eq!(started.elapsed(), TIMEOUT);
    assert_eq!(merged["tone"], original["tone"]);
    assert_eq!(
        merged["guidelines"], "original guidelines text +quick",
        "the quick owner still counts"
    );
    let recs = records(&dir);
    assert_eq!(
        decision(&recs[0], "tone"),
        ("timeout".into(), json!("slow"))
    );
    assert_eq!(
        decision(&recs[0], "guidelines"),
        ("transformed".into(), json!("quick"))
    );
    assert_audited(&recs[0], &merged, &original);
}

#[tokio::test(start_paused = true)]
async fn a_restricted_section_is_never_sent_even_when_opted_in() {
    let dir = tempfile::tempdir().unwrap();
    let (router, _log) = router(&dir, |c| c.policy.restricted.push("tone".into()));
    let mut clients = ScriptedClients::default();
    clients.add(
        "ide",
        &["safety", "tone", "guidelines"],
        Script::Append(" +ide"),
    );
    let original = request(&["safety", "tone", "guidelines"]);

    let merged = router.route(&clients, "s", "rt", &original).await;

    let asked = clients.asked("ide");
    let sent: Vec<&String> = asked[0]["sections"].as_object().unwrap().keys().collect();
    assert_eq!(
        sent,
        ["guidelines"],
        "restricted sections never leave the bridge"
    );
    assert_eq!(merged["safety"], original["safety"]);
    assert_eq!(merged["tone"], original["tone"]);
    let recs = records(&dir);
    assert_eq!(
        decision(&recs[0], "safety"),
        ("passthrough:restricted".into(), Value::Null)
    );
    assert_eq!(
        decision(&recs[0], "tone"),
        ("passthrough:restricted".into(), Value::Null)
    );
}

#[tokio::test(start_paused = true)]
async fn malformed_error_and_oversize_answers_keep_the_original() {
    let cases = [
        (
            "malformed",
            Script::Raw(json!({"sections": {"tone": {"content": 42}}})),
        ),
        ("malformed", Script::Raw(json!({"tone": "no sections key"}))),
        ("error", Script::Error),
        (
            "oversize",
            Script::Raw(json!({"sections": {"tone": {"content": "x".repeat(300 * 1024)}}})),
        ),
    ];
    for (outcome, script) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (router, _log) = router(&dir, |_| {});
        let mut clients = ScriptedClients::default();
        clients.add("bad", &["tone"], script);
        let original = request(&["tone"]);

        let merged = router.route(&clients, "s", "rt", &original).await;

        assert_eq!(merged, original, "{outcome}: the original goes back");
        let recs = records(&dir);
        assert_eq!(decision(&recs[0], "tone"), (outcome.into(), json!("bad")));
        assert_eq!(recs[0]["owners"][0]["outcome"], outcome);
    }
}

#[tokio::test(start_paused = true)]
async fn too_many_sections_is_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (router, _log) = router(&dir, |c| c.policy.max_sections = 1);
    let mut clients = ScriptedClients::default();
    clients.add("ide", &["tone", "guidelines"], Script::Append(" +ide"));
    let original = request(&["tone", "guidelines"]);

    let merged = router.route(&clients, "s", "rt", &original).await;

    assert_eq!(merged, original);
    assert_eq!(records(&dir)[0]["owners"][0]["outcome"], "oversize");
}

#[tokio::test(start_paused = true)]
async fn an_extra_id_is_ignored_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let (router, _log) = router(&dir, |_| {});
    let mut clients = ScriptedClients::default();
    clients.add("ide", &["tone"], Script::AppendWithExtra(" +ide", "safety"));
    let original = request(&["tone", "safety"]);

    let merged = router.route(&clients, "s", "rt", &original).await;

    assert_eq!(merged["tone"], "original tone text +ide");
    assert_eq!(
        merged["safety"], original["safety"],
        "an answer for an id not asked changes nothing"
    );
    let recs = records(&dir);
    assert_eq!(recs[0]["owners"][0]["ignored"], json!(["safety"]));
    assert_eq!(
        decision(&recs[0], "safety"),
        ("passthrough:restricted".into(), Value::Null)
    );
}

#[tokio::test(start_paused = true)]
async fn two_owners_each_get_only_their_own_sections() {
    let dir = tempfile::tempdir().unwrap();
    let (router, _log) = router(&dir, |_| {});
    let mut clients = ScriptedClients::default();
    // `tone` is wanted by both: the first in active-client order owns it.
    clients.add("first", &["tone"], Script::Append(" +first"));
    clients.add(
        "second",
        &["tone", "guidelines"],
        Script::Append(" +second"),
    );
    let original = request(&["tone", "guidelines"]);

    let merged = router.route(&clients, "s", "rt", &original).await;

    let keys = |c: &str| -> Vec<String> {
        let asked = clients.asked(c);
        assert_eq!(asked.len(), 1, "{c} asked once");
        asked[0]["sections"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    assert_eq!(keys("first"), ["tone"]);
    assert_eq!(keys("second"), ["guidelines"]);
    assert_eq!(merged["tone"], "original tone text +first");
    assert_eq!(merged["guidelines"], "original guidelines text +second");
    let recs = records(&dir);
    assert_eq!(decision(&recs[0], "tone").1, json!("first"));
    assert_eq!(decision(&recs[0], "guidelines").1, json!("second"));
    assert_audited(&recs[0], &merged, &original);
}

#[tokio::test(start_paused = true)]
async fn an_unchanged_answer_is_recorded_as_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let (router, _log) = router(&dir, |_| {});
    let mut clients = ScriptedClients::default();
    clients.add("ide", &["tone"], Script::Append(""));
    let original = request(&["tone"]);

    let merged = router.route(&clients, "s", "rt", &original).await;

    assert_eq!(merged, original);
    assert_eq!(decision(&records(&dir)[0], "tone").0, "unchanged");
}

#[tokio::test(start_paused = true)]
async fn a_rewrite_that_cannot_be_audited_is_not_applied_with_keep_original() {
    for (mode, applied) in [
        (OnFailure::KeepOriginal, false),
        (OnFailure::Continue, true),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (router, log) = router(&dir, |c| c.audit.on_failure = mode);
        let mut clients = ScriptedClients::default();
        clients.add("ide", &["tone"], Script::Append(" +ide"));
        let original = request(&["tone"]);
        log.fail_writes_for_test(true);
        let merged = router
            .route(&clients, "ahp-session:/s1", "rt-1", &original)
            .await;
        assert_eq!(
            merged["tone"] != original["tone"],
            applied,
            "{mode:?}: {merged:?}"
        );
        assert!(records(&dir).is_empty());
        // Space returns: the next record is preceded by one that counts the gap.
        log.fail_writes_for_test(false);
        let merged = router
            .route(&clients, "ahp-session:/s1", "rt-1", &original)
            .await;
        assert_eq!(merged["tone"], "original tone text +ide");
        let recs = records(&dir);
        assert_eq!(recs.len(), 2, "{recs:?}");
        assert_eq!(
            (recs[0]["kind"].as_str(), recs[0]["lostRecords"].as_u64()),
            (Some("recovered"), Some(1))
        );
        assert_eq!(recs[1]["kind"], "transform");
        assert_audited(&recs[1], &merged, &original);
    }
}

#[path = "router_policy_tests.rs"]
mod policy_rules;
