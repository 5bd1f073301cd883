//! The web console's chat pane beyond one turn, in Chromium against the
//! real CLI and the scripted model: the agent's question answered in the
//! page, a queued message, a steering message, a cancelled turn, dispose;
//! switching sessions shows the opt-in each has.

use crate::support;

use std::time::Duration;

use ahp_bridge_join::Reply;
use serde_json::json;
use support::console::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_question_is_answered_in_the_page() {
    let st = stack().await;
    let b = open_console(&st).await;
    new_session(&b).await;
    b.fill("#prompt", "ask: Which colour? red, blue").await;
    b.click("#send").await;
    b.click(".question input[value=blue]").await;
    b.click(".question .answer-submit").await;
    b.wait(
        "the turn ends",
        "document.querySelector('.turn[data-end]') !== null",
    )
    .await;
    let answer = b
        .eval("[...document.querySelectorAll('.turn .answer')].map(a => a.textContent).join(' ')")
        .await;
    assert!(answer.as_str().unwrap().contains("blue"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_message_follows_and_a_turn_can_be_cancelled() {
    let st = stack().await;
    let b = open_console(&st).await;
    new_session(&b).await;
    let slowly = |text: &str| Reply::Slow {
        chunks: text.split(' ').map(|w| format!("{w} ")).collect(),
        delay: Duration::from_millis(200),
    };
    st.model.push(slowly("one two three four five"));
    st.model.push(Reply::Text("Second answer.".into()));
    b.fill("#prompt", "first").await;
    b.click("#send").await;
    b.wait(
        "the first answer streaming",
        "document.querySelector('.turn .answer')",
    )
    .await;
    b.eval("document.getElementById('send-as').value = 'queued'")
        .await;
    b.fill("#prompt", "second").await;
    b.click("#send").await;
    b.wait(
        "the queued turn answered",
        "[...document.querySelectorAll('.turn[data-end=turnComplete] .answer')].some(a => a.textContent === 'Second answer.')",
    )
    .await;
    let users = b
        .eval("[...document.querySelectorAll('.turn .user')].map(u => u.textContent)")
        .await;
    assert_eq!(users, json!(["first", "second"]));
    assert_eq!(
        b.eval("document.querySelectorAll('#pending li').length")
            .await,
        0
    );
    // A slow turn, cancelled from the page.
    st.model.push(slowly("a b c d e f g h i j k l m n o p"));
    b.eval("document.getElementById('send-as').value = 'turn'")
        .await;
    b.fill("#prompt", "third").await;
    b.click("#send").await;
    b.wait(
        "the third answer streaming",
        "document.querySelectorAll('.turn .answer').length === 3",
    )
    .await;
    b.click("#cancel").await;
    let end = b
        .wait(
            "the third turn's end",
            "(t => t[2] && t[2].dataset.end)(document.querySelectorAll('.turn'))",
        )
        .await;
    assert_eq!(end, "turnCancelled");
    b.click("#dispose").await;
    b.wait(
        "the session gone",
        "document.getElementById('session').options.length === 0 && document.getElementById('session-state').textContent === 'no session'",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steering_message_reaches_the_running_turn() {
    let st = stack().await;
    let b = open_console(&st).await;
    new_session(&b).await;
    st.model.push(Reply::Slow {
        chunks: vec!["busy ".into(); 20],
        delay: Duration::from_millis(50),
    });
    st.model.push(Reply::Text("Steered: yes.".into()));
    b.fill("#prompt", "work for a while").await;
    b.click("#send").await;
    b.wait(
        "the answer streaming",
        "document.querySelector('.turn .answer')",
    )
    .await;
    b.eval("document.getElementById('send-as').value = 'steering'")
        .await;
    b.fill("#prompt", "STEER-NOW: also say yes").await;
    b.click("#send").await;
    let text = b
        .wait(
            "the one turn's end, steered",
            "(t => t.length === 1 && t[0].dataset.end && t[0].textContent)(document.querySelectorAll('.turn'))",
        )
        .await;
    assert!(text.as_str().unwrap().contains("Steered: yes."), "{text}");
    let steered = st
        .model
        .requests()
        .iter()
        .any(|r| r["messages"].to_string().contains("STEER-NOW"));
    assert!(steered, "the model received the steering message");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_session_shows_the_opt_in_it_has() {
    let st = stack().await;
    let b = open_console(&st).await;
    new_session(&b).await;
    let first = b.eval("document.getElementById('session').value").await;
    b.click("#tab-sections").await;
    b.click("#section-tone").await;
    b.click("#opt-in").await;
    b.wait(
        "the opt-in taken",
        "document.getElementById('opt-in-state').textContent.endsWith('opted in to tone')",
    )
    .await;
    b.click("#tab-chat").await;
    new_session(&b).await;
    b.wait(
        "the new session's opt-in, none",
        "document.getElementById('opt-in-state').textContent.endsWith('opted in to nothing') && !document.getElementById('section-tone').checked",
    )
    .await;
    let back = format!(
        "(s => {{ s.value = {first}; s.dispatchEvent(new Event('change')); }})(document.getElementById('session'))"
    );
    b.eval(&back).await;
    b.wait(
        "the first session's opt-in, back",
        "document.getElementById('opt-in-state').textContent.endsWith('opted in to tone') && document.getElementById('section-tone').checked",
    )
    .await;
}
