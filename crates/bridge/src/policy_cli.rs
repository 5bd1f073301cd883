//! `policy test` and `policy eval`: the operator's Rego modules run from
//! the command line, as the bridge runs them, so a policy is tested in CI
//! and a decision reproduced from a logged input before anything is served.

mod report;

pub(crate) use report::ReportFormat;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{Config, ConfigError, Enforcement, LoadError, RegoConfig, RegoSources};
use crate::policy::testing::{self, TestFilter};
use crate::policy::Policy;
use crate::policy::{CompileError, Point};

/// `policy test`'s exit status when a test failed, erred or was skipped,
/// as `opa test`'s; 0 when all passed; a load error (a module that does not
/// compile, a bad `--run`, no test found) is 1.
pub(crate) const TESTS_DID_NOT_PASS: u8 = 2;

/// Why `policy test` or `policy eval` ran nothing: what was asked of it
/// and, where there is one, the cause.
#[derive(Debug, thiserror::Error)]
pub enum PolicyCliError {
    #[error("--run {0:?}")]
    Run(String, #[source] regex::Error),
    #[error("no .rego module under {0}")]
    NoModule(String),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Compile(#[from] CompileError),
    #[error("no test in {paths} matches --run {pattern:?}")]
    NoMatch { paths: String, pattern: String },
    #[error("no test_* rule in {0}")]
    NoTest(String),
    #[error("--point {point:?} is not one of {all}")]
    Point { point: String, all: String },
    #[error("{}: has no [policy.rego]", .0.display())]
    NoRego(PathBuf),
    #[error("cannot read {}", path.display())]
    Input {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not JSON", path.display())]
    NotJson {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}: the input must be a JSON object", .0.display())]
    NotObject(PathBuf),
    #[error(transparent)]
    Output(#[from] std::io::Error),
}

/// `policy test`'s arguments, as `opa test` names them.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// .rego files or folders of them (and .json data files).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Run only the tests whose full name (data.PACKAGE.test_NAME) matches
    /// this regular expression.
    #[arg(short, long, value_name = "REGEX")]
    pub run: Option<String>,
    /// Print every test's line (PASS, FAIL, ERROR, SKIPPED) with its time,
    /// not only the failures and errors.
    #[arg(short, long)]
    pub verbose: bool,
    /// Report which lines of each module the tests evaluated and which
    /// they did not.
    #[arg(short, long)]
    pub coverage: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = ReportFormat::Pretty)]
    pub format: ReportFormat,
    /// Skipped (todo_test_) tests do not make the exit status 2.
    #[arg(short = 'z', long)]
    pub exit_zero_on_skipped: bool,
}

/// Runs the tests of the modules under `args.paths` (files or folders of
/// `.rego`; `.json` files are data) and prints them as `args` asks. The
/// exit status: 0 when all passed, [`TESTS_DID_NOT_PASS`] otherwise; an
/// error when nothing could be run.
pub fn test_policies(args: &TestArgs, out: &mut impl Write) -> Result<u8, PolicyCliError> {
    let filter = args
        .run
        .as_deref()
        .map(|p| TestFilter::new(p).map_err(|e| PolicyCliError::Run(p.to_owned(), e)))
        .transpose()?;
    let sources = read_paths(&args.paths)?;
    if sources.modules.is_empty() {
        return Err(PolicyCliError::NoModule(shown(&args.paths)));
    }
    let options = testing::TestOptions {
        filter,
        coverage: args.coverage,
        ..testing::TestOptions::default()
    };
    let report = testing::run(&sources, &options)?;
    // A run that tested nothing fails (as `opa test --fail-on-empty`): a
    // CI job must not pass because its tests were not found.
    if report.results.is_empty() {
        return Err(match &args.run {
            Some(p) => PolicyCliError::NoMatch {
                paths: shown(&args.paths),
                pattern: p.clone(),
            },
            None => PolicyCliError::NoTest(shown(&args.paths)),
        });
    }
    report::print(&report, args.format, args.verbose, out)?;
    let counts = report::Counts::of(&report.results);
    let skipped_fail = counts.skipped > 0 && !args.exit_zero_on_skipped;
    Ok(if counts.failed + counts.errors > 0 || skipped_fail {
        TESTS_DID_NOT_PASS
    } else {
        0
    })
}

/// Decides the document in `input` at `point` with the `[policy.rego]` of
/// `config`; prints `{"deny": [...], "warn": [...]}` (and `"error"` when
/// the evaluation erred) on `out`, and on `warn` a warning when the
/// document's own `point` field names another point. Whether it decided
/// without an error.
pub fn eval_policy(
    config: &Path,
    point: &str,
    input: &Path,
    out: &mut impl Write,
    warn: &mut impl Write,
) -> Result<bool, PolicyCliError> {
    let point = Point::parse(point).ok_or_else(|| {
        let all: Vec<&str> = Point::ALL.iter().map(|p| p.as_str()).collect();
        PolicyCliError::Point {
            point: point.to_owned(),
            all: all.join(", "),
        }
    })?;
    let cfg = Config::load(config)?;
    let policy = Policy::from_config(&cfg)?;
    let rego = policy
        .rego()
        .ok_or_else(|| PolicyCliError::NoRego(config.to_owned()))?;
    let text = std::fs::read_to_string(input).map_err(|source| PolicyCliError::Input {
        path: input.to_owned(),
        source,
    })?;
    let doc: serde_json::Value =
        serde_json::from_str(&text).map_err(|source| PolicyCliError::NotJson {
            path: input.to_owned(),
            source,
        })?;
    if !doc.is_object() {
        return Err(PolicyCliError::NotObject(input.to_owned()));
    }
    // A logged input names the point it was decided at: deciding it at
    // another is most likely a slip, but --point is what was asked.
    if let Some(named) = doc
        .get("point")
        .filter(|p| p.as_str() != Some(point.as_str()))
    {
        writeln!(
            warn,
            "warning: {} has \"point\": {named}, but --point is {}: deciding at {}",
            input.display(),
            point.as_str(),
            point.as_str()
        )?;
    }
    // As the bridge would: within the policy's own deadline.
    let d = rego.decide_json(point, &doc, Duration::MAX);
    let mut shown = serde_json::json!({"deny": d.deny, "warn": d.warn});
    if let Some(e) = &d.error {
        shown["error"] = e.clone().into();
    }
    // A `Value` always serializes.
    writeln!(out, "{shown:#}")?;
    Ok(d.error.is_none())
}

/// The modules and data under `paths`, read as `[policy.rego]` reads them
/// (within its bounds): each `.json` file is data, every other path a
/// module, a folder of them or a glob.
fn read_paths(paths: &[PathBuf]) -> Result<RegoSources, ConfigError> {
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
    files.read()
}

fn shown(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
