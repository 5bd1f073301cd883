//! The prompt hook of the runtime's AHP host under the bridge's policy: a
//! client's `systemMessageSections` reach the model only as the section
//! rules and Rego let them, the operator's overrides reach every session,
//! and each section has a hashed audit record; a transform opt-in is told
//! where section text goes instead.

use ahp::Client;
use ahp_bridge_join::Reply;
use ahp_bridge_join::ScriptedModel;
use serde_json::{json, Value};

use crate::support::agent_host::start_agent_host_stack;
use crate::support::e2e::{creation_outcome, run_turn};
use crate::support::*;

/// Creates `uri` with `sections` as its `systemMessageSections` and waits
/// until it is ready.
async fn create_with_sections(c: &Client, uri: &str, sections: Value) {
    c.request::<_, Value>(
        "createSession",
        json!({"channel": uri, "provider": "copilot", "config": {"systemMessageSections": sections}}),
    )
    .await
    .expect("createSession");
    if let Some(e) = creation_outcome(c, uri).await {
        panic!("creation failed: {e}");
    }
}

fn records(dir: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    ahp_bridge_join::audit::verify_text(&text).expect("the audit chain holds");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn sha256(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_sections_reach_the_model_as_the_policy_lets_them() {
    let st = start_agent_host_stack(|c| {
        let policy = ahp_bridge_join::config::Config::parse(
            "[policy.sections.environment_context]\naccess = \"read-only\"\n\
             [policy.overrides.runtime_instructions]\naction = \"append\"\ncontent = \"OPERATOR-RULE-7\"\n",
        )
        .unwrap()
        .policy;
        c.policy.sections = policy.sections;
        c.policy.overrides = policy.overrides;
    })
    .await;
    let c = initialized(&st.bridge, "ide").await;
    let added = "Answer in French. CLIENT-MARK-1";
    create_with_sections(
        &c,
        "ahp-session:/sections-1",
        json!({
            "custom_instructions": {"content": added, "action": "append"},
            "environment_context": {"content": "READ-ONLY-MARK", "action": "prepend"},
            "runtime_instructions": {"content": "FIXED-MARK", "action": "prepend"}
        }),
    )
    .await;
    st.model.push(Reply::Text("Bonjour.".into()));
    let end = run_turn(&c, "sections-1", "t-1", "hello").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    let prompt = ScriptedModel::system_prompt(st.model.requests().last().unwrap()).unwrap();
    assert!(
        prompt.contains("CLIENT-MARK-1"),
        "the client's append reached the model"
    );
    assert!(
        prompt.contains("OPERATOR-RULE-7"),
        "the operator's override reached the model"
    );
    assert!(
        !prompt.contains("READ-ONLY-MARK"),
        "a read-only section took nothing"
    );
    assert!(
        !prompt.contains("FIXED-MARK"),
        "an operator's section is not the client's"
    );

    let all = records(st.dir.path());
    let rec = all
        .iter()
        .find(|r| r["kind"] == "session_sections")
        .expect("a session_sections record");
    assert_eq!(rec["session"], "ahp-session:/sections-1");
    assert!(rec["upstreamSession"]
        .as_str()
        .unwrap()
        .starts_with("copilot:/"));
    assert_eq!(rec["principal"], "local");
    let by_id = |id: &str, origin: &str| {
        rec["sections"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id && s["origin"] == origin)
            .cloned()
            .unwrap_or_else(|| panic!("no {origin} {id} in {rec}"))
    };
    let client = by_id("custom_instructions", "client");
    assert_eq!(client["decision"], "sent");
    assert_eq!(client["sha256"], sha256(added));
    assert_eq!(client["len"], added.len());
    assert!(
        client.get("content").is_none(),
        "no text without include_content"
    );
    assert_eq!(
        by_id("environment_context", "client")["decision"],
        "refused:read-only"
    );
    assert_eq!(
        by_id("runtime_instructions", "client")["decision"],
        "refused:fixed"
    );
    assert_eq!(
        by_id("runtime_instructions", "operator")["sha256"],
        sha256("OPERATOR-RULE-7")
    );

    // A reload of the policy changes the operator's sections for the
    // sessions created after it.
    let mut cfg = (*st.cfg).clone();
    cfg.policy.overrides = ahp_bridge_join::config::Config::parse(
        "[policy.overrides.runtime_instructions]\naction = \"append\"\ncontent = \"OPERATOR-RULE-8\"\n",
    )
    .unwrap()
    .policy
    .overrides;
    let reloaded = ahp_bridge_join::policy::Policy::from_config(&cfg).unwrap();
    assert!(st.bridge.policy.replace(reloaded), "the policy changed");
    create_with_sections(&c, "ahp-session:/sections-1b", json!({})).await;
    st.model.push(Reply::Text("Encore.".into()));
    let end = run_turn(&c, "sections-1b", "t-1", "hello again").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    let prompt = ScriptedModel::system_prompt(st.model.requests().last().unwrap()).unwrap();
    assert!(
        prompt.contains("OPERATOR-RULE-8") && !prompt.contains("OPERATOR-RULE-7"),
        "the reloaded override reached the model, the old one not"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_sections_and_transform_opt_ins_are_refused_in_words() {
    let st = start_agent_host_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    let e = c
        .request::<_, Value>(
            "createSession",
            json!({"channel": "ahp-session:/sections-2", "provider": "copilot",
                   "config": {"systemMessageSections": {"tone": {"content": "x", "action": "append"}}}}),
        )
        .await
        .unwrap_err();
    assert_eq!(rpc_code(&e), -32602);
    let said = e.to_string();
    assert!(
        said.contains("accepted: environment_context, custom_instructions, runtime_instructions"),
        "{said}"
    );
    let e = c
        .request::<_, Value>(
            "createSession",
            json!({"channel": "ahp-session:/sections-3", "provider": "copilot",
                   "activeClient": {"clientId": "ide", "tools": [],
                                    "systemMessageTransform": {"sections": ["tone"]}}}),
        )
        .await
        .unwrap_err();
    let said = e.to_string();
    assert!(
        said.contains("takes section text only at creation"),
        "{said}"
    );
    assert!(said.contains("systemMessageSections"), "{said}");
}

/// The host serves one GitHub user, the bridge's; sessions still belong to
/// the bridge's principals: one principal neither lists nor subscribes to
/// another's session, nor starts a turn on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_principals_see_only_their_own_sessions() {
    use ahp_bridge_join::config::Role;
    let roles = [Role::Observe, Role::Participate];
    let st = start_agent_host_stack(|c| {
        c.principals = vec![
            token_principal("alice", "token-of-alice-0001", &roles),
            token_principal("bob", "token-of-bob-00000001", &roles),
        ];
    })
    .await;
    let alice = initialized_with_token(st.bridge.addr, "token-of-alice-0001", "alice-ide").await;
    let bob = initialized_with_token(st.bridge.addr, "token-of-bob-00000001", "bob-ide").await;
    crate::support::e2e::ready_session(&alice, "ahp-session:/alices", None).await;
    st.model.push(Reply::Text("Hi Alice.".into()));
    let end = run_turn(&alice, "alices", "t-1", "hello").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    let listed: Value = bob.request("listSessions", json!({})).await.unwrap();
    assert!(
        !listed.to_string().contains("alices"),
        "bob does not list alice's session: {listed}"
    );
    let e = bob
        .request::<_, Value>("subscribe", json!({"channel": "ahp-session:/alices"}))
        .await
        .unwrap_err();
    assert!(rpc_code(&e) != 0, "bob may not subscribe: {e}");
    let e = bob
        .request::<_, Value>(
            "subscribe",
            json!({"channel": chat_of("ahp-session:/alices")}),
        )
        .await
        .unwrap_err();
    assert!(rpc_code(&e) != 0, "bob may not subscribe to the chat: {e}");
    let mine: Value = alice.request("listSessions", json!({})).await.unwrap();
    assert!(mine.to_string().contains("alices"), "{mine}");
}
