use super::*;

fn s(text: &str) -> Value {
    Value::Scalar {
        text: text.into(),
        plain: true,
    }
}

fn q(text: &str) -> Value {
    Value::Scalar {
        text: text.into(),
        plain: false,
    }
}

fn list(items: &[&str]) -> Value {
    Value::List(items.iter().map(|i| i.to_string()).collect())
}

fn get(m: &Mapping, key: &str) -> Value {
    m.iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("no key {key} in {m:?}"))
}

#[test]
fn scalars_plain_and_quoted() {
    let m = parse(
        "name: alpha\n\
         description: Use when: the user says alpha # a comment\n\
         single: 'it''s # not a comment'\n\
         double: \"tab\\there \\\"q\\\" \\u00e9\"\n\
         flag: true\n\
         quoted_flag: \"true\"\n\
         none: ~\n\
         empty:\n\
         \"quoted key\": x\n",
    )
    .unwrap();
    assert_eq!(get(&m, "name"), s("alpha"));
    assert_eq!(get(&m, "description"), s("Use when: the user says alpha"));
    assert_eq!(get(&m, "single"), q("it's # not a comment"));
    assert_eq!(get(&m, "double"), q("tab\there \"q\" é"));
    assert_eq!(get(&m, "flag"), s("true"));
    assert_eq!(get(&m, "quoted_flag"), q("true"));
    assert_eq!(get(&m, "none"), Value::Null);
    assert_eq!(get(&m, "empty"), Value::Null);
    assert_eq!(get(&m, "quoted key"), s("x"));
    assert_eq!(m.len(), 9);
}

#[test]
fn plain_and_quoted_scalars_continue_on_indented_lines() {
    let m = parse("description: one\n  two\n  three\nname: x\nq: \"a\n  b\"\n").unwrap();
    assert_eq!(get(&m, "description"), s("one two three"));
    assert_eq!(get(&m, "name"), s("x"));
    assert_eq!(get(&m, "q"), q("a b"));
}

#[test]
fn lists_flow_and_block() {
    let m = parse(
        "tools: [view, \"grep\", 'a, b']\n\
         empty: []\n\
         block:\n  - one\n  - \"two\"\n\n  - three # c\n\
         margin:\n- a\n- b\n\
         multi: [x,\n  y]\n\
         after: 1\n",
    )
    .unwrap();
    assert_eq!(get(&m, "tools"), list(&["view", "grep", "a, b"]));
    assert_eq!(get(&m, "empty"), list(&[]));
    assert_eq!(get(&m, "block"), list(&["one", "two", "three"]));
    assert_eq!(get(&m, "margin"), list(&["a", "b"]));
    assert_eq!(get(&m, "multi"), list(&["x", "y"]));
    assert_eq!(get(&m, "after"), s("1"));
}

#[test]
fn nested_mappings_are_skipped_not_failed() {
    let m = parse(
        "metadata:\n  a: b\n  deeper:\n    c: d\n\
         flow: {a: 1, b: [2]}\n\
         hooks:\n  - matcher: x\n    command: y\n\
         nested_list: [[a], b]\n\
         name: after\n",
    )
    .unwrap();
    assert_eq!(get(&m, "metadata"), Value::Nested);
    assert_eq!(get(&m, "flow"), Value::Nested);
    assert_eq!(get(&m, "hooks"), Value::Nested);
    assert_eq!(get(&m, "nested_list"), Value::Nested);
    assert_eq!(get(&m, "name"), s("after"));
}

#[test]
fn block_scalars_literal_and_folded() {
    let m = parse(
        "lit: |\n  line one\n  line two\n\
         fold: >-\n  folded\n  text\n\n  para\n\
         keep: |+\n  k\n\n\
         name: x\n",
    )
    .unwrap();
    assert_eq!(get(&m, "lit"), q("line one\nline two\n"));
    assert_eq!(get(&m, "fold"), q("folded text\npara"));
    assert_eq!(get(&m, "keep"), q("k\n\n"));
    assert_eq!(get(&m, "name"), s("x"));
}

#[test]
fn comments_and_blank_lines_are_ignored() {
    let m = parse("# top\n\nname: a\n   \n# end\n").unwrap();
    assert_eq!(m, vec![("name".to_string(), s("a"))]);
}

#[test]
fn malformed_input_names_the_line() {
    let cases = [
        ("name: a\nname: b\n", 2, "twice"),
        ("just text\n", 1, "expected `key: value`"),
        ("  indented: x\n", 1, "indented line"),
        ("a: \"open\n", 1, "never closed"),
        ("a: [x, y\n", 1, "never closed"),
        ("a: \"x\" y\n", 1, "after the closing quote"),
        ("a: ok\nb: \"\\q\"\n", 2, "unknown escape"),
        ("- item\n", 1, "expected"),
        ("a: ['x' y]\n", 1, "expected ','"),
    ];
    for (text, line, fragment) in cases {
        let err = parse(text).unwrap_err();
        assert_eq!(err.line, line, "{text:?}: {err}");
        assert!(err.fault.to_string().contains(fragment), "{text:?}: {err}");
    }
}
