//! `policy test`: every `test_*` rule of the modules, as `opa test` runs
//! them: a test passes when its rule is `true`; false, undefined or an
//! error fails it.

use std::collections::BTreeSet;
use std::time::Duration;

use regex::Regex;
use regorus::Value;

use super::{diagnostic, engine, timer, CompileError};
use crate::config::RegoSources;

/// One test's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestResult {
    /// `data.PACKAGE.test_NAME`.
    pub rule: String,
    /// The module that defines it.
    pub module: String,
    pub passed: bool,
    /// Why it failed: `false`, `undefined` or the error.
    pub why: Option<String>,
}

/// Each test's deadline: a test that loops is a failure, not a hang.
const TEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs every test of `sources`, in module order; the modules must compile.
pub fn run(sources: &RegoSources) -> Result<Vec<TestResult>, CompileError> {
    let (prototype, _) = engine(sources)?;
    // Each module's package (`data.PKG`), in the order they were added.
    let packages = prototype
        .get_packages()
        .map_err(|e| CompileError::one(diagnostic(&e)))?;
    // A rule head at the start of a line, as `opa fmt` writes rules.
    let head = Regex::new(r"(?m)^(test_[A-Za-z0-9_]*)\b").expect("valid");
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for ((module, text), pkg) in sources.modules.iter().zip(&packages) {
        for name in head.captures_iter(text).map(|c| c[1].to_owned()) {
            let rule = format!("{pkg}.{name}");
            // A test defined by several bodies is one test.
            if !seen.insert(rule.clone()) {
                continue;
            }
            let mut e = prototype.clone();
            e.set_execution_timer_config(timer(TEST_TIMEOUT));
            let why = match e.eval_rule(rule.clone()) {
                Ok(Value::Bool(true)) => None,
                Ok(Value::Undefined) => Some("undefined".to_owned()),
                Ok(v) => Some(format!("{v}")),
                Err(err) => Some(diagnostic(&err)),
            };
            out.push(TestResult {
                rule,
                module: module.clone(),
                passed: why.is_none(),
                why,
            });
        }
    }
    Ok(out)
}
