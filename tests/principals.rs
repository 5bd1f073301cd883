//! Who may do what, tried as an attacker holding a token of their own: two
//! principals over real sockets, the official client, and the real CLI
//! where a transform or a turn is involved.

use crate::support;

use std::sync::{Arc, Mutex};

use ahp::{Client, ClientError};
use ahp_bridge_join::config::{Config, PrincipalConfig, Role, Visibility};
use ahp_bridge_join::Reply;
use ahp_bridge_join::ScriptedModel;
use ahp_bridge_join::{Agent, Running};
use serde_json::{json, Value};
use support::e2e::*;
use support::*;

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789ab";
const POLICY: &str = "policy-token-0123456789";
const DASH: &str = "dash-token-0123456789ab";

/// Alice and Bob each take part in their own sessions; a policy service may
/// transform `tone` only, in every session; a dashboard only watches.
fn team(cfg: &mut Config) {
    cfg.server.session_visibility = Visibility::Owner;
    cfg.principals = vec![
        token_principal(
            "alice",
            ALICE,
            &[Role::Observe, Role::Participate, Role::Transform],
        ),
        token_principal(
            "bob",
            BOB,
            &[Role::Observe, Role::Participate, Role::Transform],
        ),
        PrincipalConfig {
            sections: Some(vec!["tone".into()]),
            session_visibility: Some(Visibility::All),
            ..token_principal("policy", POLICY, &[Role::Observe, Role::Transform])
        },
        PrincipalConfig {
            session_visibility: Some(Visibility::All),
            ..token_principal("dash", DASH, &[Role::Observe])
        },
    ];
}

fn code(e: ClientError) -> i64 {
    match e {
        ClientError::Rpc(e) => e.code as i64,
        other => panic!("not an RPC error: {other}"),
    }
}

type Seen = Arc<Mutex<Vec<Value>>>;

/// Answers every transform request by appending a marker, and records it.
fn rewrite_transforms(c: &Client, marker: &'static str) -> Seen {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    c.set_server_request_handler(move |_, p: Value| {
        s.lock().unwrap().push(p.clone());
        async move { Ok(append_to_each(&p, |id| format!("{marker}-{id}"))) }
    });
    seen
}

async fn host_only(tune: impl FnOnce(&mut Config)) -> Running {
    let mut cfg = test_config();
    tune(&mut cfg);
    ahp_bridge_join::start(Arc::new(cfg), Agent::None)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_principal_cannot_take_a_client_id_connected_or_in_its_grace() {
    let st = start_stack(team).await;
    let addr = st.bridge.addr;
    let alice = initialized_with_token(addr, ALICE, "alice-ide").await;
    rewrite_transforms(&alice, "ALICE");
    let entry = json!({"clientId": "alice-ide", "tools": [], "systemMessageTransform": {"sections": ["tone"]}});
    ready_session(&alice, "ahp-session:/a1", Some(entry)).await;
    // While Alice is connected.
    let bob = client_with_token(addr, BOB).await;
    let bob_seen = rewrite_transforms(&bob, "BOB");
    let e = bob
        .initialize("alice-ide".into(), vec!["1.0.0".into()], vec![])
        .await
        .unwrap_err();
    assert_eq!(code(e), -32011, "conflict: the id is Alice's");
    let e = bob
        .reconnect("alice-ide".into(), 0, vec!["ahp-session:/a1".into()])
        .await
        .unwrap_err();
    assert_eq!(code(e), -32011);
    // While Alice is inside her grace period.
    alice.shutdown().await;
    drop(alice);
    let bob2 = client_with_token(addr, BOB).await;
    let bob2_seen = rewrite_transforms(&bob2, "BOB");
    for attempt in 0..2 {
        let e = if attempt == 0 {
            bob2.initialize("alice-ide".into(), vec!["1.0.0".into()], vec![])
                .await
                .unwrap_err()
        } else {
            bob2.reconnect("alice-ide".into(), 0, vec!["ahp-session:/a1".into()])
                .await
                .unwrap_err()
        };
        assert_eq!(code(e), -32011, "refused in the grace period too");
    }
    // Alice comes back and keeps her place and her transform requests.
    let alice = client_with_token(addr, ALICE).await;
    let alice_seen = rewrite_transforms(&alice, "ALICE");
    alice
        .reconnect("alice-ide".into(), 0, vec!["ahp-session:/a1".into()])
        .await
        .expect("the same principal reconnects within the grace");
    let snap = raw_subscribe(&alice, "ahp-session:/a1").await;
    assert_eq!(
        snap["snapshot"]["state"]["activeClients"][0]["clientId"], "alice-ide",
        "still the active client: {snap}"
    );
    st.model.push(Reply::Text("ok".into()));
    let end = run_turn(&alice, "a1", "t1", "hi").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    assert_eq!(alice_seen.lock().unwrap().len(), 1, "Alice was asked");
    assert!(bob_seen.lock().unwrap().is_empty() && bob2_seen.lock().unwrap().is_empty());
    let prompt = ScriptedModel::system_prompt(st.model.requests().last().unwrap()).unwrap();
    assert!(prompt.contains("ALICE-tone") && !prompt.contains("BOB-"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_session_is_invisible_to_another_principal() {
    let r = host_only(team).await;
    let alice = initialized_with_token(r.addr, ALICE, "alice-ide").await;
    create_session(&alice, "ahp-session:/private", None).await;
    let bob = initialized_with_token(r.addr, BOB, "bob-ide").await;
    let list: Value = bob.request("listSessions", json!({})).await.unwrap();
    assert_eq!(list["items"], json!([]), "Bob lists nothing of Alice's");
    let mine: Value = alice.request("listSessions", json!({})).await.unwrap();
    assert_eq!(mine["items"].as_array().unwrap().len(), 1);
    for uri in [
        "ahp-session:/private".to_string(),
        chat_of("ahp-session:/private"),
    ] {
        let e = bob
            .request::<_, Value>("subscribe", json!({"channel": uri}))
            .await
            .unwrap_err();
        assert_eq!(code(e), -32001, "{uri} does not exist for Bob");
    }
    let e = bob
        .request::<_, Value>("disposeSession", json!({"channel": "ahp-session:/private"}))
        .await
        .unwrap_err();
    assert_eq!(code(e), -32001);
    // Bob cannot become its active client either: refused, with a reason.
    let mut events = bob.events();
    dispatch_raw(&bob, "ahp-session:/private", 1,
        json!({"type": "session/activeClientSet", "activeClient": {"clientId": "bob-ide", "tools": []}})).await;
    let reason = rejection(&mut events).await;
    assert!(reason.contains("no such channel"), "{reason}");
    let snap = raw_subscribe(&alice, "ahp-session:/private").await;
    assert_eq!(snap["snapshot"]["state"]["activeClients"], json!([]));
    // A failed initialize binds nothing: the id stays free for anyone.
    let c = client_with_token(r.addr, BOB).await;
    let e = c
        .initialize(
            "bob-2".into(),
            vec!["1.0.0".into()],
            vec!["ahp-session:/private".into()],
        )
        .await
        .unwrap_err();
    assert_eq!(
        code(e),
        -32001,
        "Alice's session is not Bob's to subscribe to"
    );
    let c2 = client_with_token(r.addr, ALICE).await;
    c2.initialize("bob-2".into(), vec!["1.0.0".into()], vec![])
        .await
        .expect("the failed initialize left the clientId unbound");
    // The dashboard sees everything and may change nothing.
    let dash = initialized_with_token(r.addr, DASH, "dash").await;
    let list: Value = dash.request("listSessions", json!({})).await.unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    raw_subscribe(&dash, &chat_of("ahp-session:/private")).await;
    let mut events = dash.events();
    dispatch_raw(
        &dash,
        &chat_of("ahp-session:/private"),
        1,
        json!({"type": "chat/turnStarted", "turnId": "t",
        "startedAt": "2026-01-01T00:00:00Z", "message": {"text": "x", "origin": {"kind": "user"}}}),
    )
    .await;
    let reason = rejection(&mut events).await;
    assert!(reason.contains("lacks the `participate` role"), "{reason}");
    let e = dash
        .request::<_, Value>("createSession", json!({"channel": "ahp-session:/d"}))
        .await
        .unwrap_err();
    assert_eq!(code(e), -32009, "permission denied");
}

/// The `rejectionReason` of the next refused action the client sees.
async fn rejection(events: &mut ahp::ClientEventStream) -> String {
    wait_event(events, |e| match e {
        ahp::SubscriptionEvent::Action(env) => env.rejection_reason.clone(),
        _ => None,
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_service_limited_to_tone_is_asked_for_tone_only() {
    let st = start_stack(team).await;
    let addr = st.bridge.addr;
    let alice = initialized_with_token(addr, ALICE, "alice-ide").await;
    ready_session(&alice, "ahp-session:/p1", None).await;
    let policy = initialized_with_token(addr, POLICY, "policy-svc").await;
    let seen = rewrite_transforms(&policy, "POLICY");
    let mut sub = policy
        .subscribe("ahp-session:/p1".into())
        .await
        .expect("a policy service sees every session")
        .1;
    dispatch_raw(&policy, "ahp-session:/p1", 1, json!({"type": "session/activeClientSet",
        "activeClient": {"clientId": "policy-svc", "tools": [], "systemMessageTransform": {"sections": ["tone", "guidelines"]}}})).await;
    wait_action(&mut sub, |a| match a {
        ahp_types::actions::StateAction::SessionActiveClientSet(_) => Some(()),
        _ => None,
    })
    .await;
    st.model.push(Reply::Text("ok".into()));
    let end = run_turn(&alice, "p1", "t1", "hi").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    let asked: Vec<String> = seen
        .lock()
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
        .collect();
    assert_eq!(
        asked,
        vec!["tone".to_string()],
        "guidelines is not Policy's to change"
    );
    let prompt = ScriptedModel::system_prompt(st.model.requests().last().unwrap()).unwrap();
    assert!(prompt.contains("POLICY-tone"));
    assert!(
        !prompt.contains("POLICY-guidelines"),
        "the model got the original guidelines"
    );
}
