use std::time::Duration;

use super::*;
use crate::rego::tests::sources;

fn run_all(modules: &[(&str, &str)]) -> Vec<TestResult> {
    run(&sources(modules), &TestOptions::default())
        .unwrap()
        .results
}

/// Each result as `FULL_NAME OUTCOME`.
fn outcomes(results: &[TestResult]) -> Vec<String> {
    results
        .iter()
        .map(|r| format!("{} {}", r.full_name(), r.outcome.as_str()))
        .collect()
}

const INDENTED: &str = "package p

    test_indented_fails if {
        1 == 2
    }

test_at_column_zero if true

  test_two_bodies if false
  test_two_bodies if true

helper_test_is_no_test if false
";

#[test]
fn a_test_at_any_indentation_is_found_and_can_fail() {
    let results = run_all(&[("p.rego", INDENTED)]);
    assert_eq!(
        outcomes(&results),
        [
            "data.p.test_indented_fails FAIL",
            "data.p.test_at_column_zero PASS",
            // Several bodies, one test: true when any body holds.
            "data.p.test_two_bodies PASS",
        ]
    );
    assert_eq!(results[0].outcome, TestOutcome::Fail("undefined".into()));
    assert_eq!((results[0].row, results[0].col), (3, 5), "where it starts");
    assert_eq!(results[0].module, "p.rego");
}

#[test]
fn tests_in_any_package_and_a_ref_head_are_found() {
    let results = run_all(&[
        ("a.rego", "package a.b\n\ntest_one := 1\n"),
        ("c.rego", "package c\n\nsuite.test_nested if true\n"),
    ]);
    assert_eq!(
        outcomes(&results),
        ["data.a.b.test_one FAIL", "data.c.suite.test_nested PASS"]
    );
    // Only `true` passes: another value is a failure naming it.
    assert_eq!(results[0].outcome, TestOutcome::Fail("1".into()));
}

#[test]
fn a_todo_test_is_skipped_not_run() {
    let results = run_all(&[(
        "p.rego",
        "package p\n\ntodo_test_later if {\n    1 == 2\n}\n\ntest_now if true\n",
    )]);
    assert_eq!(
        outcomes(&results),
        ["data.p.todo_test_later SKIPPED", "data.p.test_now PASS"]
    );
    assert_eq!(results[0].duration, Duration::ZERO);
}

#[test]
fn run_keeps_the_tests_whose_full_name_matches() {
    let options = TestOptions {
        filter: Some(TestFilter::new(r"^data\.p\.test_at").unwrap()),
        ..TestOptions::default()
    };
    let report = run(&sources(&[("p.rego", INDENTED)]), &options).unwrap();
    assert_eq!(
        outcomes(&report.results),
        ["data.p.test_at_column_zero PASS"]
    );
    assert!(TestFilter::new("(").is_err(), "a bad pattern is refused");
}

#[test]
fn an_evaluation_error_is_an_error_not_a_failure() {
    let results = run_all(&[(
        "p.rego",
        "package p\n\ntest_divides if {\n    x := 1 / 0\n    x > 0\n}\n",
    )]);
    let TestOutcome::Error(why) = &results[0].outcome else {
        panic!("{results:?}");
    };
    assert!(why.contains("p.rego:4"), "its place, with its lines: {why}");
}

#[test]
fn a_test_past_its_deadline_is_an_error() {
    let options = TestOptions {
        timeout: Duration::from_millis(1),
        ..TestOptions::default()
    };
    // Far more work than a millisecond's: a million numbers walked.
    let report = run(
        &sources(&[(
            "p.rego",
            "package p\n\ntest_long if count([x | some x in numbers.range(1, 1000000)]) > 0\n",
        )]),
        &options,
    )
    .unwrap();
    let TestOutcome::Error(why) = &report.results[0].outcome else {
        panic!("{:?}", report.results);
    };
    assert!(why.contains("time limit"), "{why}");
}

const COVERED: &str = "package p

allow if {
    input.x == 1
}

other if {
    input.y == 2
}

test_allow if allow with input as {\"x\": 1}
";

const UNTOUCHED: &str = "package q

# a comment
never if {
    input.z == 3
}
";

#[test]
fn coverage_names_the_lines_the_tests_reached() {
    let options = TestOptions {
        coverage: true,
        ..TestOptions::default()
    };
    let report = run(
        &sources(&[("p.rego", COVERED), ("q.rego", UNTOUCHED)]),
        &options,
    )
    .unwrap();
    assert_eq!(outcomes(&report.results), ["data.p.test_allow PASS"]);
    let coverage = report.coverage.expect("asked for");
    let p = &coverage.files[0];
    assert_eq!(p.path, "p.rego");
    assert!(p.covered.contains(&4) && p.covered.contains(&11), "{p:?}");
    assert!(p.not_covered.contains(&8), "{p:?}");
    assert!(!p.not_covered.contains(&4), "{p:?}");
    // A module no test entered: its rules' lines, not covered.
    let q = &coverage.files[1];
    assert_eq!((q.path.as_str(), q.covered.len()), ("q.rego", 0));
    assert_eq!(q.not_covered.iter().copied().collect::<Vec<_>>(), [4, 5]);
    assert!(coverage.percent() > 0.0 && coverage.percent() < 100.0);
    // Without asking, none.
    let plain = run(&sources(&[("p.rego", COVERED)]), &TestOptions::default()).unwrap();
    assert!(plain.coverage.is_none());
}
