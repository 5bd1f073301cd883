//! The `policy` commands, as `opa test` and an operator run them: `policy
//! test` finds and runs the tests of Rego modules (the examples' own, a
//! failing one, any indentation, todo tests, --run, --verbose, JSON and
//! coverage, the exit statuses); `policy eval` decides one input document
//! (and warns when the input names another point); `config check` names a
//! module's syntax error by file and line.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ahp-copilot-bridge"))
}

/// `policy eval --config CONFIG --point POINT --input INPUT`, run to its end.
/// `config check CONFIG`, run to its end.
fn config_check(config: &std::path::Path) -> std::process::Output {
    bin()
        .args(["config", "check"])
        .arg(config)
        .output()
        .unwrap()
}

fn policy_eval(
    config: impl AsRef<std::ffi::OsStr>,
    point: &str,
    input: impl AsRef<std::ffi::OsStr>,
) -> std::process::Output {
    bin()
        .args(["policy", "eval", "--point", point, "--config"])
        .arg(config)
        .arg("--input")
        .arg(input)
        .output()
        .unwrap()
}

/// `policy test`: every `test_*` rule, PASS or FAIL; exit 0 only when all
/// pass, 2 (as `opa test`) when one fails.
#[test]
fn policy_test_runs_each_test_rule_and_fails_on_a_failing_one() {
    for example in [
        "group-gated-rewrites",
        "link-allowlist",
        "shell-mcp-registry",
    ] {
        let out = bin()
            .args(["policy", "test", "--verbose"])
            .arg(format!("examples/policy/{example}"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{example}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains(": PASS ("), "{text}");
        assert!(text.contains(" 0 failed"), "{text}");
        // Its worked input, decided as the bridge decides it (on the VM,
        // where the tests ran on the interpreter): one deny.
        let dir = format!("examples/policy/{example}");
        let input: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(format!("{dir}/input.json")).unwrap())
                .unwrap();
        let out = policy_eval(
            format!("{dir}/example.toml"),
            input["point"].as_str().unwrap(),
            format!("{dir}/input.json"),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let sets: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            sets["deny"].as_array().unwrap().len(),
            1,
            "{example}: {sets}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("p.rego"),
        "package ahp.opt_in\n\ndeny contains \"no tone\" if \"tone\" in input.sections\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("p_test.rego"),
        "package ahp.opt_in_test\n\nimport data.ahp.opt_in\n\n\
         test_tone_denied if \"no tone\" in opt_in.deny with input as {\"sections\": [\"tone\"]}\n\n\
         test_wrongly_expects_a_deny if \"no tone\" in opt_in.deny with input as {\"sections\": []}\n",
    )
    .unwrap();
    let out = bin()
        .args(["policy", "test", "--verbose"])
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("data.ahp.opt_in_test.test_tone_denied: PASS"),
        "{text}"
    );
    assert!(
        text.contains("data.ahp.opt_in_test.test_wrongly_expects_a_deny: FAIL"),
        "{text}"
    );
    assert!(text.contains("1 passed, 1 failed"), "{text}");

    // `policy eval`: the sets of one input at one point, with a config's [policy.rego].
    let config = dir.path().join("bridge.toml");
    std::fs::write(&config, "[policy.rego]\nmodules = [\"p.rego\"]\n").unwrap();
    let input = dir.path().join("input.json");
    std::fs::write(&input, r#"{"sections": ["tone", "preamble"]}"#).unwrap();
    let out = policy_eval(&config, "opt_in", &input);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sets: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sets, serde_json::json!({"deny": ["no tone"], "warn": []}));
    let out = policy_eval(&config, "nowhere", &input);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("opt_in, session, transform"));

    // `config check` compiles the modules: a syntax error names the file and line.
    std::fs::write(
        dir.path().join("p.rego"),
        "package ahp.opt_in\n\ndeny contains msg if {\n    msg := \n}\n",
    )
    .unwrap();
    let out = config_check(&config);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("config policy.rego.modules"), "{err}");
    assert!(err.contains("p.rego:"), "the module's file and line: {err}");

    // The strict check: modules that compile but would err at every
    // evaluation are refused by `config check`, each with its finding, and
    // the diagnostic keeps its lines (the caret under the place).
    let refusals = [
        ("deny := \"x\"\n", "is a string, not a set of strings"),
        (
            "deny contains \"x\" if {\n    input.point == \"never\"\n    no_such_func(1)\n}\n",
            "undefined function no_such_func",
        ),
        (
            "deny contains \"x\" if time.now_ns() < 0\n\nwarn contains \"x\" if http.send({}).status_code == 1\n",
            "http.send",
        ),
        ("deny contains x if {\n    y == 1\n}\n", "unsafe"),
        (
            "deny := {\"a\"}\n\ndeny contains \"b\" if true\n",
            "conflicting rules data.ahp.opt_in.deny",
        ),
    ];
    for (body, finding) in refusals {
        std::fs::write(
            dir.path().join("p.rego"),
            format!("package ahp.opt_in\n\n{body}"),
        )
        .unwrap();
        let out = config_check(&config);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{body}: {err}");
        assert!(err.contains(finding), "{body}: {err}");
        assert!(
            !err.contains("could not schedule"),
            "regorus's own stderr: {err}"
        );
    }
    // OPA's walk and time.* compile and are accepted.
    std::fs::write(
        dir.path().join("p.rego"),
        "package ahp.opt_in\n\ndeny contains v if {\n    walk(input.sections, [_, v])\n    v == \"bad\"\n    time.now_ns() > 0\n}\n",
    )
    .unwrap();
    let out = config_check(&config);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.is_empty(), "nothing on stderr: {err}");
    std::fs::write(&input, r#"{"sections": ["tone", "bad"]}"#).unwrap();
    let out = policy_eval(&config, "opt_in", &input);
    let sets: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sets["deny"], serde_json::json!(["bad"]));
}

/// `policy test PATH ARGS...`, run to its end: (exit code, stdout, stderr).
fn policy_test(path: &std::path::Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = bin()
        .args(["policy", "test"])
        .args(args)
        .arg(path)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const POLICY: &str = "package p

allow if {
    input.x == 1
}

    test_indented_fails if {
        allow with input as {\"x\": 2}
    }

test_allowed if allow with input as {\"x\": 1}
";

/// `policy test` as `opa test`: a test at any indentation is found (and its
/// failure is exit 2); passes are shown only with --verbose, with times; a
/// todo test is SKIPPED (exit 2 unless -z); --run picks tests by name.
#[test]
fn policy_test_reports_as_opa_test_does() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("p.rego"), POLICY).unwrap();
    let (code, text, err) = policy_test(dir.path(), &[]);
    assert_eq!(code, Some(2), "{text}{err}");
    assert!(
        text.contains("p.rego:7:\ndata.p.test_indented_fails: FAIL ("),
        "{text}"
    );
    assert!(
        !text.contains("test_allowed"),
        "passes shown only with -v: {text}"
    );
    assert!(
        text.lines()
            .any(|l| l == "policy test: 1 passed, 1 failed, 0 skipped, 0 errors"),
        "{text}"
    );

    let (code, text, _) = policy_test(dir.path(), &["--verbose"]);
    assert_eq!(code, Some(2), "{text}");
    let timed = regex::Regex::new(r"(?m)^data\.p\.test_allowed: PASS \([0-9.]+[nµm]?s\)$").unwrap();
    assert!(timed.is_match(&text), "{text}");

    let (code, text, _) = policy_test(dir.path(), &["--run", "allowed$"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("1 passed, 0 failed"), "{text}");

    std::fs::write(
        dir.path().join("p.rego"),
        format!("{POLICY}\ntodo_test_later if false\n").replace("{\"x\": 2}", "{\"x\": 1}"),
    )
    .unwrap();
    let (code, text, _) = policy_test(dir.path(), &[]);
    assert_eq!(code, Some(2), "a skipped test is not a pass: {text}");
    assert!(text.contains("data.p.todo_test_later: SKIPPED"), "{text}");
    assert!(text.contains("2 passed, 0 failed, 1 skipped"), "{text}");
    let (code, text, _) = policy_test(dir.path(), &["--exit-zero-on-skipped"]);
    assert_eq!(code, Some(0), "{text}");

    // A usage error is 1 too, not a test's 2 (clap's own status).
    let (code, _, err) = policy_test(dir.path(), &["--no-such-flag"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--no-such-flag"), "{err}");
    // Nothing to run is not a pass: exit 1, as for a module that does not compile.
    let (code, _, err) = policy_test(dir.path(), &["--run", "nothing"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("matches --run"), "{err}");
    std::fs::write(dir.path().join("p.rego"), "package p\n\ntest_x if {\n").unwrap();
    let (code, _, err) = policy_test(dir.path(), &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("p.rego:"), "{err}");
}

/// --format json is one JSON document (OPA's result shape); --coverage
/// names each module's covered and not covered lines, in text or JSON.
#[test]
fn policy_test_prints_json_and_coverage() {
    let dir = tempfile::tempdir().unwrap();
    let with_error = format!("{POLICY}\ntest_divides if {{\n    x := 1 / 0\n    x > 0\n}}\n");
    std::fs::write(dir.path().join("p.rego"), with_error).unwrap();
    let (code, text, err) = policy_test(dir.path(), &["--format", "json"]);
    assert_eq!(code, Some(2), "{err}");
    let results: serde_json::Value = serde_json::from_str(&text).unwrap();
    let by_name = |name: &str| {
        results
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {results}"))
            .clone()
    };
    assert_eq!(by_name("test_indented_fails")["fail"], true);
    assert_eq!(by_name("test_indented_fails")["location"]["row"], 7);
    assert_eq!(by_name("test_allowed")["package"], "data.p");
    assert!(by_name("test_allowed").get("fail").is_none());
    let error = by_name("test_divides")["error"]["message"].to_string();
    assert!(error.contains("divide by zero"), "{error}");

    let (code, text, _) = policy_test(dir.path(), &["--coverage"]);
    assert_eq!(code, Some(2), "{text}");
    // Line 4 (`input.x == 1`) was reached; line 15 (`x > 0`), after the error, was not.
    assert!(text.contains("  covered: 4, 8, 11, 14\n"), "{text}");
    assert!(text.contains("  not covered: 15\n"), "{text}");

    let (_, text, _) = policy_test(dir.path(), &["--coverage", "--format", "json"]);
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    let file = report["files"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap();
    assert_eq!(
        file["not_covered"],
        serde_json::json!([{"start": {"row": 15}, "end": {"row": 15}}])
    );
    assert_eq!(file["covered_lines"], 4);
    assert_eq!(report["tests"].as_array().unwrap().len(), 3);
}

/// `policy eval`: an input whose `point` names another point is decided
/// at --point, with a warning on stderr; stdout stays the JSON sets.
#[test]
fn policy_eval_warns_when_the_input_names_another_point() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("p.rego"),
        "package ahp.opt_in\n\ndeny contains \"no tone\" if \"tone\" in input.sections\n",
    )
    .unwrap();
    let config = dir.path().join("bridge.toml");
    std::fs::write(&config, "[policy.rego]\nmodules = [\"p.rego\"]\n").unwrap();
    let input = dir.path().join("input.json");
    for (named, warned) in [("session", true), ("opt_in", false)] {
        std::fs::write(
            &input,
            format!(r#"{{"point": "{named}", "sections": ["tone"]}}"#),
        )
        .unwrap();
        let out = policy_eval(&config, "opt_in", &input);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert_eq!(err.contains("warning:"), warned, "{named}: {err}");
        if warned {
            assert!(
                err.contains("\"session\"") && err.contains("opt_in"),
                "{err}"
            );
        }
        let sets: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            sets["deny"],
            serde_json::json!(["no tone"]),
            "decided at --point"
        );
    }
}
