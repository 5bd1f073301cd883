//! Host customizations end to end: directories of skills and agents and an
//! MCP server from the config, through the bridge, to the REAL runtime; the
//! scripted model logs what it receives. Bad packages on disk end in clear
//! states while the host serves on.

use crate::support;

use std::path::{Path, PathBuf};

use ahp::Client;
use ahp_bridge_join::audit::sha256_hex;
use ahp_bridge_join::config::{Config, Contents, DirectoryConfig, McpServerConfig, PluginConfig};
use ahp_bridge_join::Reply;
use ahp_types::actions::StateAction;
use serde_json::{json, Value};
use support::e2e::*;
use support::*;

const SKILL: &str = "---\nname: alpha\ndescription: ALPHA_DESC_MARKER use when the user says alpha.\n---\n# Alpha\nALPHA_BODY_MARKER do the alpha thing.\n";
const AGENT: &str = "---\nname: reviewer\ndescription: REVIEWER_DESC_MARKER reviews code.\ntools: [\"view\"]\n---\nREVIEWER_PROMPT_MARKER You review code.\n";

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn directory(path: PathBuf, contents: Contents, name: &str) -> DirectoryConfig {
    DirectoryConfig {
        path,
        contents,
        name: Some(name.into()),
    }
}

/// The session's customizations, as a new subscriber sees them.
async fn listed(c: &Client, uri: &str) -> Vec<Value> {
    let snap = raw_subscribe(c, uri).await;
    snap["snapshot"]["state"]["customizations"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn by_id<'a>(list: &'a [Value], id: &str) -> &'a Value {
    list.iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no customization {id} in {list:?}"))
}

fn customization_records(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["kind"] == "customization")
        .collect()
}

async fn turn_completes(st: &Stack, c: &Client, session: &str, turn: &str, reply: &str) {
    st.model.push(Reply::Text(reply.into()));
    let end = run_turn(c, session, turn, "hello").await;
    assert_eq!(end.kind, "complete", "{end:?}");
}

#[tokio::test]
async fn a_skill_in_a_host_directory_reaches_the_model_until_it_is_toggled_off() {
    let root = tempfile::tempdir().unwrap();
    write(&root.path().join("skills/alpha/SKILL.md"), SKILL);
    let skills = root.path().join("skills");
    let st = start_stack(|cfg: &mut Config| {
        cfg.customizations.directories = vec![directory(skills, Contents::Skill, "team-skills")];
    })
    .await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/sk", None).await;

    let list = listed(&c, "ahp-session:/sk").await;
    let dir = by_id(&list, "host-dir-0");
    assert_eq!(dir["load"]["kind"], "loaded", "{dir}");
    assert_eq!(dir["writable"], false);
    assert_eq!(dir["children"][0]["type"], "skill", "{dir}");
    assert_eq!(dir["children"][0]["name"], "alpha");
    assert!(dir["children"][0]["description"]
        .as_str()
        .unwrap()
        .contains("ALPHA_DESC_MARKER"));

    turn_completes(&st, &c, "sk", "t1", "one").await;
    let prompt = last_system_prompt(&st.model);
    assert!(
        prompt.contains("ALPHA_DESC_MARKER"),
        "the skill is listed: {prompt}"
    );
    assert!(
        !prompt.contains("ALPHA_BODY_MARKER"),
        "its body waits for its use"
    );
    let records = customization_records(st.dir.path());
    let skill_hash = sha256_hex(SKILL.as_bytes());
    assert!(
        records.iter().any(|r| r["source"] == "host-directory"
            && r["decision"] == "applied"
            && r["children"][0]["sha256"] == skill_hash.as_str()),
        "{records:?}"
    );
    let log = st.dir.path().join("audit.jsonl");
    let (shown, out) = support::process::run_bin(["audit", "show", log.to_str().unwrap()]);
    assert!(
        shown && out.contains("custom") && out.contains("host-directory \"team-skills\""),
        "{out}"
    );
    let (verified, out) = support::process::run_bin(["audit", "verify", log.to_str().unwrap()]);
    assert!(verified, "{out}");

    dispatch_raw(
        &c,
        "ahp-session:/sk",
        1,
        json!({"type": "session/customizationToggled",
        "id": "host-dir-0", "enablement": [{"kind": "session", "enabled": false}]}),
    )
    .await;
    turn_completes(&st, &c, "sk", "t2", "two").await;
    let prompt = last_system_prompt(&st.model);
    assert!(
        !prompt.contains("ALPHA_DESC_MARKER"),
        "toggled off: {prompt}"
    );
}

#[tokio::test]
async fn a_host_mcp_server_is_started_and_the_client_sees_its_tool_called() {
    let mcp_log = tempfile::NamedTempFile::new().unwrap();
    let server = McpServerConfig {
        command: "python3".into(),
        args: vec![fixture("mcp/echo_server.py")],
        env: [("MCP_LOG".to_owned(), mcp_log.path().display().to_string())].into(),
        cwd: None,
    };
    let st = start_stack(|cfg: &mut Config| {
        cfg.customizations.mcp_servers = [("echo".to_owned(), server)].into();
    })
    .await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/mcp", None).await;
    let list = listed(&c, "ahp-session:/mcp").await;
    let echo = by_id(&list, "host-mcp-echo");
    assert_eq!(echo["type"], "mcpServer", "{echo}");
    assert!(
        echo.get("command").is_none(),
        "the command stays host-side: {echo}"
    );

    st.model.push_all([
        Reply::ToolCall {
            name: "echo-echo_upper".into(),
            arguments: json!({"text": "hi there"}),
        },
        Reply::Text("echoed".into()),
    ]);
    let mut sub = start_turn(&c, "mcp", "t1", "echo it").await;
    let ready = wait_action(&mut sub, |a| match a {
        StateAction::ChatToolCallReady(r) if r.confirmed.is_none() => Some(r.clone()),
        _ => None,
    })
    .await;
    let chat = chat_of("ahp-session:/mcp");
    dispatch_raw(
        &c,
        &chat,
        2,
        json!({"type": "chat/toolCallConfirmed", "turnId": "t1",
        "toolCallId": ready.tool_call_id, "approved": true}),
    )
    .await;
    let end = wait_turn_end(&mut sub, "t1").await;
    assert_eq!(end.kind, "complete", "{end:?}");

    let first = &st.model.requests()[0];
    let tools = first["tools"].to_string();
    assert!(
        tools.contains("echo-echo_upper"),
        "the tool is offered: {tools}"
    );
    let last = st.model.requests().last().unwrap()["messages"].to_string();
    assert!(
        last.contains("UPPER:HI THERE"),
        "the model got the result: {last}"
    );
    let snap = raw_subscribe(&c, &chat).await;
    assert!(
        snap.to_string().contains("UPPER:HI THERE"),
        "the client sees the result: {snap}"
    );
    let list = listed(&c, "ahp-session:/mcp").await;
    assert_eq!(
        by_id(&list, "host-mcp-echo")["state"]["kind"],
        "ready",
        "{list:?}"
    );
    let log = std::fs::read_to_string(mcp_log.path()).unwrap();
    assert!(log.contains("tools/call"), "{log}");
}

fn fixture(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(rel)
        .display()
        .to_string()
}

#[tokio::test]
async fn an_agent_from_a_directory_is_selectable_and_its_prompt_reaches_the_model() {
    let root = tempfile::tempdir().unwrap();
    write(&root.path().join("agents/reviewer.agent.md"), AGENT);
    let agents = root.path().join("agents");
    let st = start_stack(|cfg: &mut Config| {
        cfg.customizations.directories = vec![directory(agents, Contents::Agent, "team-agents")];
    })
    .await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/ag", None).await;
    let list = listed(&c, "ahp-session:/ag").await;
    let agent = &by_id(&list, "host-dir-0")["children"][0];
    assert_eq!(agent["type"], "agent", "{agent}");
    let uri = agent["uri"].as_str().unwrap().to_owned();

    st.model.push(Reply::Text("reviewed".into()));
    let chat = chat_of("ahp-session:/ag");
    let (_, mut sub) = c.subscribe(chat.clone()).await.unwrap();
    dispatch_raw(
        &c,
        &chat,
        1,
        json!({"type": "chat/turnStarted", "turnId": "t1",
        "startedAt": jiff::Timestamp::now().to_string(),
        "message": {"text": "review this", "origin": {"kind": "user"}, "agent": {"uri": uri}}}),
    )
    .await;
    assert_eq!(wait_turn_end(&mut sub, "t1").await.kind, "complete");
    let prompt = last_system_prompt(&st.model);
    assert!(
        prompt.contains("REVIEWER_PROMPT_MARKER"),
        "selected: {prompt}"
    );

    turn_completes(&st, &c, "ag", "t2", "plain").await;
    let prompt = last_system_prompt(&st.model);
    assert!(
        !prompt.contains("REVIEWER_PROMPT_MARKER"),
        "not selected: {prompt}"
    );
}

#[tokio::test]
async fn bad_packages_on_disk_are_clear_states_and_the_rest_still_works() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    write(&r.join("good/alpha/SKILL.md"), SKILL);
    write(&r.join("good/nofm/SKILL.md"), "no frontmatter here\n");
    write(&r.join("badjson/plugin.json"), "{not json");
    write(
        &r.join("escape/.claude-plugin/plugin.json"),
        r#"{"name": "escape"}"#,
    );
    std::fs::create_dir_all(r.join("escape/skills")).unwrap();
    std::os::unix::fs::symlink("/etc", r.join("escape/skills/evil")).unwrap();
    write(
        &r.join("big/huge/SKILL.md"),
        "---\nname: huge\ndescription: Huge.\n---\nx",
    );
    let f = std::fs::File::create(r.join("big/huge/blob.bin")).unwrap();
    f.set_len(50 * 1024 * 1024).unwrap();
    for i in 0..10_000 {
        write(&r.join(format!("many/s{}/f{i}.md", i % 100)), "x");
    }
    let st = start_stack(|cfg: &mut Config| {
        cfg.customizations.directories = vec![
            directory(r.join("good"), Contents::Skill, "good"),
            directory(r.join("big"), Contents::Skill, "big"),
            directory(r.join("many"), Contents::Skill, "many"),
        ];
        cfg.customizations.plugins = ["badjson", "escape"]
            .map(|p| PluginConfig { path: r.join(p) })
            .to_vec();
    })
    .await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/bad", None).await;
    let list = listed(&c, "ahp-session:/bad").await;
    let state = |id: &str| by_id(&list, id)["load"].clone();
    let good = state("host-dir-0");
    assert_eq!(good["kind"], "degraded", "{good}");
    assert!(good["message"].as_str().unwrap().contains("nofm"), "{good}");
    for (id, says) in [
        ("host-dir-1", "byte"),
        ("host-dir-2", "files"),
        ("host-plugin-0", "plugin.json"),
        ("host-plugin-1", "outside"),
    ] {
        let s = state(id);
        let message = s["message"].as_str().unwrap_or_default();
        assert!(
            matches!(s["kind"].as_str(), Some("error" | "degraded")) && message.contains(says),
            "{id}: {s}"
        );
    }
    turn_completes(&st, &c, "bad", "t1", "still up").await;
    assert!(last_system_prompt(&st.model).contains("ALPHA_DESC_MARKER"));
}

#[tokio::test]
async fn a_change_on_disk_is_listed_again_and_reaches_the_next_turn() {
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("skills/alpha/SKILL.md");
    write(&file, SKILL);
    let skills = root.path().join("skills");
    let st = start_stack(|cfg: &mut Config| {
        cfg.customizations.directories = vec![directory(skills, Contents::Skill, "team-skills")];
    })
    .await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/w", None).await;
    turn_completes(&st, &c, "w", "t1", "one").await;
    assert!(last_system_prompt(&st.model).contains("ALPHA_DESC_MARKER"));

    let (_, mut sub) = c.subscribe("ahp-session:/w".into()).await.unwrap();
    write(
        &file,
        &SKILL.replace("ALPHA_DESC_MARKER", "DELTA_DESC_MARKER"),
    );
    wait_action(&mut sub, |a| match a {
        StateAction::SessionCustomizationUpdated(u) => serde_json::to_string(&u.customization)
            .unwrap()
            .contains("DELTA_DESC_MARKER")
            .then_some(()),
        _ => None,
    })
    .await;
    turn_completes(&st, &c, "w", "t2", "two").await;
    let prompt = last_system_prompt(&st.model);
    assert!(prompt.contains("DELTA_DESC_MARKER"), "{prompt}");
    assert!(!prompt.contains("ALPHA_DESC_MARKER"), "{prompt}");
}

#[tokio::test]
async fn an_mcp_server_that_fails_to_start_is_an_error_and_turns_go_on() {
    let server = McpServerConfig {
        command: "/nonexistent/mcp-server".into(),
        args: vec![],
        env: Default::default(),
        cwd: None,
    };
    let st = start_stack(|cfg: &mut Config| {
        cfg.customizations.mcp_servers = [("broken".to_owned(), server)].into();
    })
    .await;
    let c = initialized(&st.bridge, "ide").await;
    ready_session(&c, "ahp-session:/broken", None).await;
    let (_, mut sub) = c.subscribe("ahp-session:/broken".into()).await.unwrap();
    turn_completes(&st, &c, "broken", "t1", "still fine").await;
    let state = wait_action(&mut sub, |a| match a {
        StateAction::SessionMcpServerStateChanged(s) if s.id == "host-mcp-broken" => {
            let v = serde_json::to_value(&s.state).unwrap();
            (v["kind"] == "error").then_some(v)
        }
        _ => None,
    })
    .await;
    let message = state["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("spawn") || message.contains("No such file"),
        "{state}"
    );
}
