//! `policy test` and `policy eval`: the operator's Rego modules run from
//! the command line, as the bridge runs them, so a policy is tested in CI
//! and a decision reproduced from a logged input before anything is served.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};

use crate::config::{Config, Enforcement, RegoConfig, RegoSources};
use crate::policy::rego::{testing, Point};
use crate::policy::Policy;

/// Runs every `test_*` rule of the modules under `paths` (files or folders
/// of `.rego`; `.json` files are data); prints PASS or FAIL per test and a
/// count. Whether all passed.
pub fn test(paths: &[PathBuf], out: &mut impl Write) -> anyhow::Result<bool> {
    let sources = read_paths(paths)?;
    if sources.modules.is_empty() {
        bail!("no .rego module under {}", shown(paths));
    }
    let results = testing::run(&sources).map_err(|e| anyhow!("{e}"))?;
    let failed = results.iter().filter(|r| !r.passed).count();
    for r in &results {
        match &r.why {
            None => writeln!(out, "PASS {} ({})", r.rule, r.module)?,
            Some(why) => writeln!(out, "FAIL {} ({}): {why}", r.rule, r.module)?,
        }
    }
    if results.is_empty() {
        writeln!(out, "no test_* rule in {}", shown(paths))?;
        return Ok(false);
    }
    writeln!(
        out,
        "policy test: {} passed, {failed} failed",
        results.len() - failed
    )?;
    Ok(failed == 0)
}

/// Decides the document in `input` at `point` with the `[policy.rego]` of
/// `config`; prints `{"deny": [...], "warn": [...]}` (and `"error"` when
/// the evaluation erred). Whether it decided without an error.
pub fn eval(
    config: &Path,
    point: &str,
    input: &Path,
    out: &mut impl Write,
) -> anyhow::Result<bool> {
    let point = Point::parse(point).ok_or_else(|| {
        let all: Vec<&str> = Point::ALL.iter().map(|p| p.as_str()).collect();
        anyhow!("--point {point:?} is not one of {}", all.join(", "))
    })?;
    let cfg = Config::load(config)?;
    let policy = Policy::from_config(&cfg)?;
    let rego = policy
        .rego()
        .ok_or_else(|| anyhow!("{}: has no [policy.rego]", config.display()))?;
    let text = std::fs::read_to_string(input)
        .with_context(|| format!("cannot read {}", input.display()))?;
    let doc: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", input.display()))?;
    if !doc.is_object() {
        bail!("{}: the input must be a JSON object", input.display());
    }
    // As the bridge would: within the policy's own deadline.
    let d = rego.decide_json(point, &doc, Duration::MAX);
    let mut shown = serde_json::json!({"deny": d.deny, "warn": d.warn});
    if let Some(e) = &d.error {
        shown["error"] = e.clone().into();
    }
    writeln!(out, "{}", serde_json::to_string_pretty(&shown)?)?;
    Ok(d.error.is_none())
}

/// The modules and data under `paths`, read as `[policy.rego]` reads them
/// (within its bounds): each `.json` file is data, every other path a
/// module, a folder of them or a glob.
fn read_paths(paths: &[PathBuf]) -> anyhow::Result<RegoSources> {
    let (data, modules) = paths
        .iter()
        .cloned()
        .partition(|p| p.extension().is_some_and(|e| e == "json"));
    let files = RegoConfig {
        modules,
        data,
        enforcement: Enforcement::Enforce,
        timeout: Duration::MAX,
    };
    Ok(files.read()?)
}

fn shown(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
