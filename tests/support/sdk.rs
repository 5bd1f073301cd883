//! The official Copilot SDKs as the tests drive them (installed by
//! scripts/install-sdks.sh into .sdk-tools/): an app's scenario in, what it
//! saw out (tests/sdk/node_app.mjs, tests/sdk/python_app.py).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;

use ahp_bridge_join::ScriptedModel;
use serde_json::{json, Value};

pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Node SDK's entry, as installed.
pub(crate) fn node_sdk() -> PathBuf {
    let sdk = root().join(".sdk-tools/node/node_modules/@github/copilot-sdk/dist/index.js");
    assert!(sdk.is_file(), "run scripts/install-sdks.sh");
    sdk
}

/// The scenario every app gets: where to connect (`token`, if any), the
/// scripted model as its provider, and `more`.
pub(crate) fn scenario(
    at: SocketAddr,
    token: Option<&str>,
    model: &ScriptedModel,
    more: Value,
) -> Value {
    let mut s = json!({
        "sdk": node_sdk().display().to_string(),
        "uri": at.to_string(),
        "model": "gpt-4.1",
        "provider": {"type": "openai", "baseUrl": model.base_url(), "apiKey": "sk-offline"},
    });
    if let Some(t) = token {
        s["token"] = json!(t);
    }
    for (k, v) in more.as_object().unwrap() {
        s[k] = v.clone();
    }
    s
}

/// The Node app on `scenario`, run to its end: what it printed.
pub(crate) fn node_app(scenario: &Value) -> Vec<Value> {
    run_app(&mut node_command(scenario))
}

/// `node tests/sdk/node_app.mjs SCENARIO`, not started.
fn node_command(scenario: &Value) -> Command {
    let mut cmd = Command::new("node");
    cmd.arg(root().join("tests/sdk/node_app.mjs"))
        .arg(scenario.to_string());
    cmd
}

/// The Python app on `scenario`, run to its end.
pub(crate) fn python_app(scenario: &Value) -> Vec<Value> {
    let python = root().join(".sdk-tools/venv/bin/python");
    assert!(python.is_file(), "run scripts/install-sdks.sh");
    run_app(
        Command::new(python)
            .arg(root().join("tests/sdk/python_app.py"))
            .arg(scenario.to_string()),
    )
}

fn run_app(cmd: &mut Command) -> Vec<Value> {
    let out = cmd.output().expect("the app runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the app failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The first event named `name` the app printed.
pub(crate) fn event<'a>(seen: &'a [Value], name: &str) -> Option<&'a Value> {
    seen.iter().find(|e| e["event"] == name)
}

/// How long an app may run on after the test read what it waited for.
pub(crate) const APP_LIMIT: std::time::Duration = std::time::Duration::from_secs(150);

/// The Node app running (with `waitForGo`), read event by event.
pub(crate) struct NodeApp {
    child: std::process::Child,
    lines: Option<std::io::Lines<std::io::BufReader<std::process::ChildStdout>>>,
}

impl NodeApp {
    pub(crate) fn spawn(scenario: &Value) -> Self {
        let mut child = node_command(scenario)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        Self {
            child,
            lines: Some(std::io::BufRead::lines(std::io::BufReader::new(out))),
        }
    }

    /// The next event named `name` (or an `error`), within the deadline.
    pub(crate) async fn until(&mut self, name: &str) -> Value {
        let mut lines = self.lines.take().unwrap();
        let name = name.to_owned();
        let found = tokio::task::spawn_blocking(move || {
            let found = lines
                .by_ref()
                .map_while(Result::ok)
                .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
                .find(|e| e["event"] == name.as_str() || e["event"] == "error");
            (found, lines)
        });
        let (found, lines) = tokio::time::timeout(super::DEADLINE, found)
            .await
            .expect("the app says it in time")
            .unwrap();
        self.lines = Some(lines);
        found.expect("the app said it")
    }

    /// Lets the app go on (`waitForGo`).
    pub(crate) fn go(&mut self) {
        use std::io::Write;
        writeln!(self.child.stdin.as_mut().unwrap(), "go").unwrap();
    }

    /// Everything else it prints, to its end; an app still running after
    /// [`APP_LIMIT`] (the SDK's own waits are 120 s) is killed, and what it
    /// printed by then is returned, for the caller's assertions to judge.
    pub(crate) async fn rest(mut self) -> Vec<Value> {
        let lines = self.lines.take().unwrap();
        let mut reading = tokio::task::spawn_blocking(move || {
            lines
                .map_while(Result::ok)
                .filter_map(|l| serde_json::from_str(&l).ok())
                .collect::<Vec<Value>>()
        });
        let rest = match tokio::time::timeout(APP_LIMIT, &mut reading).await {
            Ok(r) => r.unwrap(),
            Err(_) => {
                // Its output ends with it.
                let _ = self.child.kill();
                reading.await.unwrap()
            }
        };
        let _ = self.child.wait();
        rest
    }
}
