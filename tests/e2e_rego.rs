//! `[policy.rego]` end to end: the operator's Rego modules at each of the
//! five decision points, with the REAL runtime rendering and asking and the
//! scripted model receiving. Each real-CLI session costs seconds, so one
//! stack covers every point's deny and warn; report mode, a JWT's claims
//! and an evaluation past its deadline have a stack each. The audit log
//! holding the decision records is verified whole every time.

use crate::support;

use std::path::Path;

use ahp::Client;
use ahp_bridge_join::audit::verify_text;
use ahp_bridge_join::config::{Config, McpServerConfig};
use ahp_bridge_join::Reply;
use ahp_types::actions::StateAction;
use serde_json::{json, Value};
use support::e2e::*;
use support::*;

/// Each point's deny and warn.
const POINTS: &str = r#"
package ahp.transform

deny contains "tone is fixed by the governance team" if input.section == "tone"

warn contains sprintf("%s was rewritten by %s", [input.section, input.owner]) if {
	input.section == "custom_instructions"
}
"#;

const OPT_IN: &str = r#"
package ahp.opt_in

# OPA's walk, as a team pastes it: the sections as a tree.
deny contains "guidelines belong to the operator" if {
	walk(input.sections, [_, v])
	v == "guidelines"
}

warn contains "an opt-in to custom_instructions is watched" if "custom_instructions" in input.sections
"#;

const SESSION: &str = r#"
package ahp.session

deny contains "no sessions in /etc" if {
	some d in input.config.workingDirectories
	startswith(d, "/etc")
}

# time.*: asked at every session.
warn contains "a session on the default model" if {
	input.config.model == null
	time.now_ns() > 0
}
"#;

const PERMISSION: &str = r#"
package ahp.permission

deny contains "no writes to ran.txt" if {
	input.request.kind == "shell"
	contains(input.request.fullCommandText, "ran.txt")
}

warn contains "a write to warned.txt" if contains(input.request.fullCommandText, "warned.txt")
"#;

const CUSTOMIZATION: &str = r#"
package ahp.customization

deny contains sprintf("%s is not in the MCP registry", [input.customization.command]) if {
	input.customization.kind == "mcp_server"
	not input.customization.command in data.registry.commands
}

warn contains sprintf("skills of %s are reviewed", [input.customization.name]) if {
	input.customization.kind == "skill"
}
"#;

/// Writes `modules` (name, text) and `data` into `dir`; the `[policy.rego]`
/// that loads them, with `extra` keys.
fn rego(dir: &Path, modules: &[(&str, &str)], data: Option<Value>, extra: &str) -> Config {
    for (name, text) in modules {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let mut toml = format!(
        "[policy.rego]\nmodules = [{:?}]\n",
        dir.join("*.rego").display().to_string()
    );
    if let Some(d) = data {
        std::fs::write(dir.join("data.json"), d.to_string()).unwrap();
        toml.push_str(&format!(
            "data = [{:?}]\n",
            dir.join("data.json").display().to_string()
        ));
    }
    toml.push_str(extra);
    Config::parse(&toml).unwrap()
}

/// Answers every transform by appending a line to each section.
fn append_to_all(c: &Client) {
    c.set_server_request_handler(|_, params: Value| async move {
        Ok(append_to_each(&params, |id| format!("MARKER-{id}")))
    });
}

/// Every record of the log, after checking the whole chain holds.
fn verified_records(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    verify_text(&text).expect("the audit chain holds, decision records and all");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn decisions<'a>(records: &'a [Value], point: &str) -> Vec<&'a Value> {
    records
        .iter()
        .filter(|r| r["kind"] == "decision" && r["point"] == point)
        .collect()
}

/// The `regoDecision` of section `id` in the last transform record with one.
fn section_decision(records: &[Value], id: &str) -> Value {
    records
        .iter()
        .rev()
        .filter(|r| r["kind"] == "transform")
        .flat_map(|r| r["sections"].as_array().unwrap().iter())
        .find(|s| s["id"] == id && s.get("regoDecision").is_some())
        .unwrap_or_else(|| panic!("no Rego decision on {id}"))
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_point_denies_and_warns_on_the_real_cli() {
    let policy = tempfile::tempdir().unwrap();
    let modules = [
        ("transform.rego", POINTS),
        ("opt_in.rego", OPT_IN),
        ("session.rego", SESSION),
        ("permission.rego", PERMISSION),
        ("customization.rego", CUSTOMIZATION),
    ];
    let data = json!({"registry": {"commands": ["node"]}});
    let rego_cfg = rego(policy.path(), &modules, Some(data), "");
    // A host skill directory: allowed, warned.
    let skills = policy.path().join("skills");
    std::fs::create_dir_all(skills.join("alpha")).unwrap();
    std::fs::write(
        skills.join("alpha/SKILL.md"),
        "---\nname: alpha\ndescription: Use when the user says alpha.\n---\n# Alpha\n",
    )
    .unwrap();
    let dirs = Config::parse(&format!(
        "[[customizations.directories]]\npath = {:?}\ncontents = \"skill\"\nname = \"team-skills\"\n",
        skills.display().to_string()
    ))
    .unwrap()
    .customizations
    .directories;
    let st = start_stack(|c| {
        c.policy.rego = rego_cfg.policy.rego;
        c.customizations.directories = dirs;
        // A host MCP server whose command the registry does not list.
        c.customizations.mcp_servers.insert(
            "echo".into(),
            McpServerConfig {
                command: "python3".into(),
                args: vec!["-c".into(), "pass".into()],
                env: Default::default(),
                cwd: None,
            },
        );
    })
    .await;
    let audit = st.dir.path().join("audit.jsonl");
    let c = initialized(&st.bridge, "ide").await;
    append_to_all(&c);

    // ahp.session: a deny fails createSession with the messages; the
    // policy sees the path the runtime would get, `..` resolved.
    let refused = c
        .request::<Value, Value>(
            "createSession",
            json!({"channel": "ahp-session:/etc", "provider": "copilot", "workingDirectories": ["file:///tmp/%2E%2E/etc"]}),
        )
        .await
        .expect_err("no sessions in /etc");
    assert!(
        refused.to_string().contains("no sessions in /etc"),
        "{refused}"
    );

    // ahp.opt_in: createSession's own entry may opt in to tone and
    // custom_instructions (warned); an opt-in to guidelines is rejected.
    let entry = |s: &[&str]| json!({"clientId": "ide", "tools": [], "systemMessageTransform": {"sections": s}});
    ready_session(
        &c,
        "ahp-session:/rego",
        Some(entry(&["tone", "custom_instructions"])),
    )
    .await;
    let why = reject_reason(
        &c,
        "ahp-session:/rego",
        json!({"type": "session/activeClientSet", "activeClient": entry(&["tone", "guidelines"])}),
    )
    .await;
    assert_eq!(why, "guidelines belong to the operator");

    // ahp.transform: tone keeps its text; custom_instructions is rewritten, warned.
    assert_eq!(run_turn(&c, "rego", "t1", "hello").await.kind, "complete");
    let prompt = last_system_prompt(&st.model);
    assert!(
        !prompt.contains("MARKER-tone"),
        "the denied rewrite never reaches the model"
    );
    assert!(
        prompt.contains("MARKER-custom_instructions"),
        "a warning does not refuse"
    );

    // ahp.permission: a warning asks the client as usual, and the command runs.
    st.model.push(Reply::ToolCall {
        name: "bash".into(),
        arguments: json!({"command": "echo ok > warned.txt", "description": "Write a file"}),
    });
    st.model.push(Reply::Text("Done.".into()));
    let mut sub = start_turn(&c, "rego", "t2", "run it").await;
    let ready = wait_action(&mut sub, |a| match a {
        StateAction::ChatToolCallReady(r) if r.confirmed.is_none() => Some(r.clone()),
        _ => None,
    })
    .await;
    let chat = chat_of("ahp-session:/rego");
    dispatch_raw(&c, &chat, 2, json!({"type": "chat/toolCallConfirmed", "turnId": "t2", "toolCallId": ready.tool_call_id, "approved": true})).await;
    assert_eq!(wait_turn_end(&mut sub, "t2").await.kind, "complete");
    assert!(
        st.dir.path().join("warned.txt").exists(),
        "a warned command runs"
    );

    // ahp.permission: denied without asking any client: no client ever sees
    // the call pending confirmation; it ends failed with the policy's
    // messages, and the command never runs.
    fixtures::script(&st.model, "shell-permission");
    let mut sub = start_turn(&c, "rego", "t3", "run it").await;
    let denied = wait_action(&mut sub, |a| match a {
        StateAction::ChatToolCallReady(r) if r.confirmed.is_none() => {
            panic!("a pending confirmation reached the client: {a:?}")
        }
        StateAction::ChatToolCallComplete(x) if !x.result.success => Some(x.clone()),
        _ => None,
    })
    .await;
    let result = serde_json::to_value(&denied.result).unwrap().to_string();
    assert!(
        result.contains("Denied by policy: no writes to ran.txt"),
        "{result}"
    );
    assert_eq!(wait_turn_end(&mut sub, "t3").await.kind, "complete");
    assert!(
        !st.dir.path().join("ran.txt").exists(),
        "the denied command did not run"
    );
    assert_no_input_needed(&c, "ahp-session:/rego").await;

    // ahp.customization: the MCP server is withheld and shown as an error.
    let snap = raw_subscribe(&c, "ahp-session:/rego").await;
    let echo = snap["snapshot"]["state"]["customizations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "echo")
        .cloned()
        .expect("the host's MCP server is listed");
    assert_eq!(echo["state"]["kind"], "error", "{echo}");
    assert!(
        echo.to_string()
            .contains("python3 is not in the MCP registry"),
        "{echo}"
    );

    // Every decision is in the chain, with its point, outcome, messages and revision.
    let records = verified_records(&audit);
    let revision = st
        .bridge
        .policy
        .current()
        .rego()
        .unwrap()
        .revision()
        .to_owned();
    let session = decisions(&records, "session");
    assert!(session
        .iter()
        .any(|d| d["outcome"] == "denied" && d["deny"][0] == "no sessions in /etc"));
    assert!(
        session.iter().any(|d| d["outcome"] == "warned"),
        "the default model is warned"
    );
    let opt_in = decisions(&records, "opt_in");
    assert!(opt_in
        .iter()
        .any(|d| d["outcome"] == "denied" && d["about"] == "tone,guidelines"));
    assert!(opt_in
        .iter()
        .any(|d| d["outcome"] == "warned" && d["principal"] == "local"));
    let tone = section_decision(&records, "tone");
    assert_eq!(tone["decision"], "refused:rego");
    assert_eq!(tone["regoDecision"]["outcome"], "denied");
    assert_eq!(
        tone["regoDecision"]["deny"][0],
        "tone is fixed by the governance team"
    );
    let ci = section_decision(&records, "custom_instructions");
    assert_eq!(ci["decision"], "transformed");
    assert_eq!(ci["regoDecision"]["outcome"], "warned");
    assert_eq!(
        ci["regoDecision"]["warn"][0],
        "custom_instructions was rewritten by ide"
    );
    let permission = decisions(&records, "permission");
    assert_eq!(permission.len(), 2, "{permission:?}");
    assert_eq!(permission[0]["outcome"], "warned");
    assert_eq!(permission[0]["warn"][0], "a write to warned.txt");
    assert_eq!(permission[1]["outcome"], "denied");
    assert_eq!(permission[1]["about"], "shell");
    assert_eq!(
        permission[1]["client"], "ide",
        "the turn's starter is who asks"
    );
    let custom = decisions(&records, "customization");
    assert_eq!(
        custom.len(),
        2,
        "each recorded once, however often the session binds: {custom:?}"
    );
    let withheld = custom.iter().find(|d| d["outcome"] == "denied").unwrap();
    assert_eq!(withheld["about"], "mcp_server echo");
    let skill = custom.iter().find(|d| d["outcome"] == "warned").unwrap();
    assert_eq!(skill["about"], "skill team-skills");
    assert_eq!(skill["warn"][0], "skills of team-skills are reviewed");
    assert!(
        last_system_prompt(&st.model).contains("Use when the user says alpha."),
        "a warned skill reaches the runtime"
    );
    for d in session
        .iter()
        .chain(&opt_in)
        .chain(&permission)
        .chain(&custom)
    {
        assert_eq!(d["revision"], revision.as_str());
    }
    assert_eq!(tone["regoDecision"]["revision"], revision.as_str());
    assert!(
        !std::fs::read_to_string(&audit).unwrap().contains("MARKER-"),
        "no prompt text in the log"
    );
    let metrics = ahp_bridge_join::telemetry::metrics().encode(false);
    assert!(
        metrics
            .contains("ahp_bridge_policy_decisions_total{point=\"transform\",outcome=\"denied\"}"),
        "{metrics}"
    );

    // audit show --outcome denied: the denials, and nothing else.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ahp-copilot-bridge"))
        .args(["audit", "show", "--outcome", "denied"])
        .arg(&audit)
        .output()
        .unwrap();
    assert!(out.status.success());
    let shown = String::from_utf8(out.stdout).unwrap();
    assert!(shown.contains("no writes to ran.txt"), "{shown}");
    assert!(shown.contains("tone=refused:rego [rego:denied]"), "{shown}");
    assert!(!shown.contains(": warned by"), "only denials: {shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_mode_records_would_deny_and_lets_the_rewrite_through() {
    let policy = tempfile::tempdir().unwrap();
    let cfg = rego(
        policy.path(),
        &[("t.rego", POINTS)],
        None,
        "enforcement = \"report\"\n",
    );
    let st = start_stack(|c| c.policy.rego = cfg.policy.rego).await;
    let c = initialized(&st.bridge, "ide").await;
    append_to_all(&c);
    let entry =
        json!({"clientId": "ide", "tools": [], "systemMessageTransform": {"sections": ["tone"]}});
    ready_session(&c, "ahp-session:/report", Some(entry)).await;
    assert_eq!(run_turn(&c, "report", "t1", "hello").await.kind, "complete");
    assert!(
        last_system_prompt(&st.model).contains("MARKER-tone"),
        "report mode refuses nothing"
    );
    let records = verified_records(&st.dir.path().join("audit.jsonl"));
    let tone = section_decision(&records, "tone");
    assert_eq!(tone["decision"], "transformed");
    assert_eq!(tone["regoDecision"]["outcome"], "would_deny");
    assert_eq!(
        tone["regoDecision"]["deny"][0],
        "tone is fixed by the governance team"
    );
    let policy_record = records.iter().find(|r| r["kind"] == "policy").unwrap();
    assert_eq!(policy_record["policy"]["rego"]["enforcement"], "report");
}

/// Only members of `copilot-writers` may rewrite tone; any rewrite of
/// custom_instructions takes longer than the policy's deadline.
const WRITERS: &str = r#"
package ahp.transform

deny contains sprintf("%s is not in copilot-writers", [input.principal]) if {
	input.section == "tone"
	not "copilot-writers" in input.claims.groups
}

deny contains "slow" if {
	input.section == "custom_instructions"
	count([1 | some x in numbers.range(1, 3000); some y in numbers.range(1, 3000)]) < 0
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwts_groups_decide_and_an_evaluation_past_its_deadline_keeps_the_original() {
    use support::jwt::*;
    let policy = tempfile::tempdir().unwrap();
    let es = es256("es-1");
    let jwks = policy.path().join("jwks.json");
    write_jwks(&jwks, &[&es]);
    let cfg = rego(
        policy.path(),
        &[("w.rego", WRITERS)],
        None,
        "timeout = \"20ms\"\n",
    );
    let jwt = Config::parse(&jwt_toml(&jwks)).unwrap();
    let st = start_stack(|c| {
        c.jwt = jwt.jwt;
        c.policy.rego = cfg.policy.rego;
    })
    .await;
    let addr = st.bridge.addr;
    let connect = |sub: &'static str, groups: &[&str]| {
        let token = sign(&es, &claims(sub, groups));
        async move {
            let c = client_at_url(&format!("ws://{addr}/?token={token}")).await;
            c.initialize(sub.into(), vec!["1.0.0".into()], vec![])
                .await
                .unwrap();
            c
        }
    };
    let mut prompts = Vec::new();
    for (who, groups) in [
        ("alice", vec!["copilot-users", "copilot-writers"]),
        ("bob", vec!["copilot-users"]),
    ] {
        let c = connect(who, &groups).await;
        append_to_all(&c);
        let entry = json!({"clientId": who, "tools": [], "systemMessageTransform": {"sections": ["tone", "custom_instructions"]}});
        ready_session(&c, &format!("ahp-session:/{who}"), Some(entry)).await;
        assert_eq!(run_turn(&c, who, "t1", "hello").await.kind, "complete");
        prompts.push(last_system_prompt(&st.model));
    }
    assert!(prompts[0].contains("MARKER-tone"), "a writer rewrites tone");
    assert!(!prompts[1].contains("MARKER-tone"), "anyone else keeps it");
    for p in &prompts {
        assert!(
            !p.contains("MARKER-custom_instructions"),
            "an evaluation past its deadline refuses"
        );
    }
    let records = verified_records(&st.dir.path().join("audit.jsonl"));
    let bob_tone = records
        .iter()
        .filter(|r| r["kind"] == "transform" && r["session"] == "ahp-session:/bob")
        .flat_map(|r| r["sections"].as_array().unwrap().iter())
        .find(|s| s["id"] == "tone")
        .unwrap()
        .clone();
    assert_eq!(
        bob_tone["regoDecision"]["deny"][0],
        "corp:bob is not in copilot-writers"
    );
    assert_eq!(bob_tone["regoDecision"]["principal"], "corp:bob");
    let slow = section_decision(&records, "custom_instructions");
    assert_eq!(slow["decision"], "refused:rego");
    assert_eq!(slow["regoDecision"]["outcome"], "error");
    assert!(
        !slow["regoDecision"]["error"].as_str().unwrap().is_empty(),
        "{slow}"
    );
}
