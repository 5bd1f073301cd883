//! End to end: the official ahp client, the bridge, the REAL Copilot CLI and
//! the scripted model on loopback.

use crate::support;

use ahp_bridge_join::Reply;
use ahp_bridge_join::ScriptedModel;
use ahp_types::actions::StateAction;
use serde_json::json;
use support::e2e::*;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_turns_complete_and_the_second_sees_the_first() {
    let st = start_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/e1", None).await;
    fixtures::script(&st.model, "two-streamed-turns");
    let end = run_turn(&c, "e1", "t1", "What is the answer?").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    assert_eq!(end.text, "The answer is forty-two, streamed in chunks.");
    let end = run_turn(&c, "e1", "t2", "And again?").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    let reqs = st.model.requests();
    let last = reqs.last().unwrap();
    let all = last["messages"].to_string();
    assert!(all.contains("What is the answer?"), "history kept: {all}");
    assert!(all.contains("forty-two"), "history kept: {all}");
    assert!(ScriptedModel::system_prompt(last).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_500_is_a_chat_error_and_the_next_turn_works() {
    let st = start_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/e5", None).await;
    // The runtime retries a 5xx a few times (over ~15 s) before it gives up.
    fixtures::script(&st.model, "model-500");
    let end = run_turn(&c, "e5", "t1", "fail please").await;
    assert_eq!(end.kind, "error", "{end:?}");
    let left = st.model.clear_script();
    let asked = st.model.requests().len();
    eprintln!("the runtime asked the model {asked} times");
    // The pinned runtime (scripts/install-runtime.sh, 1.0.102) tries six
    // times: once and five retries, all for the one message. Fewer means the
    // bridge ended the turn before the runtime gave up (on a retry's notice,
    // say); more, that the message was sent again. Another runtime version
    // may retry otherwise: check this count when the pin moves.
    assert_eq!(asked, 6, "the runtime's six tries, then the chat error");
    assert_eq!(left, 20 - asked, "every request took one scripted reply");
    assert_next_turn_works(&st, &c, "e5", "t2", "again", "Recovered.").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_failure_is_a_chat_error_and_the_next_turn_works() {
    let st = start_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/e500", None).await;
    // 400 is not retried by the runtime (5xx is, for ~15 s).
    fixtures::script(&st.model, "model-400");
    let end = run_turn(&c, "e500", "t1", "fail please").await;
    assert_eq!(end.kind, "error", "{end:?}");
    assert!(end.error.is_some());
    assert_next_turn_works(&st, &c, "e500", "t2", "again", "Recovered.").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_tool_round_trip() {
    let st = start_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    let tool = json!({"name": "lookup_weather", "description": "Weather for a city", "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}});
    ready_session(
        &c,
        "ahp-session:/tool",
        Some(json!({"clientId": "ide", "tools": [tool]})),
    )
    .await;
    fixtures::script(&st.model, "client-tool-weather");
    let chat = &chat_of("ahp-session:/tool");
    let (_, mut session) = c.subscribe("ahp-session:/tool".into()).await.unwrap();
    let mut sub = start_turn(&c, "tool", "t1", "weather?").await;
    // The bridge starts a tool call owned by this client; the client completes it.
    let call_id = wait_action(&mut sub, |a| match a {
        StateAction::ChatToolCallStart(s) if s.tool_name == "lookup_weather" => {
            Some(s.tool_call_id.clone())
        }
        _ => None,
    })
    .await;
    // Clients watching only the session see what it waits on.
    let needed = wait_input_needed(&mut session).await;
    assert_eq!(needed["kind"], "toolClientExecution", "{needed}");
    assert_eq!(needed["clientId"], "ide", "{needed}");
    assert_eq!(
        needed["toolCall"]["toolCallId"],
        call_id.as_str(),
        "{needed}"
    );
    dispatch_raw(&c, chat, 2, json!({"type": "chat/toolCallComplete", "turnId": "t1", "toolCallId": call_id,
        "result": {"success": true, "pastTenseMessage": "Looked up", "content": [{"type": "text", "text": "SUNNY-21C"}]}})).await;
    let end = wait_turn_end(&mut sub, "t1").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    assert!(end.text.contains("sunny"), "{end:?}");
    assert_no_input_needed(&c, "ahp-session:/tool").await;
    let last = st.model.requests().last().unwrap().to_string();
    assert!(
        last.contains("SUNNY-21C"),
        "the model received the tool result"
    );
}

/// One turn whose shell call the client answered, and what is left to look at.
struct PermissionTurn {
    st: Stack,
    c: ahp::Client,
    end: TurnEnd,
    /// The shell call's id, as the runtime and the model name it.
    call_id: String,
    /// Whether the command ran.
    ran: bool,
}

/// Runs one turn whose shell call the client answers with `approved`.
async fn permission_turn(approved: bool) -> PermissionTurn {
    let st = start_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/perm", None).await;
    fixtures::script(&st.model, "shell-permission");
    let chat = &chat_of("ahp-session:/perm");
    let (_, mut session) = c.subscribe("ahp-session:/perm".into()).await.unwrap();
    let mut sub = start_turn(&c, "perm", "t1", "run it").await;
    // The runtime announces the call, then asks: the call awaits confirmation.
    let ready = wait_action(&mut sub, |a| match a {
        StateAction::ChatToolCallReady(r) if r.confirmed.is_none() => Some(r.clone()),
        _ => None,
    })
    .await;
    let snap = raw_subscribe(&c, chat).await;
    assert!(
        snap.to_string().contains("pending-confirmation"),
        "the chat state shows the pending call: {snap}"
    );
    assert!(
        !st.dir.path().join("ran.txt").exists(),
        "nothing runs before the answer"
    );
    // Clients watching only the session see what it waits on.
    let needed = wait_input_needed(&mut session).await;
    assert_eq!(needed["kind"], "toolConfirmation", "{needed}");
    assert_eq!(
        needed["toolCall"]["toolCallId"],
        ready.tool_call_id.as_str(),
        "{needed}"
    );
    dispatch_raw(&c, chat, 2, json!({"type": "chat/toolCallConfirmed", "turnId": "t1", "toolCallId": ready.tool_call_id, "approved": approved})).await;
    let end = wait_turn_end(&mut sub, "t1").await;
    assert_no_input_needed(&c, "ahp-session:/perm").await;
    let ran = std::fs::read_to_string(st.dir.path().join("ran.txt")).ok();
    if let Some(out) = &ran {
        assert_eq!(out.trim(), "42-ran");
    }
    PermissionTurn {
        st,
        c,
        end,
        call_id: ready.tool_call_id,
        ran: ran.is_some(),
    }
}

/// What the pinned runtime (1.0.102) tells the model about a call it was
/// answered `reject` for.
const REJECTED: &str = "The user rejected this tool call.";

/// The tool message a model request carries for the call `call_id`.
fn tool_result_for(request: &serde_json::Value, call_id: &str) -> Option<serde_json::Value> {
    request["messages"]
        .as_array()?
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_approved_runs_the_tool() {
    let p = permission_turn(true).await;
    assert_eq!(p.end.kind, "complete", "{:?}", p.end);
    assert!(p.ran, "the approved command ran");
    let reqs = p.st.model.requests();
    assert_eq!(reqs.len(), 2, "the model got the tool's result");
    let result = tool_result_for(&reqs[1], &p.call_id).expect("the tool's result");
    assert_ne!(result["content"], REJECTED, "{result}");
    assert_eq!(p.end.text, "Done.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_denied_does_not_run_the_tool() {
    let p = permission_turn(false).await;
    assert!(!p.ran, "the denied command did not run");
    assert_eq!(
        p.end.kind, "complete",
        "a denial is not a failure: {:?}",
        p.end
    );
    // The runtime got `reject`: it tells the model the user rejected the call.
    // It does not go back to the model in the denied turn; the rejection is
    // in the history the next request carries, whichever turn makes it. An
    // approval would carry the command's output instead, another answer
    // (a failure, a cancel) other text.
    let end = run_turn(&p.c, "perm", "t2", "and now?").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    let reqs = p.st.model.requests();
    let after = reqs.get(1).expect("a model request after the denial");
    let result = tool_result_for(after, &p.call_id)
        .unwrap_or_else(|| panic!("the model was told about the denied call: {after}"));
    assert_eq!(result["content"], REJECTED, "{result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_cancelled_mid_stream_stops_and_the_next_turn_works() {
    let st = start_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/cancel", None).await;
    // 30 s of streaming unless the runtime stops reading.
    fixtures::script(&st.model, "slow-stream");
    let chat = &chat_of("ahp-session:/cancel");
    let mut sub = start_turn(&c, "cancel", "t1", "count").await;
    wait_action(&mut sub, |a| {
        matches!(a, StateAction::ChatDelta(_)).then_some(())
    })
    .await;
    dispatch_raw(
        &c,
        chat,
        2,
        json!({"type": "chat/turnCancelled", "turnId": "t1", "duration": 10}),
    )
    .await;
    let end = wait_turn_end(&mut sub, "t1").await;
    assert_eq!(end.kind, "cancelled", "{end:?}");
    // The runtime really stopped: it hung up on the model's stream.
    eventually("the runtime abandons the model's stream", || {
        st.model.abandoned() >= 1
    })
    .await;
    assert_next_turn_works(&st, &c, "cancel", "t2", "again", "After cancel.").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_asks_the_user_and_gets_the_answer() {
    let st = start_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/ask", None).await;
    fixtures::script(&st.model, "ask-user-colour");
    let chat = &chat_of("ahp-session:/ask");
    let (_, mut session) = c.subscribe("ahp-session:/ask".into()).await.unwrap();
    let mut sub = start_turn(&c, "ask", "t1", "pick one").await;
    let request = wait_action(&mut sub, |a| match a {
        StateAction::ChatInputRequested(r) => Some(r.request.clone()),
        _ => None,
    })
    .await;
    assert_eq!(request.message.as_deref(), Some("Which colour?"));
    let needed = wait_input_needed(&mut session).await;
    assert_eq!(needed["kind"], "chatInput", "{needed}");
    assert_eq!(
        needed["id"], request.id,
        "the question is visible on the session: {needed}"
    );
    let question = serde_json::to_value(&request.questions.as_ref().unwrap()[0]).unwrap();
    assert_eq!(question["options"][1]["id"], "blue", "{question}");
    dispatch_raw(&c, chat, 2, json!({"type": "chat/inputCompleted", "requestId": request.id, "response": "accept",
        "answers": {question["id"].as_str().unwrap(): {"state": "submitted", "value": {"kind": "selected", "value": "blue"}}}})).await;
    let end = wait_turn_end(&mut sub, "t1").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    let reqs = st.model.requests();
    assert_eq!(reqs.len(), 2);
    let tool_result = reqs[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the model got the tool result")
        .to_string();
    assert!(tool_result.contains("blue"), "{tool_result}");
    assert_no_input_needed(&c, "ahp-session:/ask").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_killed_mid_turn_ends_it_with_an_error_and_the_next_turn_works() {
    let st = start_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/kill", None).await;
    st.model.push(Reply::Text("First.".into()));
    assert_eq!(run_turn(&c, "kill", "t0", "hello").await.kind, "complete");
    fixtures::script(&st.model, "slow-stream");
    let mut sub = start_turn(&c, "kill", "t1", "count").await;
    wait_action(&mut sub, |a| {
        matches!(a, StateAction::ChatDelta(_)).then_some(())
    })
    .await;
    let bridge = st.bridge.bridge.as_ref().unwrap();
    let pid = bridge.runtime_pid().await.expect("a spawned runtime");
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let end = wait_turn_end(&mut sub, "t1").await;
    assert_eq!(end.kind, "error", "{end:?}");
    assert!(end.error.unwrap().contains("runtime"));
    assert_next_turn_works(&st, &c, "kill", "t2", "still there?", "Back again.").await;
    let new_pid = bridge.runtime_pid().await.expect("a new runtime");
    assert_ne!(new_pid, pid, "a new runtime process");
    // The session was resumed, not recreated: the model still sees the first turn.
    let last = st.model.requests().last().unwrap()["messages"].to_string();
    assert!(last.contains("First."), "history kept: {last}");
}
