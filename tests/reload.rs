//! `[server] reload_on_change`: a change of the config file is put in force
//! without SIGHUP, written in place or swapped in as a Kubernetes ConfigMap
//! does (`bridge.toml -> ..data/bridge.toml`, `..data` re-pointed); an
//! invalid file keeps the running config, names the key and is counted in
//! `ahp_bridge_config_reload_failures_total`; a file written several times a
//! second beside it does not hold the reload back. The real binary.

use crate::support;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ahp_bridge_join::ScriptedModel;
use serde_json::{json, Value};
use support::process::*;
use support::raw::Raw;
use support::*;

/// Whether a new connection's root snapshot says `section` is restricted.
async fn restricted(bridge: &BridgeProcess, section: &str) -> bool {
    let mut raw = Raw::connect(&format!("ws://{}/?tkn={TOKEN}", bridge.addr)).await;
    let init = raw
        .call(
            json!(1),
            "initialize",
            json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": "reader",
                   "initialSubscriptions": ["ahp-root://"]}),
        )
        .await;
    let sections = &init["result"]["snapshots"][0]["state"]["agents"][0]["systemMessageSections"];
    let found: Vec<&Value> = sections
        .as_array()
        .unwrap_or_else(|| panic!("no catalogue in {init}"))
        .iter()
        .filter(|s| s["id"] == section)
        .collect();
    found.first().is_some_and(|s| s["restricted"] == true)
}

fn config_reload_failures(bridge: &BridgeProcess) -> f64 {
    let text = http::get(bridge.admin, "/metrics", &[]).unwrap().body;
    text.lines()
        .find_map(|l| l.strip_prefix("ahp_bridge_config_reload_failures_total "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no config_reload_failures_total in\n{text}"))
}

fn with_policy(base: &str, restricted: &str) -> String {
    format!("{base}\n[policy]\nrestricted = [{restricted}]\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_file_applies_without_sighup_in_place_or_as_a_configmap_swap() {
    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bridge = BridgeProcess::start_in(&model, dir.path(), "reload_on_change = true", None);
    let config = dir.path().join("bridge.toml");
    let base = std::fs::read_to_string(&config).unwrap();
    assert!(!restricted(&bridge, "tone").await);

    // Written in place: no SIGHUP.
    let mark = bridge.log_mark();
    std::fs::write(&config, with_policy(&base, r#""safety", "tone""#)).unwrap();
    let line = bridge.wait_log(mark, "policy reloaded").await;
    assert!(line.contains("changed=true"), "{line}");
    assert!(restricted(&bridge, "tone").await, "the new policy, at once");

    // The same bytes, now as a ConfigMap mounts them: nothing to reload.
    let mount = |name: &str, text: &str| {
        let d = dir.path().join(name);
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("bridge.toml"), text).unwrap();
    };
    mount("..2026_11_26_a", &with_policy(&base, r#""safety", "tone""#));
    let link = |target: &str, name: &str| {
        std::os::unix::fs::symlink(target, dir.path().join(name)).unwrap();
    };
    link("..2026_11_26_a", "..data");
    link("..data/bridge.toml", "bridge.toml.new");
    std::fs::rename(dir.path().join("bridge.toml.new"), &config).unwrap();
    // The update: a new folder, `..data` re-pointed by a rename.
    let mark = bridge.log_mark();
    mount(
        "..2026_11_26_b",
        &with_policy(&base, r#""safety", "guidelines""#),
    );
    link("..2026_11_26_b", "..data_tmp");
    std::fs::rename(dir.path().join("..data_tmp"), dir.path().join("..data")).unwrap();
    let line = bridge.wait_log(mark, "policy reloaded").await;
    assert!(line.contains("changed=true"), "{line}");
    assert!(restricted(&bridge, "guidelines").await);
    assert!(
        !restricted(&bridge, "tone").await,
        "the swap's policy, whole"
    );
    assert_eq!(config_reload_failures(&bridge), 0.0);

    // An invalid file: the running config stays, the key is named, counted.
    let mark = bridge.log_mark();
    swap_in(
        dir.path(),
        "..2026_11_26_c",
        &with_policy(&base, r#""nope""#),
    );
    let line = bridge.wait_log(mark, "reload refused").await;
    assert!(line.contains("policy.restricted"), "{line}");
    assert_eq!(config_reload_failures(&bridge), 1.0);
    assert!(
        restricted(&bridge, "guidelines").await,
        "the running policy"
    );
}

/// A file beside the config written every 50 ms (as the bridge's own log
/// or audit log may be) until dropped.
struct BusyNeighbour {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl BusyNeighbour {
    /// Starts writing `path`; returns once it has been written ten times,
    /// so the folder is already busy.
    async fn start(path: PathBuf) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, mut written) = tokio::sync::mpsc::unbounded_channel();
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            use std::io::Write;
            let mut f = std::fs::File::create(&path).unwrap();
            while !s.load(Ordering::Relaxed) {
                writeln!(f, "a line of a busy log").unwrap();
                let _ = tx.send(());
                // The pace of a busy log, not a wait for anything.
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        tokio::time::timeout(DEADLINE, async {
            for _ in 0..10 {
                written.recv().await.expect("the neighbour writes");
            }
        })
        .await
        .expect("ten writes within the deadline");
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for BusyNeighbour {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_neighbour_of_the_file_does_not_delay_its_reload() {
    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bridge = BridgeProcess::start_in(&model, dir.path(), "reload_on_change = true", None);
    let config = dir.path().join("bridge.toml");
    let base = std::fs::read_to_string(&config).unwrap();
    let _busy = BusyNeighbour::start(dir.path().join("bridge.log")).await;

    let mark = bridge.log_mark();
    let edited = Instant::now();
    std::fs::write(&config, with_policy(&base, r#""safety", "tone""#)).unwrap();
    bridge.wait_log(mark, "config reloaded").await;
    let delay = edited.elapsed();
    eprintln!("reloaded {delay:?} after the edit");
    // Generous: what it rules out is the 5 s fallback look deciding, the
    // folder never quiet for the watcher's 300 ms.
    assert!(
        delay < Duration::from_secs(1),
        "reloaded {delay:?} after the edit"
    );
    assert!(restricted(&bridge, "tone").await, "the new policy");
}

/// A ConfigMap update: `text` in a new folder `name`, `..data` re-pointed.
fn swap_in(dir: &Path, name: &str, text: &str) {
    let d = dir.join(name);
    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("bridge.toml"), text).unwrap();
    std::os::unix::fs::symlink(name, dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn customizations_change_with_the_file_for_the_sessions_after_it() {
    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bridge = BridgeProcess::start_in(&model, dir.path(), "reload_on_change = true", None);
    let config = dir.path().join("bridge.toml");
    let base = std::fs::read_to_string(&config).unwrap();
    let skill = dir.path().join("skills/alpha/SKILL.md");
    std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
    std::fs::write(
        &skill,
        "---\nname: alpha\ndescription: Use when the user says alpha.\n---\n# Alpha\n",
    )
    .unwrap();
    let c = connect(bridge.addr, "ide").await;
    let listed = |uri: &'static str| {
        let c = &c;
        async move { raw_subscribe(c, uri).await["snapshot"]["state"]["customizations"].to_string() }
    };
    support::e2e::ready_session(&c, "ahp-session:/before", None).await;
    assert!(!listed("ahp-session:/before").await.contains("team-skills"));

    let mark = bridge.log_mark();
    let directory = format!(
        "\n[[customizations.directories]]\npath = {:?}\ncontents = \"skill\"\nname = \"team-skills\"\n",
        dir.path().join("skills").display().to_string()
    );
    std::fs::write(&config, format!("{base}{directory}")).unwrap();
    bridge.wait_log(mark, "customizations reloaded").await;
    support::e2e::ready_session(&c, "ahp-session:/after", None).await;
    assert!(
        listed("ahp-session:/after").await.contains("team-skills"),
        "a session created after the reload lists the new directory"
    );
}

/// The `rego.revision` of each `policy` record in the log, in order.
/// Why `createSession` with its creator opted in to `tone` fails, if it does.
async fn opt_in_refused(bridge: &BridgeProcess, channel: &str) -> Option<String> {
    let mut raw = Raw::connect(&format!("ws://{}/?tkn={TOKEN}", bridge.addr)).await;
    let init = json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": "ide",
                      "initialSubscriptions": []});
    raw.call(json!(1), "initialize", init).await;
    let entry =
        json!({"clientId": "ide", "tools": [], "systemMessageTransform": {"sections": ["tone"]}});
    let params = json!({"channel": channel, "provider": "copilot", "activeClient": entry});
    let created = raw.call(json!(2), "createSession", params).await;
    created["error"]["message"].as_str().map(str::to_owned)
}

fn rego_revisions(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "policy")
        .map(|r| r["policy"]["rego"]["revision"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_rego_module_applies_and_a_broken_one_keeps_the_running_policy() {
    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let modules = dir.path().join("policy");
    std::fs::create_dir(&modules).unwrap();
    let module = modules.join("tone.rego");
    let deny = |msg: &str| {
        format!("package ahp.opt_in\n\ndeny contains {msg:?} if \"tone\" in input.sections\n")
    };
    std::fs::write(&module, deny("tone is fixed")).unwrap();
    // Relative to the config file's folder, as an operator writes it.
    let server = "reload_on_change = true\n[policy.rego]\nmodules = [\"policy/*.rego\"]\n";
    let bridge = BridgeProcess::start_in(&model, dir.path(), server, None);
    let first = rego_revisions(dir.path());
    assert_eq!(first.len(), 1, "the startup policy names its revision");

    // The module edited in place: no SIGHUP, no change of the config file.
    let mark = bridge.log_mark();
    std::fs::write(&module, deny("tone is fixed by the governance team")).unwrap();
    let line = bridge.wait_log(mark, "policy reloaded").await;
    assert!(line.contains("changed=true"), "{line}");
    let second = rego_revisions(dir.path());
    assert_eq!(second.len(), 2);
    assert_ne!(second[1], second[0], "the new revision is in force");

    // A module that does not compile: refused naming its file and line,
    // counted, and the revision in force stays.
    let mark = bridge.log_mark();
    std::fs::write(
        &module,
        "package ahp.opt_in\n\ndeny contains msg if {\n    msg := \n}\n",
    )
    .unwrap();
    let line = bridge.wait_log(mark, "reload refused").await;
    assert!(line.contains("policy.rego.modules"), "{line}");
    assert!(line.contains("tone.rego:"), "the file and line: {line}");
    assert_eq!(config_reload_failures(&bridge), 1.0);
    assert_eq!(rego_revisions(dir.path()), second, "no half-loaded policy");

    // Modules that compile but would err at every evaluation fail the
    // strict check: refused whole, counted, and the last good revision
    // keeps deciding.
    let strict = [
        (
            "package ahp.opt_in\n\ndeny := \"x\"\n",
            "not a set of strings",
        ),
        (
            "package ahp.opt_in\n\ndeny contains \"x\" if no_such_func(1)\n",
            "undefined function no_such_func",
        ),
    ];
    for (n, (text, finding)) in strict.into_iter().enumerate() {
        let mark = bridge.log_mark();
        std::fs::write(&module, text).unwrap();
        bridge.wait_log(mark, "reload refused").await;
        // The finding keeps its lines: it may be on a line after the first,
        // which the log's reader may not have read yet.
        bridge.wait_log(mark, finding).await;
        assert_eq!(config_reload_failures(&bridge), 2.0 + n as f64);
        assert_eq!(
            rego_revisions(dir.path()),
            second,
            "the running policy stays"
        );
        // Alive, and saying the file on disk is not in force, by its name.
        let health = http::get(bridge.admin, "/healthz", &[]).unwrap();
        assert_eq!(health.status, 200);
        assert!(
            health.body.contains("bridge.toml is refused"),
            "{}",
            health.body
        );
    }
    let ready = http::get(bridge.admin, "/readyz", &[]).unwrap();
    let ready: Value = serde_json::from_str(&ready.body).unwrap();
    assert!(
        ready["config"].as_str().unwrap().contains("is refused"),
        "{ready}"
    );
    // The last good revision still decides: an opt-in to tone is refused
    // with its message (the refused modules would have erred instead).
    assert_eq!(
        opt_in_refused(&bridge, "ahp-session:/after-refusals")
            .await
            .as_deref(),
        Some("tone is fixed by the governance team")
    );

    // A good module again: in force, and said so.
    let mark = bridge.log_mark();
    std::fs::write(&module, deny("tone is fixed")).unwrap();
    bridge.wait_log(mark, "policy reloaded").await;
    let health = http::get(bridge.admin, "/healthz", &[]).unwrap();
    assert_eq!(health.body, "ok\n");
}
