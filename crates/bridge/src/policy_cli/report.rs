//! `policy test`'s output, in `opa test`'s shapes: pretty (a line per
//! failure or error, every test's line with `--verbose`, then the count) or
//! one JSON document; with `--coverage`, each module's covered and not
//! covered lines.

use std::collections::BTreeSet;
use std::io::Write;

use serde_json::{json, Value};

use crate::policy::testing::{Coverage, FileCoverage, Report, TestOutcome, TestResult};

/// How `policy test` prints its results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    /// A line per failure (per test with --verbose) and a count.
    Pretty,
    /// One JSON document on stdout: the results (with --coverage, the
    /// coverage report holding them), in `opa test --format json`'s shape.
    Json,
}

/// The results by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Counts {
    pub(super) passed: usize,
    pub(super) failed: usize,
    pub(super) skipped: usize,
    pub(super) errors: usize,
}

impl Counts {
    pub(super) fn of(results: &[TestResult]) -> Self {
        let mut c = Self::default();
        for r in results {
            match r.outcome {
                TestOutcome::Pass => c.passed += 1,
                TestOutcome::Fail(_) => c.failed += 1,
                TestOutcome::Skipped => c.skipped += 1,
                TestOutcome::Error(_) => c.errors += 1,
            }
        }
        c
    }
}

pub(super) fn print(
    report: &Report,
    format: ReportFormat,
    verbose: bool,
    out: &mut impl Write,
) -> std::io::Result<()> {
    match format {
        ReportFormat::Pretty => pretty(report, verbose, out),
        ReportFormat::Json => {
            let results: Vec<Value> = report.results.iter().map(result_json).collect();
            let doc = match &report.coverage {
                // As `opa test --coverage`'s report, with the results in it.
                Some(c) => {
                    let mut doc = coverage_json(c);
                    doc["tests"] = results.into();
                    doc
                }
                None => results.into(),
            };
            writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)
        }
    }
}

/// As `opa test [-v]` prints: each shown test under its `FILE:ROW:`, an
/// error's lines (and a failure's value) indented under it; a rule of
/// dashes; the coverage when asked; the count.
fn pretty(report: &Report, verbose: bool, out: &mut impl Write) -> std::io::Result<()> {
    let mut last_module: Option<&str> = None;
    for r in &report.results {
        if !verbose && r.outcome == TestOutcome::Pass {
            continue;
        }
        if last_module.is_some_and(|m| m != r.module) {
            writeln!(out)?;
        }
        last_module = Some(&r.module);
        writeln!(out, "{}:{}:", r.module, r.row)?;
        match &r.outcome {
            TestOutcome::Skipped => writeln!(out, "{}: SKIPPED", r.full_name())?,
            o => writeln!(out, "{}: {} ({:?})", r.full_name(), o.as_str(), r.duration)?,
        }
        if let TestOutcome::Fail(why) | TestOutcome::Error(why) = &r.outcome {
            for line in why.lines() {
                writeln!(out, "  {line}")?;
            }
        }
    }
    if last_module.is_some() {
        writeln!(out, "{}", "-".repeat(80))?;
    }
    if let Some(c) = &report.coverage {
        coverage_pretty(c, out)?;
    }
    let n = Counts::of(&report.results);
    // CI's log reader takes the line with "N passed, N failed" as the count.
    writeln!(
        out,
        "policy test: {} passed, {} failed, {} skipped, {} errors",
        n.passed, n.failed, n.skipped, n.errors
    )
}

fn coverage_pretty(c: &Coverage, out: &mut impl Write) -> std::io::Result<()> {
    let total = c.covered_lines() + c.not_covered_lines();
    writeln!(
        out,
        "coverage: {:.2}% ({} of {total} lines)",
        c.percent(),
        c.covered_lines()
    )?;
    for f in &c.files {
        writeln!(out, "{}: {:.2}%", f.path, f.percent())?;
        writeln!(out, "  covered: {}", shown_ranges(&f.covered))?;
        writeln!(out, "  not covered: {}", shown_ranges(&f.not_covered))?;
    }
    Ok(())
}

/// `3-5, 8, 10-12`, or `none`.
fn shown_ranges(lines: &BTreeSet<u32>) -> String {
    let shown: Vec<String> = ranges(lines)
        .into_iter()
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    if shown.is_empty() {
        "none".to_owned()
    } else {
        shown.join(", ")
    }
}

/// Consecutive lines as (first, last) runs.
fn ranges(lines: &BTreeSet<u32>) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for &l in lines {
        match out.last_mut() {
            Some((_, end)) if end.checked_add(1) == Some(l) => *end = l,
            _ => out.push((l, l)),
        }
    }
    out
}

/// One result as `opa test --format json` writes it: `fail`, `skip` and
/// `error` only when so; the duration in nanoseconds.
fn result_json(r: &TestResult) -> Value {
    let mut v = json!({
        "location": {"file": r.module, "row": r.row, "col": r.col},
        "package": r.package,
        "name": r.name,
        "duration": u64::try_from(r.duration.as_nanos()).unwrap_or(u64::MAX),
    });
    match &r.outcome {
        TestOutcome::Pass => {}
        TestOutcome::Fail(_) => v["fail"] = true.into(),
        TestOutcome::Skipped => v["skip"] = true.into(),
        TestOutcome::Error(message) => v["error"] = json!({"message": message}),
    }
    v
}

/// OPA's coverage report: per file its covered and not covered runs of
/// lines, their counts and the percent; the same totals for all files.
fn coverage_json(c: &Coverage) -> Value {
    let files: serde_json::Map<String, Value> = c
        .files
        .iter()
        .map(|f| (f.path.clone(), file_json(f)))
        .collect();
    json!({
        "files": files,
        "covered_lines": c.covered_lines(),
        "not_covered_lines": c.not_covered_lines(),
        "coverage": rounded(c.percent()),
    })
}

fn file_json(f: &FileCoverage) -> Value {
    let runs = |lines: &BTreeSet<u32>| -> Vec<Value> {
        ranges(lines)
            .into_iter()
            .map(|(a, b)| json!({"start": {"row": a}, "end": {"row": b}}))
            .collect()
    };
    json!({
        "covered": runs(&f.covered),
        "not_covered": runs(&f.not_covered),
        "covered_lines": f.covered.len(),
        "not_covered_lines": f.not_covered.len(),
        "coverage": rounded(f.percent()),
    })
}

/// A percent to two decimals.
fn rounded(p: f64) -> f64 {
    (p * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_shown_as_runs() {
        let lines: BTreeSet<u32> = [3, 4, 5, 8, 10, 11].into();
        assert_eq!(shown_ranges(&lines), "3-5, 8, 10-11");
        assert_eq!(shown_ranges(&BTreeSet::new()), "none");
    }
}
