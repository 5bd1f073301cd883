//! The web console over TLS (`https://` and `wss://` on the one port), in a
//! real Chromium that trusts the test's server certificate alone, against
//! the real Copilot CLI and the scripted model: the login by ticket (no URL
//! the page asks for carries the token), Enter and Shift+Enter in the
//! composer, an observer told why it cannot send before it tries, and a
//! dropped connection that comes back (`reconnect`) with its transcript.

use crate::support;

use ahp_bridge_join::config::{Config, TlsConfig};
use ahp_bridge_join::Reply;
use ahp_bridge_join::DEFAULT_REPLY;
use serde_json::{json, Value};
use support::browser::Browser;
use support::console::*;
use support::e2e::*;
use support::tls::{wss_client, Pki};

/// The stack serving TLS with a certificate `pki` issued, tuned by `tune`;
/// and a Chromium trusting that certificate's key alone, recording every
/// URL its page asks for.
async fn tls_stack(pki: &Pki, tune: impl FnOnce(&mut Config)) -> (Stack, Browser) {
    let (cert, key, spki) = pki.server("console");
    let st = start_stack(|cfg| {
        cfg.server.tls = Some(TlsConfig {
            cert,
            key,
            client_ca: None,
            client_auth: Default::default(),
        });
        tune(cfg);
    })
    .await;
    assert!(st.bridge.ws_url().starts_with("wss://"));
    let b = Browser::launch_with(&[format!("--ignore-certificate-errors-spki-list={spki}")]).await;
    b.record_requests().await;
    (st, b)
}

/// The console's address: `https://` and the port of `wss://`.
fn https(st: &Stack) -> String {
    st.bridge.ws_url().replacen("wss://", "https://", 1)
}

/// An AHP client over `wss` with `token`, initialized as `id`.
async fn wss_ide(st: &Stack, pki: &Pki, token: &str, id: &str) -> ahp::Client {
    let url = format!("{}/?token={token}", st.bridge.ws_url());
    let c = wss_client(&url, pki.client_config(None)).await.unwrap();
    c.initialize(id.into(), vec!["1.0.0".into()], vec![])
        .await
        .unwrap();
    c
}

/// The page's WebSocket addresses so far.
fn sockets(b: &Browser) -> Vec<String> {
    b.requests
        .lock()
        .unwrap()
        .iter()
        .filter(|u| u.starts_with("wss://"))
        .cloned()
        .collect()
}

/// What `#prompt` holds.
async fn prompt(b: &Browser) -> Value {
    b.eval("document.getElementById('prompt').value").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_the_token_rides_in_no_url_and_enter_sends() {
    let pki = Pki::new();
    let (st, b) = tls_stack(&pki, |cfg| cfg.server.token = Some(TOKEN.into())).await;
    let base = https(&st);
    open_console_at(&b, &base, TOKEN).await;
    new_session(&b).await;
    // Enter sends the message.
    b.fill("#prompt", "hello").await;
    b.press_enter().await;
    let end = b
        .wait(
            "the turn sent by Enter ends",
            "(t => t.length === 1 && t[0].dataset.end)(document.querySelectorAll('.turn'))",
        )
        .await;
    assert_eq!(end, "turnComplete");
    assert_eq!(prompt(&b).await, "", "the message left the field");
    // Shift+Enter starts a new line and sends nothing; Enter then sends both lines.
    b.fill("#prompt", "line one").await;
    b.press_shift_enter().await;
    b.type_text("line two").await;
    assert_eq!(prompt(&b).await, "line one\nline two");
    assert_eq!(b.eval("document.querySelectorAll('.turn').length").await, 1);
    b.press_enter().await;
    let user = b
        .wait(
            "the two-line turn ends",
            "(t => t.length === 2 && t[1].dataset.end && t[1].querySelector('.user').textContent)(document.querySelectorAll('.turn'))",
        )
        .await;
    assert_eq!(user, "line one\nline two");
    // The token went in one request's header only: no URL carries it.
    let urls = b.requests.lock().unwrap().clone();
    assert!(
        urls.iter().any(|u| *u == format!("{base}/ticket")),
        "the page asked for a ticket: {urls:#?}"
    );
    assert!(urls.iter().all(|u| !u.contains(TOKEN)), "{urls:#?}");
    let seen = b
        .eval("performance.getEntriesByType('resource').map(e => e.name).concat([location.href])")
        .await;
    assert!(!seen.to_string().contains(TOKEN), "{seen}");
    let ws = sockets(&b);
    assert_eq!(ws.len(), 1, "{urls:#?}");
    assert!(
        ws[0].starts_with(&format!("{}/?ticket=", st.bridge.ws_url())) && !ws[0].contains("token="),
        "{}",
        ws[0]
    );
    assert_eq!(
        b.eval("sessionStorage.getItem('ahp-console-token')").await,
        TOKEN,
        "the token stays in the tab's session storage"
    );
    // A ticket is good once: the page's own URL, replayed, is refused.
    let again = wss_client(&ws[0], pki.client_config(None)).await;
    assert!(again.is_err(), "a used ticket opened a second socket");
    assert_eq!(b.csp_violations().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_an_observer_is_told_why_it_cannot_send_before_it_tries() {
    const IDE_TOKEN: &str = "ide-token-0123456789";
    let principals = [
        support::process::principal_toml("ide", IDE_TOKEN, &["observe", "participate"], ""),
        support::process::principal_toml(
            "dashboard",
            TOKEN,
            &["observe"],
            "session_visibility = \"all\"",
        ),
    ]
    .concat();
    let principals = Config::parse(&principals).unwrap().principals;
    let pki = Pki::new();
    let (st, b) = tls_stack(&pki, |cfg| cfg.principals = principals).await;
    let ide = wss_ide(&st, &pki, IDE_TOKEN, "ide").await;
    ready_session(&ide, "ahp-session:/watched", None).await;
    open_console_at(&b, &https(&st), TOKEN).await;
    let status = b
        .eval("document.getElementById('status').textContent")
        .await;
    assert!(
        status
            .as_str()
            .unwrap()
            .starts_with("connected as dashboard (observe)"),
        "{status}"
    );
    b.wait(
        "the ide's session open and ready",
        "document.getElementById('session-state').dataset.lifecycle === 'ready'",
    )
    .await;
    let note = b
        .wait(
            "the reason beside the composer",
            "(n => !n.hidden && n.textContent)(document.getElementById('composer-note'))",
        )
        .await;
    assert_eq!(
        note,
        "signed in as dashboard (observe): this principal may watch, not send (sending needs the participate role)"
    );
    assert_eq!(
        b.eval("document.getElementById('send').disabled").await,
        true,
        "Send is off before anything is tried"
    );
    // Enter does not send either: the message stays in the field.
    b.fill("#prompt", "may I?").await;
    b.press_enter().await;
    assert_eq!(prompt(&b).await, "may I?");
    assert_eq!(b.eval("document.querySelectorAll('.turn').length").await, 0);
    b.screenshot(&shot(&st, "console-observer.png")).await;
    // The prompt sections' opt-in says so too, and is off.
    b.click("#tab-sections").await;
    let said = b
        .wait(
            "the opt-in's reason",
            "(n => !n.hidden && n.textContent)(document.getElementById('opt-in-role'))",
        )
        .await;
    assert!(
        said.as_str().unwrap().contains("needs the transform role"),
        "{said}"
    );
    let off = b
        .eval("document.getElementById('opt-in').disabled && [...document.querySelectorAll('#catalogue input')].every(i => i.disabled)")
        .await;
    assert_eq!(off, true);
    assert!(st.model.requests().is_empty(), "nothing reached the model");
    assert!(sockets(&b).iter().all(|u| !u.contains(TOKEN)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_comes_back_with_what_it_missed_replayed() {
    // With the store, as an operator runs it: the actions kept before the
    // store was attached must not stop the replay.
    drop_and_come_back("replay", |_| {}).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_too_far_behind_comes_back_from_snapshots() {
    // One action kept: the turn held while away is more than that.
    drop_and_come_back("snapshot", |cfg| cfg.server.replay_buffer = 1).await;
}

/// The console holds a turn, loses its socket and the network, misses a
/// turn another client holds, and comes back as the same client by
/// `reconnect` (answered `how`): both turns shown, and the next one streams.
async fn drop_and_come_back(how: &str, tune: impl FnOnce(&mut Config)) {
    let pki = Pki::new();
    let (st, b) = tls_stack(&pki, |cfg| {
        cfg.server.token = Some(TOKEN.into());
        tune(cfg);
    })
    .await;
    let ide = wss_ide(&st, &pki, TOKEN, "ide").await;
    ready_session(&ide, "ahp-session:/shared", None).await;
    open_console_at(&b, &https(&st), TOKEN).await;
    b.wait(
        "the shared session open and ready",
        "document.getElementById('session-state').dataset.lifecycle === 'ready'",
    )
    .await;
    assert_eq!(send_and_wait(&b, "before the drop").await, "turnComplete");
    // Every status line from now on, to tell the tries apart afterwards.
    b.eval("(s => { window.__statuses = []; new MutationObserver(() => window.__statuses.push(s.textContent)).observe(s, {childList: true, characterData: true, subtree: true}); })(document.getElementById('status'))")
        .await;
    // The network goes, and the socket with it: the page says it is
    // reconnecting, and keeps trying (no ticket to be had while offline).
    b.set_offline(true).await;
    assert_eq!(b.close_websockets().await, 1);
    b.wait(
        "reconnecting",
        "document.getElementById('status').textContent.startsWith('reconnecting…')",
    )
    .await;
    assert_eq!(
        b.eval("document.getElementById('send').disabled").await,
        true
    );
    // Meanwhile another client holds a turn in the session.
    st.model
        .push(Reply::Text("Said while you were away.".into()));
    let away = run_turn(&ide, "shared", "t-away", "while the console was away").await;
    assert_eq!(away.kind, "complete", "{away:?}");
    b.set_offline(false).await;
    wait_connected(&b).await;
    let users = b
        .wait(
            "the turn held while away, shown",
            "(t => t.length === 2 && t[1].dataset.end && [...t].map(x => x.querySelector('.user').textContent))(document.querySelectorAll('.turn'))",
        )
        .await;
    assert_eq!(
        users,
        json!(["before the drop", "while the console was away"])
    );
    let answers = b
        .eval("[...document.querySelectorAll('.turn .answer')].map(a => a.textContent)")
        .await;
    assert_eq!(answers, json!([DEFAULT_REPLY, "Said while you were away."]));
    let status = b
        .eval("document.getElementById('status').textContent")
        .await;
    assert!(
        status
            .as_str()
            .unwrap()
            .ends_with(&format!("resumed by {how}")),
        "the same client came back by `reconnect`: {status}"
    );
    let statuses = b.eval("window.__statuses").await;
    let waited = statuses
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|s| s.starts_with("reconnecting…") && s.contains("next try in"))
        .count();
    assert!(
        waited >= 1,
        "a try failed offline and the next one waited: {statuses:#}"
    );
    // The subscriptions are back: a new turn streams into the page.
    assert_eq!(send_and_wait(&b, "after the drop").await, "turnComplete");
    let ws = sockets(&b);
    assert!(ws.len() >= 2, "{ws:#?}");
    assert!(
        ws.iter()
            .all(|u| u.contains("?ticket=") && !u.contains(TOKEN)),
        "{ws:#?}"
    );
    let tickets: std::collections::HashSet<_> = ws.iter().collect();
    assert_eq!(tickets.len(), ws.len(), "each try had a ticket of its own");
    assert_eq!(
        b.eval("document.getElementById('refusal-list').children.length")
            .await,
        0,
        "nothing was refused on the way"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_reconnect_starts_afresh_and_subscribes_again() {
    const OTHER: &str = "other-token-0123456789";
    let principals = [
        support::process::principal_toml(
            "ide",
            TOKEN,
            &["observe", "participate", "transform"],
            "",
        ),
        support::process::principal_toml(
            "other",
            OTHER,
            &["observe", "participate"],
            "session_visibility = \"all\"",
        ),
    ]
    .concat();
    let principals = Config::parse(&principals).unwrap().principals;
    let pki = Pki::new();
    let (st, b) = tls_stack(&pki, |cfg| cfg.principals = principals).await;
    open_console_at(&b, &https(&st), TOKEN).await;
    new_session(&b).await;
    assert_eq!(send_and_wait(&b, "before the drop").await, "turnComplete");
    let first = b
        .eval("document.getElementById('status').textContent")
        .await;
    // The connection drops, and the tab's token is now another principal's:
    // its client id belongs to the first, so `reconnect` is refused.
    b.set_offline(true).await;
    assert_eq!(b.close_websockets().await, 1);
    b.eval(&format!(
        "sessionStorage.setItem('ahp-console-token', {OTHER:?})"
    ))
    .await;
    b.set_offline(false).await;
    let status = b
        .wait(
            "connected again, as the other principal",
            "(s => s.startsWith('connected as other') && s)(document.getElementById('status').textContent)",
        )
        .await;
    assert!(
        status.as_str().unwrap().ends_with("protocol 1.0.0"),
        "{status} (before: {first})"
    );
    let listed = b
        .eval("document.getElementById('refusal-list').textContent")
        .await;
    assert!(listed.as_str().unwrap().contains("reconnect"), "{listed}");
    b.wait(
        "the transcript, from the snapshot",
        "(t => t.length === 1 && t[0].dataset.end === 'turnComplete' && t[0].querySelector('.user').textContent === 'before the drop')(document.querySelectorAll('.turn'))",
    )
    .await;
    // Subscribed again: the next turn streams into the page.
    assert_eq!(send_and_wait(&b, "after the drop").await, "turnComplete");
    let note = b
        .wait(
            "the opt-in's reason, for the new roles",
            "(n => !n.hidden && n.textContent)(document.getElementById('opt-in-role'))",
        )
        .await;
    assert!(
        note.as_str()
            .unwrap()
            .starts_with("signed in as other (observe, participate)"),
        "{note}"
    );
}
