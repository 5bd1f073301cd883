//! The binary: config errors name the key and exit non-zero; the example
//! config is valid; `demo` lets loopback browsers in, serves a whole
//! conversation and stops on Ctrl-C.

use crate::support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ahp-copilot-bridge"))
}

#[test]
fn example_configs_are_valid() {
    for file in ["config/bridge.toml", "deploy/beside-runtime.toml"] {
        let out = bin().args(["config", "check", file]).output().unwrap();
        assert!(
            out.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `config check | head -1`: the reader gone, the command ends as Unix
/// tools do (by SIGPIPE), not with a panic about a broken pipe.
#[test]
fn config_check_into_a_closed_pipe_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader); // nobody reads: the first print meets a closed pipe
    let out = bin()
        .args(["config", "check", "config/bridge.toml"])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?} {stderr}",
        out.status
    );
}

#[test]
fn config_check_prints_the_effective_policy_one_row_per_section() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.toml");
    std::fs::write(
        &p,
        "[policy.sections.tone]\nmode = \"append-only\"\nmax_growth_bytes = 500\ndeny = ['a', 'b']\n\
         [policy.sections.guidelines]\naccess = \"read-only\"\nredact = ['secret']\n",
    )
    .unwrap();
    let out = bin()
        .args(["config", "check"])
        .arg(&p)
        .env_remove("AHP_BRIDGE_TOKEN")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let hash = text.lines().find_map(|l| l.strip_prefix("policy sha256 "));
    assert_eq!(hash.map(str::len), Some(64), "{text}");
    let rows = |id: &str| -> Vec<String> {
        let row = text.lines().find(|l| l.starts_with(&format!("{id} ")));
        let row = row.unwrap_or_else(|| panic!("no row for {id}: {text}"));
        row.split_whitespace().map(String::from).collect()
    };
    for s in ahp_bridge_join::sections::SECTION_CATALOGUE {
        rows(s.id);
    }
    assert_eq!(
        rows("tone"),
        [
            "tone",
            "transform",
            "append-only",
            "500",
            "-",
            "0",
            "2",
            "0",
            "local"
        ]
    );
    assert_eq!(rows("guidelines")[1..3], ["read-only", "any"]);
    assert_eq!(rows("guidelines")[7], "1");
    assert_eq!(rows("safety")[1], "hidden");
}

#[test]
fn the_commented_policy_rules_in_the_example_config_are_valid() {
    let text = std::fs::read_to_string("config/bridge.toml").unwrap();
    let start = text.find("# [policy.sections.").expect("commented rules");
    let end = text[start..].find("\n[").map_or(text.len(), |e| start + e);
    let uncommented: String = text[start..end]
        .lines()
        .map(|l| l.strip_prefix("# ").unwrap_or(l.trim_start_matches('#')))
        .map(|l| format!("{l}\n"))
        .collect();
    let cfg = ahp_bridge_join::config::Config::parse(&uncommented).unwrap();
    assert!(cfg.policy.sections.len() >= 3, "{uncommented}");
    cfg.validate().unwrap();
}

#[test]
fn the_example_config_states_the_default_rate_limits() {
    use ahp_bridge_join::config::{Config, RateLimits};
    let text = std::fs::read_to_string("config/bridge.toml").unwrap();
    let cfg = Config::parse(&text).unwrap();
    assert_eq!(cfg.default_rate_limits(), RateLimits::default());
    assert!(
        text.contains("max_sessions = 1000"),
        "each key is written out"
    );
}

#[test]
fn bad_configs_exit_non_zero_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (text, needle) in [
        ("[server]\nlisten = \"0.0.0.0:8421\"\n", "server.listen"),
        (
            "[server]\nlisten = \"0.0.0.0:8421\"\ntoken = \"a-token-of-sixteen-chars\"\n",
            "server.tls",
        ),
        ("[server]\nlistne = \"127.0.0.1:1\"\n", "listne"),
        ("[policy]\ntransform_timeout = \"later\"\n", "later"),
        (
            "[policy.overrides.tone]\naction = \"replace\"\n",
            "policy.overrides.tone",
        ),
        (
            "[policy.sections.tone]\ndeny = ['ok', '(unclosed']\n",
            "config policy.sections.tone.deny[1]",
        ),
        (
            "[policy.sections.tone]\naccess = \"hidden\"\ndeny = ['x']\n",
            "config policy.sections.tone.deny",
        ),
        (
            "[policy.sections.nope]\nmode = \"append-only\"\n",
            "config policy.sections.nope",
        ),
    ] {
        let p = dir.path().join("c.toml");
        std::fs::write(&p, text).unwrap();
        for args in [vec!["config", "check"], vec!["serve", "--config"]] {
            let out = bin()
                .args(&args)
                .arg(&p)
                .env_remove("AHP_BRIDGE_TOKEN")
                .output()
                .unwrap();
            assert!(!out.status.success(), "{text}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains(needle), "{args:?} {text}: {err}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_serves_a_conversation_and_stops_on_ctrl_c() {
    let mut child = bin()
        .args(["demo", "--listen", "127.0.0.1:0"])
        .args(["--allow-origin", "https://ui.example"])
        .env("AHP_BRIDGE_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A failed assertion must not leave the demo (and its runtime) running.
    let mut reap = KillOnDrop(child.id(), true);
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(addr) = line.strip_prefix("listening on ws://") {
                let _ = tx.send(addr.to_owned());
            }
        }
    });
    let addr: std::net::SocketAddr = rx
        .recv_timeout(support::DEADLINE)
        .expect("the demo says where it listens")
        .parse()
        .unwrap();
    // A browser on loopback (a web UI's dev server) and the allowed origin
    // get in; any other origin gets 403.
    for (origin, status) in [
        ("http://localhost:5173", 101),
        ("https://ui.example", 101),
        ("http://evil.example", 403),
    ] {
        assert_eq!(
            support::raw::upgrade_status(addr, origin).await,
            status,
            "{origin}"
        );
    }
    let page = support::http::get(addr, "/", &[]).unwrap();
    assert_eq!(page.status, 200, "the demo serves the console: {page:?}");
    let c = support::client_at(addr).await;
    c.initialize("demo-test".into(), vec!["1.0.0".into()], vec![])
        .await
        .unwrap();
    support::e2e::ready_session(&c, "ahp-session:/demo", None).await;
    let end = support::e2e::run_turn(&c, "demo", "t1", "hello").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    assert_eq!(end.text, ahp_bridge_join::DEFAULT_REPLY);
    // The demo model calls the runtime's shell on "run: ..."; approve it.
    let mut sub = support::e2e::start_turn(&c, "demo", "t2", "run: echo demo-$((6*7))").await;
    let ready = support::e2e::wait_action(&mut sub, |a| match a {
        ahp_types::actions::StateAction::ChatToolCallReady(r) if r.confirmed.is_none() => {
            Some(r.tool_call_id.clone())
        }
        _ => None,
    })
    .await;
    support::dispatch_raw(&c, &support::chat_of("ahp-session:/demo"), 2, serde_json::json!({"type": "chat/toolCallConfirmed", "turnId": "t2", "toolCallId": ready, "approved": true})).await;
    let end = support::e2e::wait_turn_end(&mut sub, "t2").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    assert!(end.text.contains("demo-42"), "{end:?}");
    let state = std::env::temp_dir().join(format!("ahp-copilot-bridge-demo-{}", child.id()));
    assert!(
        state.join("cache").exists(),
        "the runtime's cache while it runs"
    );
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    reap.1 = false;
    assert!(status.success(), "{status:?}");
    // The runtime's unpacked package goes with the demo; its audit log stays.
    assert!(!state.join("cache").exists(), "{}", state.display());
    assert!(state.join("audit.jsonl").exists());
    let _ = std::fs::remove_dir_all(&state);
}

/// SIGKILLs a process on drop while armed.
struct KillOnDrop(u32, bool);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if self.1 {
            let _ = Command::new("kill")
                .args(["-KILL", &self.0.to_string()])
                .status();
        }
    }
}

/// Off loopback, `serve` refuses plain text unless the operator says a TLS
/// terminator is in front, naming both keys; with the word, it starts.
#[test]
fn serve_off_loopback_needs_tls_or_allow_plaintext_remote() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.toml");
    let base = "[server]\nlisten = \"0.0.0.0:0\"\ntoken = \"a-token-of-sixteen-chars\"\n";
    let tail =
        "[admin]\nlisten = \"\"\n[runtime]\nconnect = \"127.0.0.1:1\"\nhealth_interval = \"0s\"\n";
    std::fs::write(&p, format!("{base}{tail}")).unwrap();
    let out = bin()
        .args(["serve", "--config"])
        .arg(&p)
        .env_remove("AHP_BRIDGE_TOKEN")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("server.tls") && err.contains("allow_plaintext_remote"),
        "{err}"
    );
    std::fs::write(&p, format!("{base}allow_plaintext_remote = true\n{tail}")).unwrap();
    let mut child = bin()
        .args(["serve", "--config"])
        .arg(&p)
        .env_remove("AHP_BRIDGE_TOKEN")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let listening = BufReader::new(stderr)
        .lines()
        .map_while(Result::ok)
        .find(|l| l.starts_with("listening on ") || l.starts_with("error"));
    let _ = child.kill();
    let _ = child.wait();
    let line = listening.unwrap_or_default();
    assert!(line.starts_with("listening on ws://0.0.0.0:"), "{line}");
}
