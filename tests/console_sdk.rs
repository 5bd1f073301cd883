//! The web console shows an SDK app's session, marked as one, and the app's
//! turn in it, in Chromium: the official Node SDK drives the session through
//! `[sdk] listen`, the real CLI runs it, the scripted model answers.

use crate::support;

use ahp_bridge_join::audit::sha256_hex;
use ahp_bridge_join::config::Config;
use ahp_bridge_join::Reply;
use serde_json::json;
use support::console::*;
use support::sdk::{event, node_app, scenario};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sdk_apps_session_is_marked_and_its_turn_shown() {
    let st = stack_tuned(|cfg| {
        let sdk = Config::parse(&format!(
            "[[principals]]\nname = \"sdk-apps\"\ntoken_sha256 = \"{}\"\nroles = [\"observe\", \"participate\", \"transform\"]\n\
             [sdk]\nlisten = \"127.0.0.1:0\"\nprincipal = \"sdk-apps\"\n",
            sha256_hex(b"unused")
        ))
        .unwrap();
        cfg.principals.extend(sdk.principals);
        cfg.sdk = sdk.sdk;
    })
    .await;
    st.model.push(Reply::Text("An SDK app's answer.".into()));
    let at = st.bridge.sdk.expect("[sdk] listens");
    let s = scenario(at, None, &st.model, json!({"prompt": "Hello from an app"}));
    let seen = tokio::task::spawn_blocking(move || node_app(&s))
        .await
        .unwrap();
    assert!(event(&seen, "reply").is_some(), "{seen:?}");

    let b = open_console(&st).await;
    let label = b
        .wait(
            "the SDK session listed",
            "[...document.querySelectorAll('#session option')].find(o => o.dataset.sdk === 'true')?.textContent",
        )
        .await;
    assert!(
        label
            .as_str()
            .unwrap()
            .starts_with("SDK app · SDK session "),
        "{label}"
    );
    b.eval("(() => { const s = document.getElementById('session'); s.value = [...s.options].find(o => o.dataset.sdk === 'true').value; s.dispatchEvent(new Event('change')); })()")
        .await;
    let answer = b
        .wait(
            "the app's turn shown",
            "[...document.querySelectorAll('.turn .answer')].map(a => a.textContent).join(' ').includes('An SDK app') && document.querySelector('.turn .user')?.textContent",
        )
        .await;
    assert_eq!(answer, json!("Hello from an app"));
    // Watched, not driven: the page offers no send into it.
    assert_eq!(
        b.eval("document.getElementById('send').disabled").await,
        json!(true)
    );
    b.screenshot(&shot(&st, "console-sdk.png")).await;
}
