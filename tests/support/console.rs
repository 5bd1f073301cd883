//! The web console's tests' common steps: the stack with a token, the
//! console opened in Chromium, a session, a turn; where screenshots go.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ahp_bridge_join::config::Config;

use super::browser::Browser;
use super::e2e::*;

pub(crate) const TOKEN: &str = "console-token-0123456789";

pub(crate) async fn stack() -> Stack {
    stack_with_policy("").await
}

/// The stack with the token, a deadline a person can meet, and `rules`
/// (`[policy.sections.ID]` tables).
pub(crate) async fn stack_with_policy(rules: &str) -> Stack {
    let sections = Config::parse(rules).unwrap().policy.sections;
    stack_tuned(|cfg| cfg.policy.sections = sections).await
}

/// The stack with the token, a deadline a person can meet, and the
/// operator's Rego policy (`[policy.rego]`): `module`'s text, written to
/// `policy.rego` in `dir` (which outlives the stack), enforced, with a
/// deadline a loaded machine meets.
pub(crate) async fn stack_with_rego(dir: &Path, module: &str) -> Stack {
    let path = dir.join("policy.rego");
    std::fs::write(&path, module).unwrap();
    let table = format!(
        "[policy.rego]\nmodules = [{:?}]\nenforcement = \"enforce\"\ntimeout = \"5s\"\n",
        path.display().to_string()
    );
    let rego = Config::parse(&table).unwrap().policy.rego;
    assert!(rego.is_some(), "{table}");
    stack_tuned(|cfg| cfg.policy.rego = rego).await
}

/// The stack with the token, a deadline a person can meet, the audit
/// log's content, and then `tune`.
pub(crate) async fn stack_tuned(tune: impl FnOnce(&mut Config)) -> Stack {
    start_stack(|cfg| {
        cfg.server.token = Some(TOKEN.into());
        cfg.policy.transform_timeout = Duration::from_secs(60);
        cfg.audit.include_content = true;
        tune(cfg);
    })
    .await
}

/// Where a screenshot goes: `docs/` when asked for, else the test's directory.
pub(crate) fn shot(st: &Stack, name: &str) -> PathBuf {
    if std::env::var_os("CONSOLE_SCREENSHOTS").is_some() {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("docs")
            .join(name)
    } else {
        st.dir.path().join(name)
    }
}

/// The console opened with the token in the fragment, connected: the page
/// trades the token for a ticket (`POST /ticket`) and connects with it.
pub(crate) async fn open_console(st: &Stack) -> Browser {
    let b = Browser::launch().await;
    open_console_at(&b, &format!("http://{}", st.bridge.addr), TOKEN).await;
    b
}

/// Opens `base` (`http://` or `https://` and the address) in `b` with
/// `token` in the fragment, and waits until the page is connected.
pub(crate) async fn open_console_at(b: &Browser, base: &str, token: &str) {
    b.goto(&format!("{base}/#token={token}")).await;
    wait_connected(b).await;
}

/// Waits until the status line says the page is connected.
pub(crate) async fn wait_connected(b: &Browser) {
    b.wait(
        "connected",
        "document.getElementById('status').textContent.startsWith('connected')",
    )
    .await;
}

/// Creates a session with the first model and waits until it is ready.
pub(crate) async fn new_session(b: &Browser) {
    b.click("#create").await;
    b.wait(
        "the session is ready",
        "document.getElementById('session-state').dataset.lifecycle === 'ready'",
    )
    .await;
}

/// Sends `text` and waits for the turn's end; returns how it ended.
pub(crate) async fn send_and_wait(b: &Browser, text: &str) -> String {
    let before = b.eval("document.querySelectorAll('.turn').length").await;
    b.fill("#prompt", text).await;
    b.click("#send").await;
    let n = before.as_u64().unwrap() + 1;
    b.wait(
        "the turn ends",
        &format!(
            "(t => t.length >= {n} && t[{n} - 1].dataset.end)(document.querySelectorAll('.turn'))"
        ),
    )
    .await
    .as_str()
    .unwrap()
    .to_owned()
}

/// Opts the console in to `tone`, sends a turn, and waits for the request.
pub(crate) async fn transform_request(b: &Browser) {
    b.click("#tab-sections").await;
    b.click("#section-tone").await;
    b.click("#opt-in").await;
    b.wait(
        "the opt-in taken",
        "document.getElementById('opt-in-state').textContent.endsWith('opted in to tone')",
    )
    .await;
    b.fill("#prompt", "hello").await;
    b.click("#send").await;
    b.wait(
        "a transform request",
        "document.querySelector('.request .section-text[data-section=tone]')",
    )
    .await;
    let timer = b
        .eval("document.querySelector('.request .countdown').textContent")
        .await;
    assert!(timer.as_str().unwrap().ends_with(" s left"), "{timer}");
}

/// The system message of the model's last request as JSON text (quoted and
/// escaped), for a check that text did or did not reach the model at all.
pub(crate) fn last_system_json(st: &Stack) -> String {
    let reqs = st.model.requests();
    let last = reqs.last().expect("the model was asked");
    last["messages"][0]["content"].to_string()
}

/// Waits until every turn the chat shows has ended.
pub(crate) async fn wait_all_turns_ended(b: &Browser) {
    b.wait(
        "every turn ended",
        "[...document.querySelectorAll('.turn')].every(t => t.dataset.end)",
    )
    .await;
}
