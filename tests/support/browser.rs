//! A real headless Chromium (Debian's `chromium`), driven over the Chrome
//! DevTools Protocol on its own WebSocket: no driver process, no extra
//! crate. Waits are done in the page (a `MutationObserver` until a
//! condition holds, with a deadline), never by sleeping.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

type Waiting = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// The longest a condition in the page may take, a real-CLI turn included.
pub(crate) const PAGE_DEADLINE: Duration = Duration::from_secs(120);

pub(crate) struct Browser {
    child: Child,
    out: mpsc::UnboundedSender<String>,
    waiting: Waiting,
    next: AtomicU64,
    session: String,
    /// What the page printed or threw, for a failing test's message.
    pub console: Arc<Mutex<Vec<String>>>,
    /// Every URL the page asked for (requests and WebSockets), once
    /// [`Self::record_requests`] is on.
    pub requests: Arc<Mutex<Vec<String>>>,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The browser's binary: `$CHROMIUM`, else Debian's.
fn chromium() -> String {
    std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into())
}

impl Browser {
    /// Starts Chromium with a fresh profile and opens one blank page.
    pub(crate) async fn launch() -> Self {
        Self::launch_with(&[]).await
    }

    /// [`Self::launch`] with `extra` command-line switches (say, which
    /// test certificate to trust).
    pub(crate) async fn launch_with(extra: &[String]) -> Self {
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new(chromium())
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--window-size=1200,900",
                "--remote-debugging-port=0",
            ])
            .args(extra)
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            // Chromium puts its singleton socket in a folder of its own under
            // TMPDIR and, killed, never removes it: inside the profile it
            // goes with the profile.
            .env("TMPDIR", profile.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "{} does not start ({e}); apt-get install chromium",
                    chromium()
                )
            });
        let endpoint = devtools_endpoint(&mut child);
        let (ws, _) = tokio_tungstenite::connect_async(&endpoint).await.unwrap();
        let (mut sink, mut stream) = ws.split();
        let (out, mut rx) = mpsc::unbounded_channel::<String>();
        tokio::spawn(async move {
            while let Some(text) = rx.recv().await {
                if sink.send(Message::text(text)).await.is_err() {
                    return;
                }
            }
        });
        let waiting: Waiting = Arc::default();
        let console: Arc<Mutex<Vec<String>>> = Arc::default();
        let requests: Arc<Mutex<Vec<String>>> = Arc::default();
        let (w, c, r) = (waiting.clone(), console.clone(), requests.clone());
        tokio::spawn(async move {
            while let Some(Ok(Message::Text(t))) = stream.next().await {
                let v: Value = serde_json::from_str(&t).unwrap_or_default();
                route(v, &w, &c, &r);
            }
        });
        let mut b = Self {
            child,
            out,
            waiting,
            next: AtomicU64::new(1),
            session: String::new(),
            console,
            requests,
            _profile: profile,
        };
        b.attach().await;
        b
    }

    async fn attach(&mut self) {
        let targets = self.call("Target.getTargets", json!({})).await;
        let page = targets["targetInfos"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == "page")
            .expect("a page")["targetId"]
            .clone();
        let attached = self
            .call(
                "Target.attachToTarget",
                json!({"targetId": page, "flatten": true}),
            )
            .await;
        self.session = attached["sessionId"].as_str().unwrap().to_owned();
        self.send("Runtime.enable", json!({})).await;
        self.send("Page.enable", json!({})).await;
        // Every CSP violation in any page this browser opens, for a test to
        // assert there was none (the page's own code included).
        self.send(
            "Page.addScriptToEvaluateOnNewDocument",
            json!({"source": "window.__cspViolations = []; document.addEventListener('securitypolicyviolation', e => window.__cspViolations.push(e.violatedDirective + ' ' + e.blockedURI));"}),
        )
        .await;
    }

    /// A browser-level command.
    async fn call(&self, method: &str, params: Value) -> Value {
        self.command(method, params, None).await
    }

    /// A command to the page.
    pub(crate) async fn send(&self, method: &str, params: Value) -> Value {
        self.command(method, params, Some(self.session.clone()))
            .await
    }

    async fn command(&self, method: &str, params: Value, session: Option<String>) -> Value {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().unwrap().insert(id, tx);
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        self.out.send(msg.to_string()).unwrap();
        let answer = tokio::time::timeout(PAGE_DEADLINE + Duration::from_secs(10), rx)
            .await
            .unwrap_or_else(|_| panic!("{method}: no answer from the browser"))
            .unwrap();
        if let Some(e) = answer.get("error") {
            panic!("{method}: {e}");
        }
        answer["result"].clone()
    }

    /// Opens `url` and waits until its document has loaded.
    pub(crate) async fn goto(&self, url: &str) {
        self.send("Page.navigate", json!({"url": url})).await;
        self.wait(
            "the page loaded",
            "document.readyState === 'complete' && document.querySelector('script') !== null",
        )
        .await;
    }

    /// Evaluates `expr` in the page (awaiting a promise); its value as JSON.
    pub(crate) async fn eval(&self, expr: &str) -> Value {
        let r = self
            .send(
                "Runtime.evaluate",
                json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        if let Some(e) = r.get("exceptionDetails") {
            panic!(
                "{expr}\nthrew: {}\npage console: {:#?}",
                e["exception"]["description"]
                    .as_str()
                    .unwrap_or(&e.to_string()),
                self.console.lock().unwrap()
            );
        }
        r["result"]["value"].clone()
    }

    /// Waits in the page until `cond` (a JS expression) is truthy; its value.
    pub(crate) async fn wait(&self, what: &str, cond: &str) -> Value {
        let ms = PAGE_DEADLINE.as_millis();
        let script = format!(
            r#"new Promise((resolve, reject) => {{
  const check = () => {{ try {{ return ({cond}); }} catch (e) {{ return false; }} }};
  const first = check();
  if (first) {{ resolve(first); return; }}
  const obs = new MutationObserver(() => {{
    const v = check();
    if (v) {{ obs.disconnect(); clearTimeout(timer); resolve(v); }}
  }});
  const timer = setTimeout(() => {{ obs.disconnect(); reject(new Error("timed out waiting for: " + {what:?})); }}, {ms});
  obs.observe(document, {{subtree: true, childList: true, attributes: true, characterData: true}});
}})"#
        );
        self.eval(&script).await
    }

    /// Clicks the element `selector` names (it must exist and be enabled).
    pub(crate) async fn click(&self, selector: &str) {
        self.wait(
            &format!("{selector} enabled"),
            &format!("(e => e && !e.disabled)(document.querySelector({selector:?}))"),
        )
        .await;
        self.eval(&format!("document.querySelector({selector:?}).click()"))
            .await;
    }

    /// Types `text` into the field `selector` names, as keystrokes would.
    pub(crate) async fn fill(&self, selector: &str, text: &str) {
        self.eval(&format!(
            "(e => {{ e.focus(); e.value = {text:?}; e.dispatchEvent(new Event('input', {{bubbles: true}})); }})(document.querySelector({selector:?}))"
        ))
        .await;
    }

    /// Presses Enter on the focused element, as a keyboard would.
    pub(crate) async fn press_enter(&self) {
        self.press_enter_with(0).await;
    }

    /// Presses Shift+Enter on the focused element.
    pub(crate) async fn press_shift_enter(&self) {
        self.press_enter_with(8).await;
    }

    /// Enter with CDP's `modifiers` (Alt 1, Ctrl 2, Meta 4, Shift 8).
    async fn press_enter_with(&self, modifiers: u8) {
        for kind in ["keyDown", "keyUp"] {
            self.send(
                "Input.dispatchKeyEvent",
                json!({"type": kind, "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "text": "\r", "modifiers": modifiers}),
            )
            .await;
        }
    }

    /// Types `text` at the caret of the focused element, as an input
    /// method would (no key events).
    pub(crate) async fn type_text(&self, text: &str) {
        self.send("Input.insertText", json!({ "text": text })).await;
    }

    /// Records every URL the page asks for from now on, WebSockets
    /// included, into [`Self::requests`].
    pub(crate) async fn record_requests(&self) {
        self.send("Network.enable", json!({})).await;
    }

    /// Closes, from the page's side, every WebSocket the page holds open,
    /// as a lost connection would end them; returns how many. The page's
    /// code has no hook for this: the sockets are found on its heap by
    /// their prototype (`Runtime.queryObjects`). Needed because emulating
    /// offline (`set_offline`) stops new requests but leaves open sockets be.
    pub(crate) async fn close_websockets(&self) -> u64 {
        let proto = self
            .send(
                "Runtime.evaluate",
                json!({"expression": "WebSocket.prototype"}),
            )
            .await;
        let found = self
            .send(
                "Runtime.queryObjects",
                json!({"prototypeObjectId": proto["result"]["objectId"]}),
            )
            .await;
        let closed = self
            .send(
                "Runtime.callFunctionOn",
                json!({
                    "objectId": found["objects"]["objectId"],
                    "functionDeclaration": "function () { const open = this.filter(ws => ws.readyState === WebSocket.OPEN); open.forEach(ws => ws.close(4000, 'dropped by the test')); return open.length; }",
                    "returnByValue": true,
                }),
            )
            .await;
        closed["result"]["value"].as_u64().unwrap_or_default()
    }

    /// Cuts the page off the network, or lets it back (needs
    /// [`Self::record_requests`], which enables the Network domain).
    pub(crate) async fn set_offline(&self, offline: bool) {
        self.send(
            "Network.emulateNetworkConditions",
            json!({"offline": offline, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1}),
        )
        .await;
    }

    /// Runs axe-core (from `.console-tools/`, scripts/install-console-tools.sh)
    /// in the page; the serious and critical violations, one line each.
    pub(crate) async fn serious_a11y_violations(&self) -> Vec<String> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(".console-tools/node_modules/axe-core/axe.min.js");
        let axe = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; run scripts/install-console-tools.sh",
                path.display()
            )
        });
        self.eval(&format!("{axe};\ntrue")).await;
        let found = self
            .eval(
                "axe.run(document).then(r => r.violations\
                 .filter(v => v.impact === 'serious' || v.impact === 'critical')\
                 .map(v => `${v.id} (${v.impact}): ${v.nodes.map(n => n.target.join(' ')).join(', ')}`))",
            )
            .await;
        serde_json::from_value(found).unwrap()
    }

    /// The CSP violations the page has seen so far.
    pub(crate) async fn csp_violations(&self) -> Vec<String> {
        serde_json::from_value(self.eval("window.__cspViolations").await).unwrap_or_default()
    }

    /// A PNG of the page as it is now, written to `path`.
    pub(crate) async fn screenshot(&self, path: &Path) {
        let r = self
            .send(
                "Page.captureScreenshot",
                json!({"format": "png", "captureBeyondViewport": true}),
            )
            .await;
        let png = data_encoding::BASE64
            .decode(r["data"].as_str().unwrap().as_bytes())
            .unwrap();
        std::fs::write(path, png).unwrap();
    }
}

/// Reads `DevTools listening on ws://...` from the browser's stderr.
fn devtools_endpoint(child: &mut Child) -> String {
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("DevTools listening on ") {
                if !sent {
                    let _ = tx.send(url.trim().to_owned());
                    sent = true;
                }
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("chromium printed its DevTools endpoint")
}

/// An answer goes to its caller; console output, exceptions and the URLs
/// asked for are kept.
fn route(v: Value, waiting: &Waiting, console: &Mutex<Vec<String>>, requests: &Mutex<Vec<String>>) {
    if let Some(id) = v["id"].as_u64() {
        if let Some(tx) = waiting.lock().unwrap().remove(&id) {
            let _ = tx.send(v);
        }
        return;
    }
    match v["method"].as_str() {
        Some("Runtime.consoleAPICalled") => console
            .lock()
            .unwrap()
            .push(v["params"]["args"].to_string()),
        Some("Runtime.exceptionThrown") => console
            .lock()
            .unwrap()
            .push(format!("exception: {}", v["params"]["exceptionDetails"])),
        // The URL as sent: CDP keeps a fragment apart (`urlFragment`), as
        // no request carries one.
        Some("Network.requestWillBeSent") => requests.lock().unwrap().push(
            v["params"]["request"]["url"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        ),
        Some("Network.webSocketCreated") => requests
            .lock()
            .unwrap()
            .push(v["params"]["url"].as_str().unwrap_or_default().to_owned()),
        _ => {}
    }
}
