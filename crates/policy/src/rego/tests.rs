use std::time::Duration;

use serde_json::json;

use super::input::changed;
use super::*;
use ahp_bridge_base::config::{Enforcement, RegoSources};

const BUDGET: Duration = Duration::from_secs(5);

pub(super) fn sources(modules: &[(&str, &str)]) -> RegoSources {
    RegoSources {
        modules: modules
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect(),
        data: vec![],
        additions: false,
    }
}

fn compiled(modules: &[(&str, &str)], enforcement: Enforcement) -> Rego {
    Rego::compile(&sources(modules), enforcement, Duration::from_millis(200)).unwrap()
}

const TRANSFORM: &str = r#"package ahp.transform

deny contains msg if {
    input.section == "tone"
    not "copilot-writers" in input.claims.groups
    msg := sprintf("%s may not rewrite tone", [input.principal])
}

warn contains "rewrite is long" if count(input.after) > 100
"#;

fn subject(groups: &[&str]) -> Subject {
    Subject::new(
        Some("alice".into()),
        vec!["transform"],
        Some(std::sync::Arc::new(json!({"groups": groups}))),
        Some("c1".into()),
        ClientKind::Ahp,
    )
}

fn transform<'a>(s: &'a Subject, after: &'a str) -> Input<'a> {
    Input::new(
        s,
        Some("ahp-session:/x"),
        Body::Transform {
            section: "tone",
            before: "Be concise.",
            after,
            owner: "c1",
        },
    )
}

#[test]
fn the_transform_input_is_the_documented_document() {
    let s = subject(&["copilot-writers"]);
    let doc = transform(&s, "Be concise. Sure.").to_json();
    assert_eq!(
        doc,
        json!({
            "point": "transform",
            "principal": "alice",
            "roles": ["transform"],
            "claims": {"groups": ["copilot-writers"]},
            "client": {"id": "c1", "kind": "ahp"},
            "session": "ahp-session:/x",
            "section": "tone",
            "action": "transform",
            "before": "Be concise.",
            "after": "Be concise. Sure.",
            "added": " Sure.",
            "removed": "",
            "owner": "c1",
        })
    );
    // What was inserted and taken out, between the common prefix and suffix.
    assert_eq!(changed("Be concise.", "Be brief."), ("brief", "concise"));
    assert_eq!(changed("abc", "abc"), ("", ""));
    assert_eq!(
        changed("Be concise. Always.", "Be concise."),
        ("", " Always.")
    );
    assert_eq!(changed("été", "était"), ("ait", "é"));
}

/// Each point's document is built once, the same whoever asked: an AHP
/// client's session and an SDK app's have one shape.
#[test]
fn a_session_has_one_document_from_ahp_and_sdk_alike() {
    let uris = vec!["file:///srv/work/app".to_owned()];
    let paths = vec!["/srv/work/app".to_owned()];
    let ahp_sent = json!({"model": "gpt-4.1"});
    let sdk_sent =
        json!({"sessionId": "s", "model": "gpt-4.1", "workingDirectory": "/srv/work/app"});
    let ahp = session_config(
        Some("copilot"),
        &paths,
        &uris,
        Some("gpt-4.1"),
        Some(&ahp_sent),
    );
    let sdk = session_config(None, &paths, &uris, Some("gpt-4.1"), Some(&sdk_sent));
    let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&ahp), keys(&sdk));
    assert_eq!(ahp["workingDirectories"], sdk["workingDirectories"]);
    for (point, example) in examples::all() {
        assert_eq!(example["point"], point.as_str());
        if point == Point::Session {
            assert_eq!(
                keys(&example["config"]),
                keys(&ahp),
                "the documented examples too"
            );
        }
    }
}

#[test]
fn each_point_has_its_own_fields() {
    let s = Subject::nobody();
    let sections = vec!["tone".to_owned()];
    let opt_in = Input::new(
        &s,
        Some("u"),
        Body::OptIn {
            sections: &sections,
        },
    )
    .to_json();
    assert_eq!(opt_in["point"], "opt_in");
    assert_eq!(opt_in["sections"], json!(["tone"]));
    assert_eq!(opt_in["claims"], json!({}), "no JWT: empty claims");
    assert_eq!(opt_in["principal"], json!(null));
    let config = json!({"model": "gpt-5", "workingDirectory": "/srv/work"});
    let session = Input::new(&s, None, Body::Session { config: &config }).to_json();
    assert_eq!(session["point"], "session");
    assert_eq!(session["config"]["workingDirectory"], "/srv/work");
    let request = json!({"kind": "shell", "fullCommandText": "rm -rf /"});
    let dirs = vec!["/srv/work".to_owned()];
    let body = Body::Permission {
        request: &request,
        working_directories: &dirs,
    };
    let perm = Input::new(&s, Some("u"), body).to_json();
    assert_eq!(perm["point"], "permission");
    assert_eq!(perm["working_directories"], json!(["/srv/work"]));
    assert_eq!(perm["request"]["kind"], "shell");
    let c = Customization {
        kind: "mcp_server".into(),
        name: "echo".into(),
        source: "host".into(),
        command: Some("python3".into()),
        args: vec!["echo.py".into()],
        url: None,
        servers: vec![],
    };
    let custom = Input::new(&s, Some("u"), Body::Customization { customization: &c }).to_json();
    assert_eq!(custom["point"], "customization");
    assert_eq!(
        custom["customization"],
        json!({"kind": "mcp_server", "name": "echo", "source": "host",
               "command": "python3", "args": ["echo.py"]})
    );
}

#[test]
fn deny_and_warn_sets_decide_and_claims_are_read() {
    let rego = compiled(&[("t.rego", TRANSFORM)], Enforcement::Enforce);
    let outsider = subject(&["staff"]);
    let d = rego.decide(&transform(&outsider, "short"), BUDGET);
    assert_eq!(d.outcome, Outcome::Denied);
    assert!(d.refuses());
    assert_eq!(d.deny, ["alice may not rewrite tone"]);
    assert_eq!(d.reason(), "alice may not rewrite tone");
    let writer = subject(&["copilot-writers"]);
    let d = rego.decide(&transform(&writer, "short"), BUDGET);
    assert_eq!(d.outcome, Outcome::Allowed);
    assert!(!d.refuses() && !d.recorded());
    let long = "x".repeat(101);
    let d = rego.decide(&transform(&writer, &long), BUDGET);
    assert_eq!(d.outcome, Outcome::Warned);
    assert!(!d.refuses() && d.recorded());
    assert_eq!(d.warn, ["rewrite is long"]);
    assert_eq!(d.revision, rego.revision());
}

#[test]
fn report_mode_records_would_deny_and_refuses_nothing() {
    let rego = compiled(&[("t.rego", TRANSFORM)], Enforcement::Report);
    let d = rego.decide(&transform(&subject(&[]), "x"), BUDGET);
    assert_eq!(d.outcome, Outcome::WouldDeny);
    assert!(!d.refuses());
    assert_eq!(d.deny.len(), 1);
}

#[test]
fn a_point_without_a_package_allows() {
    let rego = compiled(&[("t.rego", TRANSFORM)], Enforcement::Enforce);
    assert_eq!(rego.points().collect::<Vec<_>>(), [Point::Transform]);
    let s = Subject::nobody();
    let request = json!({"kind": "shell"});
    let d = rego.decide(
        &Input::new(
            &s,
            None,
            Body::Permission {
                request: &request,
                working_directories: &[],
            },
        ),
        BUDGET,
    );
    assert_eq!(d.outcome, Outcome::Allowed);
}

#[test]
fn a_rule_of_the_wrong_type_is_an_error_that_refuses() {
    // Of the right type on the documented inputs (the strict check passes
    // it), of the wrong one on this: an error at the decision.
    let m = "package ahp.transform\n\ndeny := 3 if input.after == \"x\"\n";
    let rego = compiled(&[("t.rego", m)], Enforcement::Enforce);
    let d = rego.decide(&transform(&subject(&[]), "x"), BUDGET);
    assert_eq!(d.outcome, Outcome::Error);
    assert!(d.refuses());
    let why = d.error.unwrap();
    assert!(why.contains("data.ahp.transform.deny is a number"), "{why}");
    let m = "package ahp.transform\n\ndeny contains 7 if input.after == \"x\"\n";
    let d = compiled(&[("t.rego", m)], Enforcement::Enforce)
        .decide(&transform(&subject(&[]), "x"), BUDGET);
    assert!(d.error.unwrap().contains("holds a number"));
    // In report mode an error is recorded and refuses nothing either.
    let m = "package ahp.transform\n\ndeny := 3 if input.after == \"x\"\n";
    let d = compiled(&[("t.rego", m)], Enforcement::Report)
        .decide(&transform(&subject(&[]), "x"), BUDGET);
    assert_eq!(d.outcome, Outcome::Error);
    assert!(!d.refuses());
}

#[test]
fn an_evaluation_past_its_deadline_is_an_error() {
    // Nine million iterations: seconds, far longer than 5 ms.
    let m = "package ahp.transform\n\n\
        deny contains \"slow\" if {\n    input.after == \"x\"\n    count([1 | some x in numbers.range(1, 3000); some y in numbers.range(1, 3000)]) < 0\n}\n";
    let rego = Rego::compile(
        &sources(&[("slow.rego", m)]),
        Enforcement::Enforce,
        Duration::from_millis(5),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let d = rego.decide(&transform(&subject(&[]), "x"), BUDGET);
    assert_eq!(d.outcome, Outcome::Error, "{d:?}");
    assert!(d.refuses());
    // The deadline cut it short: nowhere near the seconds it would take.
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // No budget left at all is an error at once.
    let d = rego.decide(&transform(&subject(&[]), "x"), Duration::ZERO);
    assert_eq!(d.outcome, Outcome::Error);
}

#[test]
fn a_syntax_error_names_the_file_line_and_column_with_a_caret() {
    let broken = "package ahp.transform\n\ndeny contains msg if {\n    msg := \n}\n";
    let e = Rego::compile(
        &sources(&[("policy/tone.rego", broken)]),
        Enforcement::Enforce,
        Duration::from_millis(50),
    )
    .unwrap_err();
    let text = e.to_string();
    assert!(text.contains("policy/tone.rego:4:"), "{e}");
    // The lines are kept: the source line, then the caret under the place.
    assert!(text.lines().any(|l| l.trim_end().ends_with("^")), "{e}");
}

#[test]
fn the_revision_is_the_hash_of_modules_and_data() {
    let a = sources(&[("t.rego", TRANSFORM)]);
    let mut b = a.clone();
    assert_eq!(revision(&a), revision(&b));
    b.data.push(("d.json".into(), json!({"hosts": ["x"]})));
    assert_ne!(revision(&a), revision(&b));
    let c = sources(&[("t.rego", &TRANSFORM.replace("long", "longer"))]);
    assert_ne!(revision(&a), revision(&c));
    assert_eq!(revision(&a).len(), 64);
}

#[test]
fn data_is_merged_under_data() {
    let m = "package ahp.customization\n\n\
        deny contains sprintf(\"%s is not in the registry\", [input.customization.command]) if {\n\
            input.customization.kind == \"mcp_server\"\n\
            not input.customization.command in data.registry.commands\n}\n";
    let mut s = sources(&[("c.rego", m)]);
    s.data
        .push(("r.json".into(), json!({"registry": {"commands": ["node"]}})));
    let rego = Rego::compile(&s, Enforcement::Enforce, Duration::from_millis(50)).unwrap();
    let subject = Subject::nobody();
    let mut c = Customization {
        kind: "mcp_server".into(),
        name: "x".into(),
        source: "host".into(),
        command: Some("python3".into()),
        args: vec![],
        url: None,
        servers: vec![],
    };
    let d = rego.decide(
        &Input::new(&subject, None, Body::Customization { customization: &c }),
        BUDGET,
    );
    assert_eq!(d.deny, ["python3 is not in the registry"]);
    c.command = Some("node".into());
    let d = rego.decide(
        &Input::new(&subject, None, Body::Customization { customization: &c }),
        BUDGET,
    );
    assert_eq!(d.outcome, Outcome::Allowed);
}

#[test]
fn tests_pass_and_fail_by_their_rule() {
    let t = "package ahp.transform_test\n\nimport data.ahp.transform\n\n\
        test_outsider_denied if {\n    count(transform.deny) == 1 with input as {\"section\": \"tone\", \"principal\": \"bob\", \"claims\": {\"groups\": []}, \"after\": \"\"}\n}\n\n\
        test_wrong if {\n    count(transform.deny) == 5 with input as {\"section\": \"tone\", \"principal\": \"bob\", \"claims\": {}, \"after\": \"\"}\n}\n";
    let sources = sources(&[("t.rego", TRANSFORM), ("t_test.rego", t)]);
    let results = testing::run(&sources, &testing::TestOptions::default())
        .unwrap()
        .results;
    let got: Vec<(String, bool)> = results
        .iter()
        .map(|r| (r.full_name(), r.outcome == testing::TestOutcome::Pass))
        .collect();
    assert_eq!(
        got,
        [
            ("data.ahp.transform_test.test_outsider_denied".into(), true),
            ("data.ahp.transform_test.test_wrong".into(), false),
        ]
    );
    assert_eq!(
        results[1].outcome,
        testing::TestOutcome::Fail("undefined".into())
    );
}

#[test]
fn messages_are_bounded() {
    let m = "package ahp.opt_in\n\ndeny contains concat(\"\", [\"é\", x]) if {\n    some i in numbers.range(1, 100)\n    x := sprintf(\"%d%s\", [i, strings.any_suffix_match(\"a\", \"a\") == true])\n}\n";
    let m = m.replace("strings.any_suffix_match(\"a\", \"a\") == true", "\"y\"");
    let m = m + "\nwarn contains concat(\"\", [\"w\", input.big]) if true\n";
    let rego = compiled(&[("o.rego", &m)], Enforcement::Enforce);
    let s = Subject::nobody();
    let sections = vec![];
    let mut input = Input::new(
        &s,
        None,
        Body::OptIn {
            sections: &sections,
        },
    )
    .to_json();
    input["big"] = json!("é".repeat(2000));
    let d = rego.decide_json(Point::OptIn, &input, BUDGET);
    assert_eq!(d.deny.len(), MAX_MESSAGES);
    assert!(d.warn[0].len() <= MAX_MESSAGE_BYTES + '…'.len_utf8());
    assert!(d.warn[0].ends_with('…'));
}

#[test]
fn paths_are_compared_lexically() {
    assert_eq!(lexical("/srv/work/../../etc"), "/etc");
    assert_eq!(lexical("/srv//work/./a/"), "/srv/work/a");
    assert_eq!(lexical("/.."), "/");
    assert_eq!(lexical("a/../../b"), "../b");
}

#[test]
fn the_value_built_directly_is_the_json_document() {
    let s = subject(&["copilot-writers"]);
    let request = json!({"kind": "shell", "fullCommandText": "ls", "n": 3});
    let config = json!({"model": null, "workingDirectories": ["/srv"]});
    let sections = vec!["tone".to_owned()];
    let c = Customization {
        kind: "plugin".into(),
        name: "p".into(),
        source: "client".into(),
        command: None,
        args: vec![],
        url: None,
        servers: vec![Server {
            name: "s".into(),
            command: "node".into(),
            args: vec!["a".into()],
        }],
    };
    for body in [
        Body::OptIn {
            sections: &sections,
        },
        Body::Session { config: &config },
        Body::Transform {
            section: "tone",
            before: "a",
            after: "b",
            owner: "c1",
        },
        Body::Permission {
            request: &request,
            working_directories: &[],
        },
        Body::Customization { customization: &c },
    ] {
        let input = Input::new(&s, Some("ahp-session:/x"), body);
        assert_eq!(
            input.to_value(),
            Value::from(input.to_json()),
            "{:?}",
            input.point
        );
    }
    let nobody = Subject::nobody();
    let input = Input::new(
        &nobody,
        None,
        Body::OptIn {
            sections: &sections,
        },
    );
    assert_eq!(input.to_value(), Value::from(input.to_json()));
}

#[test]
fn an_import_of_a_split_package_is_warned_of() {
    let lib1 = "package lib\n\nzz := 1\n";
    let lib2 = "package lib\n\nflag if input.m\n";
    let t = "package ahp.transform\n\nimport data.lib\n\ndeny contains \"d\" if lib.flag\n";
    let rego = compiled(
        &[("lib1.rego", lib1), ("lib2.rego", lib2), ("t.rego", t)],
        Enforcement::Enforce,
    );
    assert_eq!(rego.warnings().len(), 1, "{:?}", rego.warnings());
    assert!(rego.warnings()[0].starts_with("t.rego: `import data.lib`, a package of 2 modules"));
    let whole = compiled(&[("lib1.rego", lib1), ("t.rego", t)], Enforcement::Enforce);
    assert!(
        whole.warnings().is_empty(),
        "one module: nothing to warn of"
    );
}

#[path = "check_tests.rs"]
mod check_tests;
