//! The web console, served by the bridge on the AHP listener, in a real
//! headless Chromium over CDP, against the real Copilot CLI and the
//! scripted model. `CONSOLE_SCREENSHOTS=1` writes each pane's screenshot
//! into `docs/` (docs/console.md shows them).

use crate::support;

use std::time::Duration;

use serde_json::json;

use ahp_bridge_join::config::Config;
use ahp_bridge_join::Reply;
use ahp_bridge_join::DEFAULT_REPLY;
use support::browser::Browser;
use support::console::*;
use support::e2e::*;
use support::http::get;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_carry_strict_headers_and_upgrades_stay_ahp() {
    let st = stack().await;
    let addr = st.bridge.addr;
    let page = get(addr, "/", &[]).unwrap();
    assert_eq!(page.status, 200);
    assert!(page
        .body
        .contains("<script type=\"module\" src=\"/app.js\">"));
    for path in ["/", "/app.js", "/console.css", "/nope", "/index.html?x=1"] {
        let a = get(addr, path, &[]).unwrap();
        let csp = a.header("content-security-policy").unwrap_or_default();
        assert!(csp.contains("default-src 'self'"), "{path}: {a:?}");
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert!(!csp.contains("unsafe-inline"), "{path}: {csp}");
        assert_eq!(
            a.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
        assert_eq!(a.header("referrer-policy"), Some("no-referrer"), "{path}");
    }
    let js = get(addr, "/app.js", &[]).unwrap();
    assert!(js
        .header("content-type")
        .unwrap()
        .starts_with("text/javascript"));
    let tag = js.header("etag").expect("an ETag").to_owned();
    assert_eq!(
        get(addr, "/app.js", &[("If-None-Match", &tag)])
            .unwrap()
            .status,
        304
    );
    assert_eq!(get(addr, "/nope", &[]).unwrap().status, 404);
    // The console's own origin passes the Origin check unconfigured (so
    // the missing token is what is refused); a rebound name does not.
    let port = addr.port();
    for (origin, status) in [
        (format!("http://{addr}"), 401),
        (format!("http://localhost:{port}"), 401),
        (format!("http://rebound.example:{port}"), 403),
    ] {
        assert_eq!(
            support::raw::upgrade_status(addr, &origin).await,
            status,
            "{origin}"
        );
    }
    // The same listener still speaks AHP to a WebSocket client.
    let c = support::client_at_url(&format!("ws://{addr}/?token={TOKEN}")).await;
    c.initialize("after-pages".into(), vec!["1.0.0".into()], vec![])
        .await
        .expect("initialize over the same listener");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_shows_the_refusal_and_a_right_one_connects() {
    let st = stack().await;
    let b = Browser::launch().await;
    b.goto(&format!(
        "http://{}/#token=wrong-token-0123456789",
        st.bridge.addr
    ))
    .await;
    let said = b
        .wait(
            "the refusal",
            "(e => !e.closest('form').hidden && e.textContent)(document.getElementById('token-error'))",
        )
        .await;
    assert!(said.as_str().unwrap().contains("refused"), "{said}");
    assert_eq!(
        b.eval("location.hash").await,
        "",
        "the token leaves the address bar"
    );
    b.fill("#token-input", TOKEN).await;
    b.click("#token-form button").await;
    b.wait(
        "connected",
        "document.getElementById('status').textContent.startsWith('connected')",
    )
    .await;
    assert_eq!(
        b.eval("sessionStorage.getItem('ahp-console-token')").await,
        TOKEN
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_without_authentication_gives_the_page_a_ticket_all_the_same() {
    let st = start_stack(|_| {}).await;
    let b = Browser::launch().await;
    b.goto(&format!("http://{}/", st.bridge.addr)).await;
    wait_connected(&b).await;
    assert_eq!(
        b.eval("document.getElementById('token-form').hidden").await,
        true,
        "no token asked for"
    );
    let roles = b
        .eval("document.getElementById('composer-note').hidden")
        .await;
    assert_eq!(roles, true, "nothing said to be out of reach");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_greeting_streams_and_a_shell_call_waits_for_confirmation() {
    let st = stack().await;
    let b = open_console(&st).await;
    new_session(&b).await;
    assert_eq!(send_and_wait(&b, "hello").await, "turnComplete");
    let answer = b
        .eval("document.querySelector('.turn .answer').textContent")
        .await;
    assert_eq!(answer, DEFAULT_REPLY);
    b.fill("#prompt", "run: echo ok").await;
    b.click("#send").await;
    b.click(".tool .approve").await;
    b.wait(
        "the second turn ends",
        "document.querySelectorAll('.turn[data-end]').length === 2",
    )
    .await;
    let out = b
        .eval("document.querySelector('.tool .tool-output').textContent")
        .await;
    assert!(out.as_str().unwrap().contains("ok"), "{out}");
    let tool = b
        .eval("document.querySelector('.tool').dataset.success")
        .await;
    assert_eq!(tool, "true");
    b.click("#tab-host").await;
    b.wait(
        "the runtime up, the session counted",
        "(r => r && r.textContent === 'up')(document.querySelector('#host-runtimes tr[data-runtime=\"0\"] td')) && document.getElementById('host-sessions').textContent === '1'",
    )
    .await;
    b.screenshot(&shot(&st, "console-host.png")).await;
    b.click("#tab-chat").await;
    b.screenshot(&shot(&st, "console-chat.png")).await;
    assert_eq!(
        b.csp_violations().await,
        Vec::<String>::new(),
        "the console itself keeps to its CSP"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_markup_is_shown_as_text_and_never_runs() {
    let st = stack().await;
    let b = open_console(&st).await;
    new_session(&b).await;
    let markup = "<img src=x onerror=\"window.__xss=1\"><script>window.__xss=2</script>\
                  [click](javascript:window.__xss=3) <a href=\"javascript:window.__xss=4\">a</a>";
    let payload = format!("{markup}\n\n**bold** and [site](https://example.invalid/)");
    st.model.push(Reply::Text(payload));
    assert_eq!(send_and_wait(&b, "show me markup").await, "turnComplete");
    let shown = b
        .eval("document.querySelector('.turn .answer').textContent")
        .await;
    assert_eq!(
        shown,
        format!("{markup}bold and site"),
        "markup is shown as the text it is; markdown is rendered"
    );
    let elements = b
        .eval("document.querySelectorAll('#transcript img, #transcript script, #transcript a[href^=javascript]').length")
        .await;
    assert_eq!(elements, 0, "no element came from the model's markup");
    let safe = b
        .eval("[document.querySelector('.answer strong').textContent, document.querySelector('.answer a').getAttribute('href')]")
        .await;
    assert_eq!(
        safe,
        serde_json::json!(["bold", "https://example.invalid/"])
    );
    b.eval("document.querySelectorAll('#transcript *:not(a)').forEach(e => e.click && e.click())")
        .await;
    assert_eq!(b.eval("window.__xss === undefined").await, true);
    assert_eq!(b.csp_violations().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewrite_in_the_editor_reaches_the_model() {
    let st = stack().await;
    let b = open_console(&st).await;
    new_session(&b).await;
    transform_request(&b).await;
    b.fill(".request .append-line", "Answer in French.").await;
    b.click(".request .do-append").await;
    b.screenshot(&shot(&st, "console-transform.png")).await;
    b.click(".request .send-rewrite").await;
    wait_all_turns_ended(&b).await;
    let said = b
        .wait(
            "the outcome, from the audit record",
            "(o => o.dataset.outcome && o.textContent)(document.querySelector('.request .outcome'))",
        )
        .await;
    assert!(
        said.as_str()
            .unwrap()
            .starts_with("applied: tone: transformed (audit record #"),
        "{said}"
    );
    let prompt = last_system_json(&st);
    assert!(prompt.contains("Answer in French."), "{prompt}");
    // The audit pane got the record live, with its diff.
    b.click("#tab-audit").await;
    let added = b
        .eval("document.querySelector('.record[data-kind=transform] .audit-section[data-section=tone] .diff .added').textContent")
        .await;
    assert_eq!(added, "+ Answer in French.\n");
    let head = b
        .eval("document.getElementById('audit-head').textContent")
        .await;
    assert!(head.as_str().unwrap().contains(':'), "{head}");
    b.screenshot(&shot(&st, "console-audit.png")).await;
    // The filter narrows the list, by session or by client.
    let filtered = "(() => { const f = document.getElementById('audit-session'); f.value = 'no-such-session'; \
        f.dispatchEvent(new Event('input')); const n = document.querySelectorAll('.record').length; \
        f.value = ''; f.dispatchEvent(new Event('input')); return [n, document.querySelectorAll('.record').length]; })()";
    assert_eq!(b.eval(filtered).await, json!([0, 2]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_only_section_keeps_its_text_when_replaced() {
    let st = stack_with_policy("[policy.sections.tone]\nmode = \"append-only\"\n").await;
    let b = open_console(&st).await;
    new_session(&b).await;
    transform_request(&b).await;
    let original = b
        .eval("document.querySelector('.request .section-text').value")
        .await;
    let word = original
        .as_str()
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    b.fill(".request .replace-from", &word).await;
    b.fill(".request .replace-to", "REPLACED-BY-CONSOLE").await;
    b.click(".request .do-replace").await;
    let edited = b
        .eval("document.querySelector('.request .section-text').value")
        .await;
    assert!(edited.as_str().unwrap().contains("REPLACED-BY-CONSOLE"));
    b.click(".request .send-rewrite").await;
    wait_all_turns_ended(&b).await;
    let said = b
        .wait(
            "the refusal, from the audit record",
            "(o => o.dataset.outcome === 'refused' && o.textContent)(document.querySelector('.request .outcome'))",
        )
        .await;
    assert!(
        said.as_str().unwrap().contains("tone: refused:append-only"),
        "{said}"
    );
    let red = b
        .eval("document.querySelector('.audit-section[data-decision=\"refused:append-only\"] .refused') !== null")
        .await;
    assert_eq!(red, true, "the audit pane shows the refusal in red");
    b.click("#tab-policy").await;
    let mode = b
        .wait(
            "the policy table",
            "(r => r && r.children[2].textContent)(document.querySelector('#policy-sections tr[data-section=tone]'))",
        )
        .await;
    assert_eq!(mode, "append-only", "the policy pane shows the rule");
    let custom = b
        .wait(
            "the open session's customizations",
            "(c => c && c.textContent)(document.querySelector('#customizations'))",
        )
        .await;
    assert!(
        custom
            .as_str()
            .unwrap()
            .starts_with("Customizations of the open session"),
        "{custom}"
    );
    b.screenshot(&shot(&st, "console-policy.png")).await;
    let prompt = last_system_json(&st);
    assert!(!prompt.contains("REPLACED-BY-CONSOLE"), "{prompt}");
    let kept = serde_json::to_string(original.as_str().unwrap()).unwrap();
    assert!(
        prompt.contains(kept.trim_matches('"')),
        "the original text reached the model: {prompt}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pane_passes_axe_and_works_from_the_keyboard() {
    let st = stack().await;
    let b = open_console(&st).await;
    new_session(&b).await;
    assert_eq!(send_and_wait(&b, "hello").await, "turnComplete");
    let chat = b.serious_a11y_violations().await;
    assert!(chat.is_empty(), "chat pane: {chat:#?}");
    b.eval("document.getElementById('tab-sections').focus()")
        .await;
    b.press_enter().await;
    let shown = b.eval("!document.getElementById('pane-sections').hidden && document.getElementById('pane-chat').hidden").await;
    assert_eq!(shown, true, "Enter on the tab shows its pane");
    let sections = b.serious_a11y_violations().await;
    assert!(sections.is_empty(), "sections pane: {sections:#?}");
    b.click("#tab-audit").await;
    b.wait("the audit head", "document.getElementById('audit-head')")
        .await;
    let audit = b.serious_a11y_violations().await;
    assert!(audit.is_empty(), "audit pane: {audit:#?}");
    b.click("#tab-policy").await;
    b.wait(
        "the policy table",
        "document.getElementById('policy-sections')",
    )
    .await;
    let policy = b.serious_a11y_violations().await;
    assert!(policy.is_empty(), "policy pane: {policy:#?}");
    b.click("#tab-host").await;
    b.wait(
        "the host's runtimes",
        "document.getElementById('host-runtimes')",
    )
    .await;
    let host = b.serious_a11y_violations().await;
    assert!(host.is_empty(), "host pane: {host:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_sees_the_session_and_is_told_why_it_cannot_send() {
    let principals = [
        support::process::principal_toml(
            "ide",
            "ide-token-0123456789",
            &["observe", "participate"],
            "",
        ),
        support::process::principal_toml(
            "dashboard",
            TOKEN,
            &["observe"],
            "session_visibility = \"all\"",
        ),
    ]
    .concat();
    let principals = Config::parse(&principals).unwrap().principals;
    let st = start_stack(|cfg| cfg.principals = principals).await;
    let ide = support::client_at_url(&format!(
        "ws://{}/?token=ide-token-0123456789",
        st.bridge.addr
    ))
    .await;
    ide.initialize("ide".into(), vec!["1.0.0".into()], vec![])
        .await
        .unwrap();
    ready_session(&ide, "ahp-session:/watched", None).await;
    assert_eq!(
        run_turn(&ide, "watched", "t1", "hello from the ide")
            .await
            .kind,
        "complete"
    );
    let b = open_console(&st).await;
    b.wait(
        "the ide's turn",
        "[...document.querySelectorAll('.turn .user')].some(u => u.textContent === 'hello from the ide')",
    )
    .await;
    // A session the ide creates later is listed at once, and goes when disposed.
    let later = "ahp-session:/later";
    let listed =
        format!("[...document.getElementById('session').options].some(o => o.value === {later:?})");
    ready_session(&ide, later, None).await;
    b.wait("the new session listed", &listed).await;
    ide.request::<_, serde_json::Value>("disposeSession", json!({"channel": later}))
        .await
        .unwrap();
    b.wait("the disposed session gone", &format!("!({listed})"))
        .await;
    // The page knows its roles from the ticket: it says why before any try.
    let note = b
        .wait(
            "the reason beside the composer",
            "(n => !n.hidden && n.textContent)(document.getElementById('composer-note'))",
        )
        .await;
    let note = note.as_str().unwrap();
    assert!(
        note.starts_with("signed in as dashboard (observe)") && note.contains("participate"),
        "{note}"
    );
    assert_eq!(
        b.eval("document.getElementById('send').disabled").await,
        true
    );
    // Sent all the same (Send forced on), the host refuses, and the page shows it.
    b.fill("#prompt", "may I?").await;
    b.eval("(s => { s.disabled = false; s.click(); })(document.getElementById('send'))")
        .await;
    let refusal = b
        .wait(
            "the refusal in the turn",
            "(t => t && t.textContent)(document.querySelector('.turn[data-end=refused] .refused'))",
        )
        .await;
    assert!(
        refusal.as_str().unwrap().contains("participate"),
        "{refusal}"
    );
    let listed = b
        .eval("document.getElementById('refusal-list').textContent")
        .await;
    assert!(listed.as_str().unwrap().contains("participate"), "{listed}");
    assert_eq!(
        st.model.requests().len(),
        1,
        "the observer's turn never reached the model"
    );
    b.click("#tab-sections").await;
    let said = b
        .wait(
            "the opt-in's reason",
            "(n => !n.hidden && n.textContent)(document.getElementById('opt-in-role'))",
        )
        .await;
    assert!(said.as_str().unwrap().contains("transform"), "{said}");
    assert_eq!(
        b.eval("document.getElementById('opt-in').disabled").await,
        true
    );
    // Forced on, the opt-in is refused by the host, and the page says so.
    b.eval("['section-tone', 'opt-in'].forEach(id => { const e = document.getElementById(id); e.disabled = false; e.click(); })")
        .await;
    let opt_in = b
        .wait(
            "the opt-in's refusal",
            "(e => e.className === 'refused' && e.textContent)(document.getElementById('opt-in-state'))",
        )
        .await;
    assert!(opt_in.as_str().unwrap().contains("transform"), "{opt_in}");
    b.click("#tab-chat").await;
    b.screenshot(&shot(&st, "console-refused.png")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_left_unanswered_runs_out_and_the_original_is_kept() {
    let st = stack_tuned(|cfg| cfg.policy.transform_timeout = Duration::from_secs(2)).await;
    let b = open_console(&st).await;
    new_session(&b).await;
    transform_request(&b).await;
    let said = b
        .wait(
            "the countdown run out",
            "(c => c.dataset.answered === 'late' && c.querySelector('.outcome').textContent)(document.querySelector('.request'))",
        )
        .await;
    assert!(said.as_str().unwrap().starts_with("too late"), "{said}");
    let disabled = b
        .eval("document.querySelector('.request .send-rewrite').disabled")
        .await;
    assert_eq!(disabled, true, "a late answer cannot be sent");
    wait_all_turns_ended(&b).await;
    let kept = b
        .wait(
            "the audit record of the timeout",
            "(r => r && r.textContent)(document.querySelector('.record[data-kind=transform]'))",
        )
        .await;
    assert!(kept.as_str().unwrap().contains("timeout"), "{kept}");
}

/// The operator's Rego policy: nobody rewrites `tone`.
const TONE_IS_FIXED: &str = r#"package ahp.transform

deny contains msg if {
    input.section == "tone"
    msg := "tone is fixed by the governance team"
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rego_deny_shows_in_the_policy_pane_with_its_message() {
    let rules = tempfile::tempdir().unwrap();
    let st = stack_with_rego(rules.path(), TONE_IS_FIXED).await;
    let b = open_console(&st).await;
    new_session(&b).await;
    b.click("#tab-policy").await;
    let revision = b
        .wait(
            "the Rego revision",
            "(e => e && e.textContent)(document.getElementById('policy-rego-revision'))",
        )
        .await;
    let revision = revision.as_str().unwrap().to_owned();
    assert!(
        revision.len() >= 12 && revision.chars().take(12).all(|c| c.is_ascii_hexdigit()),
        "{revision}"
    );
    let facts = b
        .eval("[document.getElementById('policy-rego-enforcement').textContent, document.getElementById('policy-rego-points').textContent, document.getElementById('policy-rego-none') === null]")
        .await;
    assert_eq!(facts[0], "enforce", "{facts}");
    assert!(facts[1].as_str().unwrap().contains("transform"), "{facts}");
    assert_eq!(facts[2], true, "{facts}");
    // The console opts in to tone and rewrites it: Rego refuses the rewrite.
    transform_request(&b).await;
    b.fill(".request .append-line", "Answer like a pirate.")
        .await;
    b.click(".request .do-append").await;
    b.click(".request .send-rewrite").await;
    wait_all_turns_ended(&b).await;
    let said = b
        .wait(
            "the refusal, from the audit record",
            "(o => o.dataset.outcome === 'refused' && o.textContent)(document.querySelector('.request .outcome'))",
        )
        .await;
    assert!(
        said.as_str().unwrap().contains("tone: refused:rego"),
        "{said}"
    );
    let prompt = last_system_json(&st);
    assert!(!prompt.contains("Answer like a pirate."), "{prompt}");
    // The policy pane lists the decision live, with its message, in red.
    let denied = "[...document.querySelectorAll('#policy-decisions li[data-outcome=denied][data-point=transform]')]\
        .find(l => l.textContent.includes('tone is fixed by the governance team'))";
    b.click("#tab-policy").await;
    let item = b
        .wait(
            "the Rego deny in the policy pane",
            &format!("(l => l && l.textContent)({denied})"),
        )
        .await;
    let item = item.as_str().unwrap();
    assert!(item.contains("tone"), "{item}");
    assert!(item.contains(&revision[..12]), "{item}");
    assert_eq!(
        b.eval(&format!("{denied}.classList.contains('refused')"))
            .await,
        true,
        "a deny is shown in red"
    );
    b.screenshot(&shot(&st, "console-policy-rego.png")).await;
    assert_eq!(b.csp_violations().await, Vec::<String>::new());
    // A console opened later finds it in the audit log's tail.
    let later = open_console(&st).await;
    later
        .wait(
            "the Rego deny from the audit log's tail",
            &format!("(l => l && l.textContent)({denied})"),
        )
        .await;
}
