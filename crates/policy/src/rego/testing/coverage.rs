//! `policy test --coverage`: which lines of each module the tests
//! evaluated. regorus counts a line of a module as covered when the
//! evaluation reached an expression on it; each test runs on an engine of
//! its own, so the reports of all tests are merged: a line is covered when
//! any test reached it.

use std::collections::BTreeSet;

use regorus::unstable::{Module, Ref};
use regorus::Engine;

/// The lines of one module.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileCoverage {
    /// The module's name, as `policy test` names it.
    pub path: String,
    /// Lines (1-based) with an expression some test evaluated.
    pub covered: BTreeSet<u32>,
    /// Lines with an expression no test evaluated.
    pub not_covered: BTreeSet<u32>,
}

impl FileCoverage {
    /// Covered lines out of all counted, in percent; 100 with none counted.
    pub fn percent(&self) -> f64 {
        percent(self.covered.len(), self.not_covered.len())
    }
}

/// Every module's lines, in module order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Coverage {
    pub files: Vec<FileCoverage>,
}

impl Coverage {
    pub fn covered_lines(&self) -> usize {
        self.files.iter().map(|f| f.covered.len()).sum()
    }

    pub fn not_covered_lines(&self) -> usize {
        self.files.iter().map(|f| f.not_covered.len()).sum()
    }

    /// Covered lines of all modules out of all counted, in percent.
    pub fn percent(&self) -> f64 {
        percent(self.covered_lines(), self.not_covered_lines())
    }
}

fn percent(covered: usize, not_covered: usize) -> f64 {
    let total = covered + not_covered;
    if total == 0 {
        return 100.0;
    }
    // Line counts are far below 2^52: exact as f64.
    100.0 * covered as f64 / total as f64
}

/// The tests' reports, merged as they come.
pub(super) struct Gatherer {
    files: Vec<FileCoverage>,
    /// Per module: whether any test's report had it. regorus leaves out a
    /// module no evaluation entered, so such a module's lines come from
    /// its rules instead ([`rule_lines`]).
    reached: Vec<bool>,
    fallback: Vec<BTreeSet<u32>>,
}

impl Gatherer {
    pub(super) fn new(modules: &[Ref<Module>]) -> Self {
        let files: Vec<FileCoverage> = modules
            .iter()
            .map(|m| FileCoverage {
                path: m.package.span.source.file().clone(),
                ..FileCoverage::default()
            })
            .collect();
        Self {
            reached: vec![false; files.len()],
            fallback: modules.iter().map(|m| rule_lines(m)).collect(),
            files,
        }
    }

    /// The lines one test's engine evaluated.
    pub(super) fn add(&mut self, engine: &Engine) {
        // regorus's report only walks the modules' expressions: it has no
        // failure of its own to report, and a test's result stands without it.
        let Ok(report) = engine.get_coverage_report() else {
            return;
        };
        for file in report.files {
            let Some(i) = self.files.iter().position(|f| f.path == file.path) else {
                continue;
            };
            self.reached[i] = true;
            let merged = &mut self.files[i];
            merged.covered.extend(file.covered);
            merged.not_covered.extend(file.not_covered);
        }
    }

    pub(super) fn finish(mut self) -> Coverage {
        for ((file, reached), fallback) in
            self.files.iter_mut().zip(self.reached).zip(self.fallback)
        {
            if !reached {
                file.not_covered = fallback;
            }
            // A line with an expression one test reached and another that no
            // test did is covered (as OPA counts a line).
            let covered = &file.covered;
            file.not_covered.retain(|l| !covered.contains(l));
        }
        Coverage { files: self.files }
    }
}

/// The lines of a module's rules that hold code: not blank, not a comment,
/// not only brackets. A module no test entered has these not covered.
fn rule_lines(module: &Module) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    for rule in &module.policy {
        let span = rule.span();
        for (line, text) in (span.line..).zip(span.text().lines()) {
            let code = text.trim();
            let only_brackets = code.chars().all(|c| "{}[]()".contains(c));
            if !code.starts_with('#') && !only_brackets {
                out.insert(line);
            }
        }
    }
    out
}
