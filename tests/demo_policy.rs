//! `demo --policy DIR [--report]`: an example policy of examples/policy/
//! in force in the offline demo, with the real CLI behind it. Its opt-in
//! rule (only copilot-writers may opt in to `tone`) is the cheapest
//! decision to see from outside: the demo's client has no groups.

use crate::support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;

use serde_json::{json, Value};

const EXAMPLE: &str = "examples/policy/group-gated-rewrites";
const REFUSED: &str = "opt-in to tone refused: local is not in the IdP group copilot-writers";

/// The demo with `args`, killed on drop; its stderr lines, as they come.
struct Demo {
    child: Child,
    lines: Receiver<String>,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let state =
            std::env::temp_dir().join(format!("ahp-copilot-bridge-demo-{}", self.child.id()));
        let _ = std::fs::remove_dir_all(state);
    }
}

impl Demo {
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ahp-copilot-bridge"))
            .args(["demo", "--listen", "127.0.0.1:0"])
            .args(args)
            .env("AHP_BRIDGE_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Self { child, lines }
    }

    /// The first line from now on that contains `needle`, within the deadline.
    fn wait_line(&self, needle: &str) -> String {
        let started = std::time::Instant::now();
        loop {
            let left = support::DEADLINE.saturating_sub(started.elapsed());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(e) => panic!("no line with {needle:?}: {e}"),
            }
        }
    }

    fn audit_log(&self) -> std::path::PathBuf {
        std::env::temp_dir()
            .join(format!("ahp-copilot-bridge-demo-{}", self.child.id()))
            .join("audit.jsonl")
    }

    /// Says what it runs, then where it listens: the policy line, and a client.
    async fn connect(&self) -> (String, ahp::Client) {
        let policy = self.wait_line(&format!("policy {EXAMPLE} (revision "));
        let addr = self.wait_line("listening on ws://");
        let addr = addr
            .strip_prefix("listening on ws://")
            .unwrap()
            .parse()
            .unwrap();
        let c = support::client_at(addr).await;
        c.initialize("demo-test".into(), vec!["1.0.0".into()], vec![])
            .await
            .unwrap();
        (policy, c)
    }
}

/// createSession with the caller's own entry opting in to `tone`.
async fn create_opting_in_to_tone(c: &ahp::Client, uri: &str) -> Result<Value, ahp::ClientError> {
    let entry = json!({"clientId": "demo-test", "tools": [], "systemMessageTransform": {"sections": ["tone"]}});
    c.request::<Value, Value>(
        "createSession",
        json!({"channel": uri, "provider": "copilot", "activeClient": entry}),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_with_a_policy_enforces_it() {
    let demo = Demo::start(&["--policy", EXAMPLE]);
    let (policy, c) = demo.connect().await;
    assert!(policy.contains("; enforce"), "{policy}");
    assert!(
        policy.contains("modules: opt_in.rego, transform.rego, writers.rego;"),
        "the tests are not the policy: {policy}"
    );
    let refused = create_opting_in_to_tone(&c, "ahp-session:/tone")
        .await
        .expect_err("the example refuses the opt-in");
    assert!(refused.to_string().contains(REFUSED), "{refused}");
    // A session without the opt-in is not the policy's business.
    support::e2e::ready_session(&c, "ahp-session:/plain", None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_with_report_records_would_deny_and_refuses_nothing() {
    let demo = Demo::start(&["--policy", EXAMPLE, "--report"]);
    let (policy, c) = demo.connect().await;
    assert!(policy.contains("; report"), "{policy}");
    create_opting_in_to_tone(&c, "ahp-session:/tone")
        .await
        .expect("report mode refuses nothing");
    let line = demo.wait_line("rego decision");
    assert!(
        line.contains("outcome=would_deny") && line.contains(REFUSED),
        "{line}"
    );
    // The record is written off the async workers, after the log line.
    let log = demo.audit_log();
    let mut found = None;
    support::eventually("the decision record", || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        found = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|r| r["kind"] == "decision" && r["point"] == "opt_in");
        found.is_some()
    })
    .await;
    let record = found.unwrap();
    assert_eq!(record["outcome"], "would_deny", "{record}");
    assert_eq!(record["deny"][0], REFUSED, "{record}");
    let revision = policy
        .split("(revision ")
        .nth(1)
        .and_then(|r| r.split(';').next())
        .unwrap();
    assert_eq!(record["revision"], revision, "the revision the demo named");
}
