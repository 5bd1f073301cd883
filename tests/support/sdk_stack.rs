//! The stack tests/sdk_apps.rs runs SDK apps against: the bridge as a
//! process with `[sdk]` (its token in the environment), the real CLI on the
//! scripted model, an audit log; and what an app saw, and the log holds.

use std::path::Path;

use ahp_bridge_join::audit::verify_text;
use ahp_bridge_join::Reply;
use ahp_bridge_join::ScriptedModel;
use serde_json::Value;

use super::process::*;
use super::sdk::event;

pub(crate) const SDK_TOKEN: &str = "sdk-connection-token";
pub(crate) const SDK_TOKEN_ENV: &str = "AHP_TEST_SDK_TOKEN";

/// A bridge with `[sdk]` (the token in its environment), `extra` tables
/// (policy, ...) and `sdk_extra` keys under `[sdk]`.
pub(crate) fn bridge(
    model: &ScriptedModel,
    dir: &Path,
    sdk_extra: &str,
    extra: &str,
) -> BridgeProcess {
    bridge_draining(model, dir, sdk_extra, extra, "0s")
}

/// [`bridge`] with `[server] drain`.
pub(crate) fn bridge_draining(
    model: &ScriptedModel,
    dir: &Path,
    sdk_extra: &str,
    extra: &str,
    drain: &str,
) -> BridgeProcess {
    let config = format!(
        "[admin]\nlisten = \"127.0.0.1:0\"\n[server]\nlisten = \"127.0.0.1:0\"\ndrain = {drain:?}\nreload_on_change = false\n\
         {}{}{}\
         [sdk]\nlisten = \"127.0.0.1:0\"\nprincipal = \"sdk-apps\"\ntoken_env = {SDK_TOKEN_ENV:?}\n{sdk_extra}\n\
         {extra}\n[audit]\npath = {:?}\n{}",
        ide_principal(),
        principal_toml("observer", "observer-token", &["observe", "participate"], "session_visibility = \"all\""),
        principal_toml("sdk-apps", "unused-ahp-token", &["observe", "participate", "transform"], ""),
        dir.join("audit.jsonl").display().to_string(),
        offline_runtime_toml(model, dir),
    );
    BridgeProcess::start_config_env(dir, &config, &[(SDK_TOKEN_ENV, SDK_TOKEN)])
}

/// The scripted model, a directory, and a bridge on them (see [`bridge`]).
pub(crate) async fn stack(
    sdk_extra: &str,
    extra: &str,
) -> (ScriptedModel, tempfile::TempDir, BridgeProcess) {
    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let b = bridge(&model, dir.path(), sdk_extra, extra);
    (model, dir, b)
}

/// `app` holds a turn on `b` (`more` names the prompt) while the model
/// answers `reply`: what it saw, once it got that reply and no error.
pub(crate) fn converse(
    app: fn(&Value) -> Vec<Value>,
    b: &BridgeProcess,
    model: &ScriptedModel,
    reply: &str,
    more: Value,
) -> Vec<Value> {
    model.push(Reply::Text(reply.into()));
    let seen = app(&scenario(b, model, more));
    assert!(event(&seen, "error").is_none(), "{seen:?}");
    assert_eq!(event(&seen, "reply").unwrap()["content"], reply);
    seen
}

/// The scenario for an app of `b`'s `[sdk]`, with its token.
pub(crate) fn scenario(b: &BridgeProcess, model: &ScriptedModel, more: Value) -> Value {
    let at = b.sdk.expect("the bridge says where SDK apps connect");
    super::sdk::scenario(at, Some(SDK_TOKEN), model, more)
}

pub(crate) fn records(dir: &Path, kind: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap_or_default();
    verify_text(&text).expect("the audit chain holds");
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == kind)
        .collect()
}

/// What an app saw ends in an error that says `words`, with no reply.
pub(crate) fn failed_with(seen: &[Value], words: &str) {
    let error = event(seen, "error").unwrap_or_else(|| panic!("no error: {seen:?}"));
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains(words),
        "the error says {words:?}: {seen:?}"
    );
    assert!(event(seen, "reply").is_none(), "{seen:?}");
}

/// A reply the model streams in `n` words (`TAG0 TAG1 ...`), one every
/// 200 ms: a turn still running while the test acts.
pub(crate) fn slow_reply(n: usize, tag: &str) -> Reply {
    Reply::Slow {
        chunks: (0..n).map(|i| format!("{tag}{i} ")).collect(),
        delay: std::time::Duration::from_millis(200),
    }
}

/// The Node app comes back to `session` (resumed, vetted again), and a
/// turn completes on it.
pub(crate) fn resumes_later(b: &BridgeProcess, model: &ScriptedModel, session: &str) {
    model.clear_script();
    let more = serde_json::json!({"resume": session, "prompt": "again"});
    converse(super::sdk::node_app, b, model, "back again", more);
}
