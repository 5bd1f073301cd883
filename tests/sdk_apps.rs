//! SDK apps governed too: apps on the official Copilot SDKs, unmodified
//! (Node `@github/copilot-sdk` and Python `github-copilot-sdk`, installed by
//! scripts/install-sdks.sh), connect to the bridge's `[sdk] listen` as to a
//! CLI server; the REAL runtime renders and the scripted model receives.
//! Assertions are on what the app saw, what the model received and the
//! audit log.

use crate::support;

use ahp_bridge_join::Reply;
use ahp_bridge_join::ScriptedModel;
use serde_json::{json, Value};
use support::e2e::last_system_prompt;
use support::process::*;
use support::sdk::{event, node_app, python_app};
use support::sdk_stack::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_node_app_converses_and_its_callbacks_rewrite_is_policed_and_audited() {
    let (model, dir, b) = stack("", "").await;
    let seen = converse(
        node_app,
        &b,
        &model,
        "hello from the model",
        json!({
            "prompt": "hi",
            "systemMessage": {"mode": "customize", "sections": {}},
            "transforms": {"tone": "prefix:SDK-TONE-MARK "},
        }),
    );
    let session = event(&seen, "created").expect("created")["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        event(&seen, "transform").expect("the app's callback ran")["section"],
        "tone"
    );
    assert!(
        last_system_prompt(&model).contains("SDK-TONE-MARK "),
        "the rewrite reached the model"
    );
    let decided = records(dir.path(), "sdk_session");
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["decision"], "allowed");
    assert_eq!(decided[0]["session"], session);
    assert_eq!(decided[0]["principal"], "sdk-apps");
    assert_eq!(decided[0]["transformSections"], json!(["tone"]));
    let transforms = records(dir.path(), "transform");
    let owner = transforms
        .iter()
        .flat_map(|r| r["owners"].as_array().unwrap())
        .find(|o| o["principal"] == "sdk-apps")
        .expect("a transform record names the app's principal");
    assert!(
        owner["clientId"].as_str().unwrap().starts_with("sdk:"),
        "{owner}"
    );
    assert!(transforms.iter().any(|r| r["runtimeSession"] == session));
    let (ok, out) = run_bin([
        "audit",
        "verify",
        dir.path().join("audit.jsonl").to_str().unwrap(),
    ]);
    assert!(ok, "{out}");

    // A wrong token: refused as the runtime refuses it; nothing created.
    let mut wrong = scenario(&b, &model, json!({}));
    wrong["token"] = json!("not-the-token");
    let seen = node_app(&wrong);
    assert!(event(&seen, "created").is_none(), "{seen:?}");
    let e = event(&seen, "error").expect("refused");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("AUTHENTICATION_FAILED"),
        "{e}"
    );

    // A replacement of the restricted `safety`: refused, naming the rule.
    let seen = node_app(&scenario(
        &b,
        &model,
        json!({"systemMessage": {"mode": "customize", "sections": {"safety": {"action": "replace", "content": "no rules"}}}}),
    ));
    assert!(event(&seen, "created").is_none(), "{seen:?}");
    let e = event(&seen, "error").expect("refused");
    assert!(e["message"].as_str().unwrap().contains("restricted"), "{e}");

    // An MCP server outside the allow-list (the default: none): refused.
    let seen = node_app(&scenario(&b, &model, an_mcp_server()));
    assert!(event(&seen, "created").is_none(), "{seen:?}");
    failed_with(&seen, "client_mcp_servers");
    let refused: Vec<Value> = records(dir.path(), "sdk_session")
        .into_iter()
        .filter(|r| r["decision"] == "refused")
        .collect();
    let rules: Vec<&str> = refused
        .iter()
        .map(|r| r["findings"][0]["rule"].as_str().unwrap())
        .collect();
    assert_eq!(rules, ["restricted", "client_mcp_servers"]);
}

/// An app's session that brings a local MCP server, `/bin/false`.
fn an_mcp_server() -> Value {
    json!({"mcpServers": {"tools": {"type": "local", "command": "/bin/false", "args": [], "tools": ["*"]}}})
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reload_changes_which_mcp_servers_an_app_may_start() {
    let (model, dir, b) = stack("", "").await;
    let seen = node_app(&scenario(&b, &model, an_mcp_server()));
    failed_with(&seen, "client_mcp_servers");
    // `[policy.customizations]` is reloadable, for SDK apps as for AHP
    // clients: the gate reads it at each session, not once at start.
    b.append_config("[policy.customizations]\nclient_mcp_servers = [\"/bin/false\"]\n");
    b.hangup("policy reloaded").await;
    let seen = node_app(&scenario(&b, &model, an_mcp_server()));
    assert!(event(&seen, "error").is_none(), "{seen:?}");
    assert!(event(&seen, "created").is_some(), "{seen:?}");
    let decisions: Vec<Value> = records(dir.path(), "sdk_session")
        .into_iter()
        .map(|r| r["decision"].clone())
        .collect();
    assert_eq!(decisions, [json!("refused"), json!("allowed")]);
}

#[tokio::test(flavor = "multi_thread")]
async fn strip_keeps_the_original_and_append_only_and_the_deadline_hold_against_an_app() {
    let policy =
        "[policy]\ntransform_timeout = \"2s\"\n[policy.sections.tone]\nmode = \"append-only\"\n\
         [policy.overrides.guidelines]\naction = \"append\"\ncontent = \"OPERATOR-MARK\"\n";
    let (model, dir, b) = stack("on_violation = \"strip\"", policy).await;
    converse(
        node_app,
        &b,
        &model,
        "stripped and policed",
        json!({
            "prompt": "hi",
            "systemMessage": {"mode": "customize", "sections": {
                "safety": {"action": "replace", "content": "NO-SAFETY-MARK"},
            }},
            "transforms": {"tone": "replace:REPLACED-TONE-MARK"},
        }),
    );
    let prompt = last_system_prompt(&model);
    assert!(
        !prompt.contains("NO-SAFETY-MARK"),
        "the replacement was stripped"
    );
    assert!(
        !prompt.contains("REPLACED-TONE-MARK"),
        "append-only kept the original"
    );
    assert!(
        prompt.contains("OPERATOR-MARK"),
        "the operator's override is in the app's system prompt"
    );
    let decided = records(dir.path(), "sdk_session");
    assert_eq!(decided[0]["decision"], "stripped");
    assert_eq!(
        decided[0]["findings"],
        json!([{"what": "section safety", "rule": "restricted", "action": "strip"}])
    );
    let sections: Vec<Value> = records(dir.path(), "transform")
        .iter()
        .flat_map(|r| r["sections"].as_array().unwrap().clone())
        .collect();
    let tone = sections.iter().find(|s| s["id"] == "tone").unwrap();
    assert_eq!(tone["decision"], "refused:append-only", "{tone}");

    // A callback that never answers: the runtime is answered at the
    // deadline with the original, and the turn goes on.
    model.push(Reply::Text("answered anyway".into()));
    let seen = node_app(&scenario(
        &b,
        &model,
        json!({"prompt": "hi", "transforms": {"last_instructions": "hang"}}),
    ));
    assert!(event(&seen, "transform").is_some(), "{seen:?}");
    assert_eq!(event(&seen, "reply").unwrap()["content"], "answered anyway");
    let last = records(dir.path(), "transform").pop().unwrap();
    assert_eq!(last["owners"][0]["outcome"], "timeout", "{last}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_python_app_converses_and_its_callback_is_routed() {
    let (model, dir, b) = stack("", "").await;
    converse(
        python_app,
        &b,
        &model,
        "hello, python",
        json!({"prompt": "hi", "transforms": {"tone": "prefix:PY-TONE-MARK "}}),
    );
    assert!(last_system_prompt(&model).contains("PY-TONE-MARK "));
    assert_eq!(records(dir.path(), "sdk_session")[0]["decision"], "allowed");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ahp_observer_lists_and_watches_an_sdk_apps_session() {
    use ahp_types::actions::StateAction;
    use support::e2e::{wait_action, wait_turn_end};

    /// The rejection echoed to this client's refused action.
    async fn wait_action_env(sub: &mut ahp::SessionSubscription) -> String {
        tokio::time::timeout(support::DEADLINE, async {
            loop {
                if let Some(ahp::SubscriptionEvent::Action(env)) = sub.recv().await {
                    if let Some(r) = env.rejection_reason.clone() {
                        return r;
                    }
                }
            }
        })
        .await
        .expect("a rejection echo")
    }

    let (model, _dir, b) = stack("", "").await;
    model.push(Reply::Text("streamed to the observer".into()));
    let s = scenario(&b, &model, json!({"prompt": "watch me", "waitForGo": true}));
    let mut app = support::sdk::NodeApp::spawn(&s);
    let created = app.until("created").await;
    assert_eq!(created["event"], "created", "{created}");
    let uri = format!(
        "ahp-session:/sdk-{}",
        created["sessionId"].as_str().unwrap()
    );

    // An observer of any session (visibility "all") lists it, then watches its chat.
    let observer = connect_as(b.addr, "observer-token", "observer").await;
    let listed: Value = observer
        .request("listSessions", json!({"channel": "ahp-root://"}))
        .await
        .unwrap();
    let item = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["resource"] == uri.as_str())
        .unwrap_or_else(|| panic!("{uri} is listed: {listed}"));
    assert!(
        item["title"].as_str().unwrap().starts_with("SDK session"),
        "{item}"
    );
    let chat = ahp_bridge_join::ahp::uri::chat_uri_of(&uri);
    let (_, mut sub) = observer.subscribe(chat.clone()).await.unwrap();
    // The app drives it: a client that may participate still only watches.
    let turn = json!({"type": "chat/turnStarted", "turnId": "not-mine",
        "startedAt": "2026-11-26T00:00:00Z", "message": {"text": "me too", "origin": {"kind": "user"}}});
    support::dispatch_raw(&observer, &chat, 1, turn).await;
    let refused = wait_action_env(&mut sub).await;
    assert!(refused.contains("SDK app"), "{refused}");
    app.go();
    let (turn_id, text) = wait_action(&mut sub, |a| match a {
        StateAction::ChatTurnStarted(t) => Some((t.turn_id.clone(), t.message.text.clone())),
        _ => None,
    })
    .await;
    assert_eq!(text, "watch me");
    let end = wait_turn_end(&mut sub, &turn_id).await;
    assert_eq!(
        (end.kind, end.text.as_str()),
        ("complete", "streamed to the observer")
    );
    let rest = app.rest().await;
    assert_eq!(
        event(&rest, "reply").unwrap()["content"],
        "streamed to the observer"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sdk_tls_serves_the_runtimes_json_rpc_inside_tls_only() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let pki = support::tls::Pki::new();
    let (cert, key, _) = pki.server("sdk");
    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tls = format!("[sdk.tls]\ncert = {cert:?}\nkey = {key:?}\n");
    // `[sdk.tls]` must follow `[sdk]`'s own keys: it goes in as the last of them.
    let b = bridge(&model, dir.path(), &tls, "");
    let addr = b.sdk.unwrap();
    let hello =
        json!({"jsonrpc": "2.0", "id": 1, "method": "connect", "params": {"token": SDK_TOKEN}})
            .to_string();
    let frame = format!("Content-Length: {}\r\n\r\n{hello}", hello.len());

    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut s = tokio_rustls::TlsConnector::from(pki.client_config(None))
        .connect(name, tcp)
        .await
        .expect("a TLS handshake");
    s.write_all(frame.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let answer = tokio::time::timeout(support::DEADLINE, async {
        let mut buf = [0u8; 4096];
        loop {
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed before an answer");
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got);
            if let Some((_, body)) = text.split_once("\r\n\r\n") {
                if let Ok(v) = serde_json::from_str::<Value>(body) {
                    return v;
                }
            }
        }
    })
    .await
    .expect("an answer to connect");
    assert_eq!(answer["result"]["ok"], true, "{answer}");
    assert_eq!(answer["result"]["protocolVersion"], 3, "{answer}");

    // The same bytes in clear get no answer: the connection ends.
    let mut plain = tokio::net::TcpStream::connect(addr).await.unwrap();
    plain.write_all(frame.as_bytes()).await.unwrap();
    let mut buf = [0u8; 4096];
    let read = tokio::time::timeout(support::DEADLINE, plain.read(&mut buf))
        .await
        .expect("the bridge ends a connection that does not speak TLS");
    let n = read.unwrap_or(0);
    assert!(
        !String::from_utf8_lossy(&buf[..n]).contains("\"result\""),
        "no JSON-RPC answer in clear"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_app_gone_mid_turn_ends_its_turn_and_resumes_its_session_later() {
    use ahp_types::actions::StateAction;
    use support::e2e::wait_action;
    use support::sdk::NodeApp;

    let (model, _dir, b) = stack("", "").await;
    model.push(slow_reply(20, "part"));
    let mut app = NodeApp::spawn(&scenario(
        &b,
        &model,
        json!({"abandon": "take your time", "waitForGo": true}),
    ));
    let created = app.until("created").await;
    let session = created["sessionId"].as_str().expect("created").to_owned();
    let observer = connect_as(b.addr, "observer-token", "observer").await;
    let chat = ahp_bridge_join::ahp::uri::chat_uri_of(&format!("ahp-session:/sdk-{session}"));
    let (_, mut sub) = observer.subscribe(chat).await.unwrap();
    app.go();
    // Gone mid-turn: on the AHP side its turn does not hang, it ends cancelled.
    wait_action(&mut sub, |a| {
        matches!(a, StateAction::ChatTurnStarted(_)).then_some(())
    })
    .await;
    assert!(event(&app.rest().await, "abandoned").is_some());
    wait_action(&mut sub, |a| {
        matches!(a, StateAction::ChatTurnCancelled(_)).then_some(())
    })
    .await;
    // The app comes back: its session resumes, and a turn completes.
    resumes_later(&b, &model, &session);
}

/// SIGTERM's drain: an app connecting meanwhile is closed at once (so it,
/// or a load balancer in front, goes to another bridge) and counted as
/// refused "draining"; the app's SDK reports the failure.
#[tokio::test(flavor = "multi_thread")]
async fn an_app_connecting_while_the_bridge_drains_is_refused() {
    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let b = bridge_draining(&model, dir.path(), "", "", "30s");
    converse(
        node_app,
        &b,
        &model,
        "before the drain",
        json!({"prompt": "hi"}),
    );
    b.signal("TERM");
    support::http::readyz_until(b.admin, support::DEADLINE, "said 503", |s, _| s == 503).await;
    let seen = node_app(&scenario(&b, &model, json!({"prompt": "hi"})));
    assert!(event(&seen, "error").is_some(), "{seen:?}");
    assert!(event(&seen, "reply").is_none(), "{seen:?}");
    let metrics = support::http::get(b.admin, "/metrics", &[]).unwrap().body;
    assert!(
        metrics.contains("ahp_bridge_connections_refused_total{reason=\"draining\"} 1"),
        "{metrics}"
    );
}

/// SIGTERM with a drain: open SDK apps go on through it (a turn that fits
/// completes whole); at the stop that follows, a turn still running ends
/// "shutting down" for its app (its waiting send fails with that) and for
/// AHP observers, as a bridged session's does, and the bridge exits whole,
/// not cut off at its shutdown limit.
#[tokio::test(flavor = "multi_thread")]
async fn open_sdk_apps_drain_with_the_rest_and_hear_of_the_stop() {
    use ahp_bridge_join::ahp::uri::chat_uri_of;
    use ahp_types::actions::StateAction;
    use support::e2e::{wait_action, wait_turn_end};
    use support::sdk::NodeApp;

    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut b = bridge_draining(&model, dir.path(), "", "", "4s");
    // A's answer takes 1 s, within the drain; B's 30 s, past it.
    model.push(slow_reply(5, "short"));
    model.push(slow_reply(150, "long"));
    let observer = connect_as(b.addr, "observer-token", "observer").await;
    let mut apps = Vec::new();
    for prompt in ["short one", "long one"] {
        let mut app = NodeApp::spawn(&scenario(
            &b,
            &model,
            json!({"prompt": prompt, "waitForGo": true}),
        ));
        let created = app.until("created").await;
        let uri = format!(
            "ahp-session:/sdk-{}",
            created["sessionId"].as_str().unwrap()
        );
        let (_, mut sub) = observer.subscribe(chat_uri_of(&uri)).await.unwrap();
        app.go();
        // Its first words streamed: it took its answer (A the short one).
        let turn = wait_action(&mut sub, |a| match a {
            StateAction::ChatDelta(d) => Some(d.turn_id.clone()),
            _ => None,
        })
        .await;
        apps.push((app, sub, turn));
    }
    b.signal("TERM");
    let (b_app, mut b_sub, b_turn) = apps.pop().unwrap();
    let (a_app, _, _) = apps.pop().unwrap();
    let a_seen = a_app.rest().await;
    let a_reply = event(&a_seen, "reply").unwrap_or_else(|| panic!("{a_seen:?}"));
    assert_eq!(a_reply["content"], "short0 short1 short2 short3 short4 ");
    let end = wait_turn_end(&mut b_sub, &b_turn).await;
    assert_eq!(end.kind, "error", "the observer sees the long turn end");
    assert_eq!(end.error.as_deref(), Some("the host is shutting down"));
    // The app's waiting send ends with the stop.
    failed_with(&b_app.rest().await, "shutting down");
    let status = b.wait_exit("TERM", support::DEADLINE);
    assert!(status.success(), "{status:?}");
    assert!(
        b.log_lines("did not finish within").is_empty(),
        "the stop finished whole"
    );
    assert_eq!(b.log_lines("SDK app disconnected").len(), 2);
}

/// An admin disposes an SDK app's session mid-turn: the app hears of it
/// (its waiting send ends with the error, and `session.deleted`, as the
/// runtime tells of a delete), the session leaves the list, and its files
/// stay: the app resumes it later.
#[tokio::test(flavor = "multi_thread")]
async fn an_admin_disposing_an_sdk_session_tells_its_app() {
    use ahp_bridge_join::ahp::uri::chat_uri_of;
    use ahp_types::actions::StateAction;
    use support::e2e::wait_action;
    use support::sdk::NodeApp;

    let admin = principal_toml(
        "admin",
        "admin-token",
        &["observe", "participate", "admin"],
        "session_visibility = \"all\"",
    );
    let (model, _dir, b) = stack("", &admin).await;
    model.push(slow_reply(150, "part"));
    let mut app = NodeApp::spawn(&scenario(
        &b,
        &model,
        json!({"prompt": "a long one", "waitForGo": true, "lifecycle": true}),
    ));
    let created = app.until("created").await;
    let session = created["sessionId"].as_str().unwrap().to_owned();
    let uri = format!("ahp-session:/sdk-{session}");
    let admin = connect_as(b.addr, "admin-token", "admin").await;
    let (_, mut sub) = admin.subscribe(chat_uri_of(&uri)).await.unwrap();
    app.go();
    wait_action(&mut sub, |a| {
        matches!(a, StateAction::ChatDelta(_)).then_some(())
    })
    .await;
    admin
        .request::<_, Value>("disposeSession", json!({"channel": uri}))
        .await
        .unwrap();
    let seen = app.rest().await;
    failed_with(&seen, "disposed");
    let deleted = seen
        .iter()
        .find(|e| e["event"] == "lifecycle" && e["type"] == "session.deleted")
        .unwrap_or_else(|| panic!("the app is told of the delete: {seen:?}"));
    assert_eq!(deleted["sessionId"], session.as_str());
    let listed: Value = admin
        .request("listSessions", json!({"channel": "ahp-root://"}))
        .await
        .unwrap();
    assert!(!listed.to_string().contains(&uri), "{listed}");
    // Its files stay: the app resumes it, and a turn completes.
    resumes_later(&b, &model, &session);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rego_deny_refuses_an_apps_session_whatever_on_violation_says() {
    let modules = tempfile::tempdir().unwrap();
    let module = modules.path().join("session.rego");
    std::fs::write(
        &module,
        "package ahp.session\n\n\
         deny contains sprintf(\"%s is not for SDK apps\", [input.config.model]) if {\n\
         \tinput.client.kind == \"sdk\"\n\tinput.config.model == \"gpt-4.1\"\n}\n",
    )
    .unwrap();
    let rego = format!(
        "[policy.rego]\nmodules = [{:?}]\n",
        module.display().to_string()
    );
    let (model, dir, b) = stack("on_violation = \"strip\"", &rego).await;
    let seen = node_app(&scenario(&b, &model, json!({"prompt": "hi"})));
    let error = event(&seen, "error").unwrap_or_else(|| panic!("refused: {seen:?}"));
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("gpt-4.1 is not for SDK apps"),
        "{error}"
    );
    assert!(model.requests().is_empty(), "nothing reached the model");
    let refused = records(dir.path(), "sdk_session");
    assert_eq!(refused[0]["decision"], "refused");
    assert_eq!(
        refused[0]["findings"],
        json!([{"what": "session", "rule": "rego", "action": "refuse"}])
    );
    let decision = records(dir.path(), "decision");
    assert_eq!(decision.len(), 1, "{decision:?}");
    assert_eq!(decision[0]["point"], "session");
    assert_eq!(decision[0]["outcome"], "denied");
    assert_eq!(decision[0]["principal"], "sdk-apps");
    assert!(decision[0]["client"].as_str().unwrap().starts_with("sdk:"));
}
