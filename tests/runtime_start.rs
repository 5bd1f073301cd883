//! A runtime that dies while starting is reported with its last words on
//! stderr, not only "connection closed"; one slower to start than the
//! readiness probe's deadline still becomes ready. The real binary, a script
//! as the runtime (the real CLI behind it for the slow one).

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use ahp_bridge_join::ScriptedModel;
use support::process::{offline_runtime_toml_with, BridgeProcess};

/// Says 25 lines on stderr, the last with a control sequence and the token
/// it was given, then exits 3 before any handshake.
const DYING: &str = "#!/bin/sh\n\
     for i in $(seq 0 23); do echo \"noise $i\" >&2; done\n\
     printf 'copilot: \\033[31mno config in %s, token %s\\n' \"$HOME\" \"$TEST_API_TOKEN\" >&2\n\
     exit 3\n";

const TOKEN: &str = "tok-never-in-the-log-4242";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_that_dies_at_start_is_logged_with_its_last_words() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("dying-runtime.sh");
    std::fs::write(&script, DYING).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = format!(
        "[admin]\nlisten = \"127.0.0.1:0\"\n[server]\nlisten = \"127.0.0.1:0\"\ndrain = \"0s\"\n\
         [runtime]\ncommand = [{:?}]\n[runtime.env]\nHOME = \"/nowhere\"\nTEST_API_TOKEN = {TOKEN:?}\n",
        script.display().to_string()
    );
    let bridge = BridgeProcess::start_config(dir.path(), &config);
    let mark = bridge.log_mark();
    // Readiness starts runtime 0 as a session would, and says why it failed.
    let ready = support::http::get(bridge.admin, "/readyz", &[]).unwrap();
    assert_eq!(ready.status, 503, "{ready:?}");
    assert!(
        ready.body.contains("no config in /nowhere"),
        "{}",
        ready.body
    );
    let line = bridge.wait_log(mark, "runtime did not start").await;
    assert!(line.contains("connection closed"), "the cause: {line}");
    assert!(line.contains("exit status: 3"), "how it ended: {line}");
    assert!(
        line.contains(r"copilot: \u{1b}[31mno config in /nowhere, token [redacted]"),
        "its last line, escaped, the token redacted: {line}"
    );
    assert!(!line.contains('\u{1b}') && !line.contains(TOKEN), "{line}");
    assert!(line.contains("\"noise 23\""), "{line}");
    assert!(
        !line.contains("\"noise 0\""),
        "only the last lines are kept: {line}"
    );
}

/// The Copilot CLI, started three seconds late: longer than the two seconds
/// a readiness probe waits for a start. The probe that starts it says it is
/// still starting; the start goes on, and a later probe finds it up (cut off
/// at each probe, it was killed and started again forever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_slower_to_start_than_the_probe_waits_becomes_ready() {
    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cli =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".runtime/node_modules/.bin/copilot");
    let script = dir.path().join("slow-runtime.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nsleep 3\nexec {:?} \"$@\"\n",
            cli.display().to_string()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let command = format!(
        "command = [{:?}, \"--headless\", \"--stdio\", \"--no-auto-update\", \"--no-auto-login\"]",
        script.display().to_string()
    );
    let config = format!(
        "[admin]\nlisten = \"127.0.0.1:0\"\n[server]\nlisten = \"127.0.0.1:0\"\ndrain = \"0s\"\n{}",
        offline_runtime_toml_with(&model, dir.path(), &command)
    );
    let bridge = BridgeProcess::start_config(dir.path(), &config);
    let first = support::http::get(bridge.admin, "/readyz", &[]).unwrap();
    assert_eq!(first.status, 503, "{first:?}");
    assert!(first.body.contains("still starting"), "{}", first.body);
    let body = support::http::readyz_until(
        bridge.admin,
        Duration::from_secs(60),
        "ready",
        |status, _| status == 200,
    )
    .await;
    assert_eq!(body["checks"]["runtime"], "ok", "{body}");
}
