//! The strict check: each kind of module OPA's `opa check` refuses is
//! refused at load, with its diagnostic's lines kept; OPA's built-ins the
//! build has decide.

use super::*;

fn refused(text: &str) -> String {
    let s = sources(&[("p.rego", text)]);
    match Rego::compile(&s, Enforcement::Enforce, Duration::from_millis(200)) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn opt_in_decision(text: &str, sections: &[&str]) -> Decision {
    let rego = compiled(&[("p.rego", text)], Enforcement::Enforce);
    let s = subject(&[]);
    let sections: Vec<String> = sections.iter().map(|x| x.to_string()).collect();
    rego.decide(
        &Input::new(
            &s,
            None,
            Body::OptIn {
                sections: &sections,
            },
        ),
        BUDGET,
    )
}

#[test]
fn a_set_of_the_wrong_type_is_refused_on_the_documented_inputs() {
    let why = refused("package ahp.opt_in\n\ndeny := \"x\"\n");
    assert!(why.contains("data.ahp.opt_in.deny is a string"), "{why}");
    assert!(why.contains("documented example input"), "{why}");
    let why = refused("package ahp.transform\n\nwarn contains 7 if true\n");
    assert!(why.contains("holds a number"), "{why}");
}

#[test]
fn a_call_no_engine_has_is_refused_even_where_no_input_reaches_it() {
    let text = "package ahp.opt_in\n\ndeny contains \"x\" if {\n    input.point == \"never\"\n    no_such_func(1)\n}\n";
    let why = refused(text);
    assert!(why.contains("undefined function no_such_func"), "{why}");
    // file:line:col, the source line, and the caret under the call.
    assert!(why.contains("p.rego:5:5"), "{why}");
    let lines: Vec<&str> = why.lines().collect();
    let src = lines
        .iter()
        .position(|l| l.ends_with("no_such_func(1)"))
        .expect("the source line");
    let caret = lines[src + 1];
    let at = lines[src].find("no_such_func").unwrap();
    assert_eq!(
        caret.find('^'),
        Some(at),
        "the caret under the call:\n{why}"
    );
}

#[test]
fn the_network_and_left_out_built_ins_are_named_as_such() {
    let why = refused("package ahp.opt_in\n\ndeny contains \"x\" if {\n    http.send({\"method\": \"get\", \"url\": \"https://x\"}).status_code == 200\n}\n");
    assert!(
        why.contains("http.send") && why.contains("no network"),
        "{why}"
    );
    let why = refused("package ahp.opt_in\n\ndeny contains \"x\" if io.jwt.decode(input.principal)[0].alg == \"none\"\n");
    assert!(
        why.contains("io.jwt.decode is an OPA built-in this build"),
        "{why}"
    );
}

#[test]
fn an_unbound_variable_is_refused() {
    let why = refused("package ahp.opt_in\n\ndeny contains x if {\n    y == 1\n}\n");
    assert!(
        why.contains("p.rego:4:5") && why.contains("unsafe"),
        "{why}"
    );
}

#[test]
fn conflicting_rule_kinds_are_refused() {
    let why = refused("package ahp.opt_in\n\ndeny := {\"a\"}\n\ndeny contains \"b\" if true\n");
    assert!(
        why.contains("conflicting rules data.ahp.opt_in.deny"),
        "{why}"
    );
    assert!(
        why.contains("p.rego:5:1") && why.contains("at p.rego:3"),
        "{why}"
    );
}

#[test]
fn a_users_own_function_is_known_wherever_it_is_called_from() {
    let lib = "package lib\n\nbad(s) if startswith(s, \"x\")\n";
    let p = "package ahp.opt_in\n\nimport data.lib\n\ndeny contains s if {\n    some s in input.sections\n    lib.bad(s)\n}\n";
    let s = sources(&[("lib.rego", lib), ("p.rego", p)]);
    Rego::compile(&s, Enforcement::Enforce, Duration::from_millis(200)).unwrap();
}

#[test]
fn walk_time_and_the_other_opa_built_ins_decide() {
    let walk = "package ahp.opt_in\n\ndeny contains sprintf(\"%v\", [v]) if {\n    walk(input.sections, [_, v])\n    v == \"bad\"\n}\n";
    assert_eq!(opt_in_decision(walk, &["tone", "bad"]).deny, vec!["bad"]);
    let time = "package ahp.opt_in\n\ndeny contains \"the clock is set\" if time.now_ns() > 0\n";
    assert_eq!(opt_in_decision(time, &["tone"]).outcome, Outcome::Denied);
    let more = r#"package ahp.opt_in

deny contains "all of them" if {
    uuid.rfc4122("x") != ""
    yaml.unmarshal("a: 1").a == 1
    json.patch({"a": 1}, [{"op": "add", "path": "/b", "value": 2}]).b == 2
    [true, _] := json.match_schema({"a": 1}, {"type": "object"})
    units.parse_bytes("1KiB") == 1024
    graph.reachable({"a": ["b"], "b": []}, ["a"]) == {"a", "b"}
}
"#;
    let d = opt_in_decision(more, &["tone"]);
    assert_eq!(d.deny, vec!["all of them"], "{:?}", d.error);
}

/// A transform policy that reads `before` as a string is checked on a
/// section addition's input (`before` null) only where additions happen:
/// in front of the runtime's own AHP host.
#[test]
fn the_addition_example_is_checked_only_where_additions_happen() {
    let text = "package ahp.transform\n\ndeny contains \"shouting\" if upper(input.before) == input.before\n";
    let mut s = sources(&[("p.rego", text)]);
    Rego::compile(&s, Enforcement::Enforce, Duration::from_millis(200))
        .expect("the JSON-RPC runtime's transforms always have a before");
    s.additions = true;
    let e = match Rego::compile(&s, Enforcement::Enforce, Duration::from_millis(200)) {
        Ok(_) => panic!("accepted although it errs on an addition"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("documented example input 2 of `transform`"),
        "{e}"
    );
}
