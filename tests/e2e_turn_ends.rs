//! End to end with the real Copilot CLI: the ways a turn can end that leave
//! something behind, and the turn after them.

use crate::support;

use ahp_bridge_join::Reply;
use ahp_types::actions::StateAction;
use serde_json::json;
use support::e2e::*;
use support::*;

/// The owner of a client tool stops watching its session while the runtime
/// waits on its tool call: the client is no longer active, so the call fails
/// on both sides, the model is told, and the turn ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_that_unsubscribes_mid_call_fails_its_tool_call_and_the_turn_ends() {
    let st = start_stack(|_| {}).await;
    let owner = initialized(&st.bridge, "owner").await;
    let watcher = initialized(&st.bridge, "watcher").await;
    let tool = json!({"name": "lookup_weather", "description": "Weather for a city",
        "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}});
    ready_session(
        &owner,
        "ahp-session:/gone",
        Some(json!({"clientId": "owner", "tools": [tool]})),
    )
    .await;
    fixtures::script(&st.model, "client-tool-owner-gone");
    // The watcher sees the turn; the owner starts it and then leaves.
    let (_, mut seen) = watcher
        .subscribe(chat_of("ahp-session:/gone"))
        .await
        .unwrap();
    let mut sub = start_turn(&owner, "gone", "t1", "weather?").await;
    let call_id = wait_action(&mut sub, |a| match a {
        StateAction::ChatToolCallStart(s) if s.tool_name == "lookup_weather" => {
            Some(s.tool_call_id.clone())
        }
        _ => None,
    })
    .await;
    owner
        .notify("unsubscribe", json!({"channel": "ahp-session:/gone"}))
        .await
        .unwrap();
    let result = wait_action(&mut seen, |a| match a {
        StateAction::ChatToolCallComplete(c) if c.tool_call_id == call_id => Some(c.result.clone()),
        _ => None,
    })
    .await;
    assert!(!result.success, "the call failed: {result:?}");
    let end = wait_turn_end(&mut seen, "t1").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    assert_eq!(end.text, "No weather today.");
    // The runtime got the failed result and handed it to the model.
    let last = st.model.requests().last().unwrap().to_string();
    assert!(
        last.contains("the client that provides this tool left"),
        "the model was told the tool failed: {last}"
    );
    assert_no_input_needed(&watcher, "ahp-session:/gone").await;
}

/// After `session.error` the session is idle at once; the runtime's own
/// `session.idle` for the failed message may still come, and must not end
/// the next turn, which here starts the moment the error arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_started_the_moment_an_error_arrives_runs_to_its_end() {
    let st = start_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/err", None).await;
    for round in 0..3 {
        // 400 is not retried by the runtime.
        fixtures::script(&st.model, "model-400");
        let failed = format!("f{round}");
        let end = run_turn(&c, "err", &failed, "fail please").await;
        assert_eq!(end.kind, "error", "{end:?}");
        let answer = format!("Whole answer number {round}.");
        st.model.push(Reply::Text(answer.clone()));
        let end = run_turn(&c, "err", &format!("ok{round}"), "again").await;
        assert_eq!(end.kind, "complete", "{end:?}");
        assert_eq!(end.text, answer, "the turn was not ended early");
    }
}
