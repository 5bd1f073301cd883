//! The host's own session settings through the bridge (the real CLI 1.0.102
//! as an AHP host, offline): `resolveSessionConfig` offers `mode` (without
//! `autopilot`, which would run tools past the policy) and the host's
//! question deadline, never its approvals; a value chosen at creation and
//! one changed later reach the host.

use ahp_bridge_join::Reply;
use ahp_bridge_join::ScriptedModel;
use serde_json::{json, Value};

use crate::support::agent_host::{start_agent_host_stack, AgentHostStack};
use crate::support::e2e::{creation_outcome, run_turn};
use crate::support::*;

/// In plan mode the host gives the model its `exit_plan_mode` tool.
const PLAN_MARK: &str = "exit_plan_mode";

/// The system prompt of a turn on `session` (its id after `ahp-session:/`).
async fn prompt_of_a_turn(
    st: &AgentHostStack,
    c: &ahp::Client,
    session: &str,
    turn: &str,
) -> String {
    st.model.push(Reply::Text("ok".into()));
    let end = run_turn(c, session, turn, "hello").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    ScriptedModel::system_prompt(st.model.requests().last().unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hosts_mode_is_offered_chosen_and_changed_through_the_bridge() {
    let st = start_agent_host_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    let r: Value = c
        .request(
            "resolveSessionConfig",
            json!({"channel": "ahp-root://", "provider": "copilot"}),
        )
        .await
        .unwrap();
    let props = &r["schema"]["properties"];
    assert_eq!(props["mode"]["enum"], json!(["interactive", "plan"]), "{r}");
    assert_eq!(props["mode"]["sessionMutable"], json!(true));
    assert!(props["inputRequestTimeout"].is_object(), "{r}");
    for kept in ["approvalMode", "remoteSession", "enableSessionStore"] {
        assert!(props.get(kept).is_none(), "{kept} is not offered: {r}");
    }
    assert_eq!(r["values"]["mode"], "interactive");

    let autopilot = c
        .request::<_, Value>(
            "createSession",
            json!({"channel": "ahp-session:/cfg-0", "provider": "copilot", "config": {"mode": "autopilot"}}),
        )
        .await
        .expect_err("autopilot is not offered");
    assert!(format!("{autopilot:?}").contains("one of"), "{autopilot:?}");

    c.request::<_, Value>(
        "createSession",
        json!({"channel": "ahp-session:/cfg-1", "provider": "copilot", "config": {"mode": "plan"}}),
    )
    .await
    .expect("createSession");
    assert_eq!(creation_outcome(&c, "ahp-session:/cfg-1").await, None);
    let prompt = prompt_of_a_turn(&st, &c, "cfg-1", "t-1").await;
    assert!(
        prompt.contains(PLAN_MARK),
        "the host runs the session in plan mode"
    );

    dispatch_raw(
        &c,
        "ahp-session:/cfg-1",
        2,
        json!({"type": "session/configChanged", "config": {"mode": "interactive"}}),
    )
    .await;
    prompt_of_a_turn(&st, &c, "cfg-1", "t-2").await;
    // The host tells the model in the turn's message (its tools stay).
    let asked = st.model.requests().last().unwrap().to_string();
    assert!(
        asked.contains("Plan mode is no longer active"),
        "the host was told plan mode is over"
    );
}
