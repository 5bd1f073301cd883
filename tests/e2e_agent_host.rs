//! The bridge in front of the real CLI 1.0.102 as an AHP host, offline: a
//! turn streams through it, a tool's permission is the bridge's policy's
//! and then its clients', and the host's GitHub identity is the bridge's.

use ahp_copilot_bridge::demo::reply::Reply;
use ahp_types::actions::StateAction;
use serde_json::json;

use crate::support::agent_host::{start_agent_host_stack, GITHUB_TOKEN};
use crate::support::e2e::{ready_session, run_turn, start_turn, wait_action, wait_turn_end};
use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_streams_through_the_bridge_to_the_agent_host() {
    let st = start_agent_host_stack(|_| {}).await;
    // The host checked the bridge's token with GitHub, and only that one.
    let seen = st.github.seen();
    assert!(
        !seen.is_empty() && seen.iter().all(|a| a.ends_with(GITHUB_TOKEN)),
        "{seen:?}"
    );
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/relay-1", None).await;
    st.model
        .push(Reply::Text("Hello through the relay.".into()));
    let end = run_turn(&c, "relay-1", "t-1", "Say hello").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    assert_eq!(end.text, "Hello through the relay.");
    // The model heard the client's words, through the host.
    let asked = st.model.requests();
    let last = asked.last().expect("the model was asked").to_string();
    assert!(last.contains("Say hello"), "{last}");
    // A second turn on the same session.
    st.model.push(Reply::Text("Again.".into()));
    let end = run_turn(&c, "relay-1", "t-2", "Once more").await;
    assert_eq!((end.kind, end.text.as_str()), ("complete", "Again."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_command_asks_the_client_and_runs_once_confirmed() {
    let st = start_agent_host_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/relay-2", None).await;
    let file = st.dir.path().join("made-by-the-tool.txt");
    st.model.push(Reply::ToolCall {
        name: "bash".into(),
        arguments: json!({"command": format!("echo relayed > {}", file.display()), "description": "write a file"}),
    });
    st.model.push(Reply::Text("Done.".into()));
    let mut sub = start_turn(&c, "relay-2", "t-1", "write the file").await;
    let call = wait_action(&mut sub, |a| match a {
        StateAction::ChatToolCallReady(r) if r.confirmed.is_none() => Some(r.tool_call_id.clone()),
        _ => None,
    })
    .await;
    let chat = chat_of("ahp-session:/relay-2");
    dispatch_raw(&c, &chat, 2, json!({"type": "chat/toolCallConfirmed", "turnId": "t-1", "toolCallId": call, "approved": true, "confirmed": "user-action"})).await;
    let end = wait_turn_end(&mut sub, "t-1").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), "relayed");
}
