//! `policy test`: the modules' tests, run as `opa test` runs them. A test
//! is a rule whose name starts with `test_`, in any package and at any
//! indentation: the rules are read from regorus's parsed modules, not from
//! the text. A `todo_test_` rule is reported SKIPPED and not run. A test
//! passes when its value is `true`; `false`, any other value or undefined
//! fails it; an evaluation that errs (a built-in's error, its deadline
//! passed) is an ERROR, its message kept whole.

mod coverage;

pub use coverage::{Coverage, FileCoverage};

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use regex::Regex;
use regorus::unstable::{Expr, Rule, RuleHead};
use regorus::{Engine, Value};

use super::{diagnostic, engine, timer, CompileError};
use ahp_bridge_base::config::RegoSources;

/// Each test's deadline: a test that loops is an ERROR, not a hang.
const TEST_TIMEOUT: Duration = Duration::from_secs(10);

/// OPA's prefixes: a test, and a test written down but not run yet.
const TEST_PREFIX: &str = "test_";
const TODO_PREFIX: &str = "todo_test_";

/// `--run`: the tests whose full name (`data.PACKAGE.test_NAME`) matches.
#[derive(Debug, Clone)]
pub struct TestFilter(Regex);

impl TestFilter {
    /// The filter of a regular expression, or why it is not one.
    pub fn new(pattern: &str) -> Result<Self, regex::Error> {
        Regex::new(pattern).map(Self)
    }

    fn admits(&self, full_name: &str) -> bool {
        self.0.is_match(full_name)
    }
}

/// How to run the tests.
#[derive(Debug, Clone)]
pub struct TestOptions {
    /// Only the tests this admits (all without one).
    pub filter: Option<TestFilter>,
    /// Gather which lines of each module the tests evaluated.
    pub coverage: bool,
    /// Each test's deadline.
    pub timeout: Duration,
}

impl Default for TestOptions {
    fn default() -> Self {
        Self {
            filter: None,
            coverage: false,
            timeout: TEST_TIMEOUT,
        }
    }
}

/// What one test came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TestOutcome {
    Pass,
    /// Its value was not `true`: `false`, `undefined` or the value.
    Fail(String),
    /// Its evaluation erred: regorus's message, lines and all.
    Error(String),
    /// A `todo_test_` rule: not run.
    Skipped,
}

impl TestOutcome {
    /// As `opa test` prints it.
    pub fn as_str(&self) -> &'static str {
        match self {
            TestOutcome::Pass => "PASS",
            TestOutcome::Fail(_) => "FAIL",
            TestOutcome::Error(_) => "ERROR",
            TestOutcome::Skipped => "SKIPPED",
        }
    }
}

/// One test's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestResult {
    /// `data.PACKAGE`.
    pub package: String,
    /// The rule's name (`test_x`; `a.test_x` for a rule written `a.test_x`).
    pub name: String,
    /// The module that defines it, and where its (first) definition starts.
    pub module: String,
    pub row: u32,
    pub col: u32,
    pub outcome: TestOutcome,
    /// How long it ran (zero when skipped).
    pub duration: Duration,
}

impl TestResult {
    /// `data.PACKAGE.test_NAME`.
    pub fn full_name(&self) -> String {
        format!("{}.{}", self.package, self.name)
    }
}

/// The results, in module order and in each module in rule order, and the
/// coverage when asked for.
#[derive(Debug, Clone)]
pub struct Report {
    pub results: Vec<TestResult>,
    pub coverage: Option<Coverage>,
}

/// A test rule found in a module.
struct Found {
    package: String,
    name: String,
    module: String,
    row: u32,
    col: u32,
    todo: bool,
}

impl Found {
    fn full_name(&self) -> String {
        format!("{}.{}", self.package, self.name)
    }
}

/// Runs the tests of `sources` that `options` admits; the modules must
/// compile.
pub fn run(sources: &RegoSources, options: &TestOptions) -> Result<Report, CompileError> {
    let (mut prototype, _) = engine(sources)?;
    let found = discover(&mut prototype)?;
    let mut gathered = options
        .coverage
        .then(|| coverage::Gatherer::new(prototype.get_modules()));
    if options.coverage {
        prototype.set_enable_coverage(true);
    }
    let mut results = Vec::new();
    for test in found {
        let full_name = test.full_name();
        if options
            .filter
            .as_ref()
            .is_some_and(|f| !f.admits(&full_name))
        {
            continue;
        }
        let (outcome, duration) = if test.todo {
            (TestOutcome::Skipped, Duration::ZERO)
        } else {
            // A clone per test: one test's state (and deadline) is not the next's.
            let mut e = prototype.clone();
            e.set_execution_timer_config(timer(options.timeout));
            let started = Instant::now();
            let value = e.eval_rule(full_name);
            let duration = started.elapsed();
            if let Some(g) = gathered.as_mut() {
                g.add(&e);
            }
            (judged(value), duration)
        };
        results.push(TestResult {
            package: test.package,
            name: test.name,
            module: test.module,
            row: test.row,
            col: test.col,
            outcome,
            duration,
        });
    }
    Ok(Report {
        results,
        coverage: gathered.map(coverage::Gatherer::finish),
    })
}

/// A test's value as OPA judges it: only `true` passes. Generic over
/// regorus's error (this crate names no `anyhow` type).
fn judged<E: std::fmt::Display>(value: Result<Value, E>) -> TestOutcome {
    match value {
        Ok(Value::Bool(true)) => TestOutcome::Pass,
        Ok(Value::Undefined) => TestOutcome::Fail("undefined".to_owned()),
        Ok(v) => TestOutcome::Fail(format!("{v}")),
        Err(err) => TestOutcome::Error(diagnostic(&err)),
    }
}

/// Every test rule of the engine's modules, in module order, each name
/// once (a rule defined by several bodies is one test). A function is no
/// test: it cannot be run without arguments.
fn discover(engine: &mut Engine) -> Result<Vec<Found>, CompileError> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for module in engine.get_modules() {
        let package = regorus::utils::get_path_string(&module.package.refr, Some("data"))
            .map_err(|e| CompileError::one(diagnostic(&e)))?;
        let file = module.package.span.source.file().clone();
        for rule in &module.policy {
            let (refr, span) = match rule.as_ref() {
                Rule::Spec {
                    head: RuleHead::Compr { refr, .. } | RuleHead::Set { refr, .. },
                    span,
                    ..
                } => (refr, span),
                Rule::Default {
                    refr, args, span, ..
                } if args.is_empty() => (refr, span),
                _ => continue,
            };
            let Some((name, todo)) = test_name(refr) else {
                continue;
            };
            if !seen.insert(format!("{package}.{name}")) {
                continue;
            }
            out.push(Found {
                package: package.clone(),
                name,
                module: file.clone(),
                row: span.line,
                col: span.col,
                todo,
            });
        }
    }
    Ok(out)
}

/// The head's path up to its first part named `test_*` or `todo_test_*`
/// (as OPA reads a head: `a.test_x[k]` is the test `a.test_x`), and
/// whether it is a todo; `None` for a rule that is no test.
fn test_name(head: &Expr) -> Option<(String, bool)> {
    let mut parts = Vec::new();
    ground_prefix(head, &mut parts);
    let at = parts
        .iter()
        .position(|p| p.starts_with(TEST_PREFIX) || p.starts_with(TODO_PREFIX))?;
    Some((parts[..=at].join("."), parts[at].starts_with(TODO_PREFIX)))
}

/// The names of a head's path up to its first part that is not a name or
/// a string (`a.b["c"][k]` gives `a`, `b`, `c`); whether it was all names.
fn ground_prefix(e: &Expr, parts: &mut Vec<String>) -> bool {
    match e {
        Expr::Var { span, .. } => {
            parts.push(span.text().to_owned());
            true
        }
        Expr::RefDot { refr, field, .. } => {
            let ground = ground_prefix(refr, parts);
            if ground {
                parts.push(field.0.text().to_owned());
            }
            ground
        }
        Expr::RefBrack { refr, index, .. } => {
            if !ground_prefix(refr, parts) {
                return false;
            }
            match index.as_ref() {
                Expr::String {
                    value: Value::String(s),
                    ..
                } => {
                    parts.push(s.to_string());
                    true
                }
                _ => false,
            }
        }
        _ => false,
    }
}

#[cfg(test)]
#[path = "testing_tests.rs"]
mod tests;
