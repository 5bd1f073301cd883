//! End to end: the official ahp client, the bridge, the REAL Copilot CLI and
//! the scripted model on loopback.

mod support;

use ahp_copilot_bridge::demo::model::{Reply, ScriptedModel};
use support::e2e::*;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_turns_complete_and_the_second_sees_the_first() {
    let st = start_stack(|_| {}).await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/e1", None).await;
    st.model.push(Reply::Text(
        "The answer is forty-two, streamed in chunks.".into(),
    ));
    let end = run_turn(&c, "e1", "t1", "What is the answer?").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    assert_eq!(end.text, "The answer is forty-two, streamed in chunks.");
    st.model.push(Reply::Text("Second.".into()));
    let end = run_turn(&c, "e1", "t2", "And again?").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    let reqs = st.model.requests();
    let last = reqs.last().unwrap();
    let all = last["messages"].to_string();
    assert!(all.contains("What is the answer?"), "history kept: {all}");
    assert!(all.contains("forty-two"), "history kept: {all}");
    assert!(ScriptedModel::system_prompt(last).is_some());
}
