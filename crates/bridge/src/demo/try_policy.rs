//! `demo --policy DIR [--report]`: a folder of Rego modules tried in the
//! offline demo, as its `[policy.rego]`, without writing a config. The
//! folder is read as the examples in examples/policy/ are laid out: the
//! modules, their tests and a worked input beside them.

use std::path::{Path, PathBuf};

use crate::config::{Enforcement, RegoConfig, DEFAULT_REGO_TIMEOUT};

/// What in DIR is not the policy in force: `policy test`'s modules, and
/// the input document `policy eval --input` is given.
const TEST_SUFFIX: &str = "_test.rego";
const INPUT_FILE: &str = "input.json";

/// Why `--policy DIR` cannot be run.
#[derive(Debug, thiserror::Error)]
pub enum TryPolicyError {
    #[error("--policy {}", dir.display())]
    Read {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--policy {}: no .rego module in it (*{TEST_SUFFIX} files are `policy test`'s, not the policy's)", .0.display())]
    NoModule(PathBuf),
}

/// `--policy DIR` and `--report`: the folder to run, and whether only to
/// report its denies.
#[derive(Debug, Clone)]
pub struct TryPolicy {
    pub dir: PathBuf,
    pub report: bool,
}

impl TryPolicy {
    /// Its `[policy.rego]` (see [`rego_of`]).
    pub fn rego(&self) -> Result<RegoConfig, TryPolicyError> {
        rego_of(&self.dir, self.report)
    }

    /// The line saying what the demo runs: the folder, the revision every
    /// decision names, the mode and the files.
    pub fn describe(&self, rego: &RegoConfig, revision: &str) -> String {
        let mode = match rego.enforcement {
            Enforcement::Enforce => "enforce: a deny refuses",
            Enforcement::Report => "report: a deny is recorded as would_deny, nothing is refused",
        };
        format!(
            "policy {} (revision {revision}; {mode}; modules: {}; data: {})",
            self.dir.display(),
            names(&rego.modules),
            names(&rego.data)
        )
    }
}

/// The `[policy.rego]` of `dir`: each `*.rego` but `*_test.rego` a module,
/// each `*.json` but `input.json` data; enforced, or only reported with
/// `report`. A folder without a module is an error naming it; whether the
/// modules compile is for `Policy::from_config` to say (naming the file).
fn rego_of(dir: &Path, report: bool) -> Result<RegoConfig, TryPolicyError> {
    let mut modules = Vec::new();
    let mut data = Vec::new();
    let unread = |source| TryPolicyError::Read {
        dir: dir.to_owned(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(unread)? {
        let path = entry.map_err(unread)?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !path.is_file() {
            continue;
        }
        if name.ends_with(".rego") && !name.ends_with(TEST_SUFFIX) {
            modules.push(path);
        } else if name.ends_with(".json") && name != INPUT_FILE {
            data.push(path);
        }
    }
    if modules.is_empty() {
        return Err(TryPolicyError::NoModule(dir.to_owned()));
    }
    modules.sort();
    data.sort();
    Ok(RegoConfig {
        modules,
        data,
        enforcement: if report {
            Enforcement::Report
        } else {
            Enforcement::Enforce
        },
        timeout: DEFAULT_REGO_TIMEOUT,
    })
}

/// The names of `paths` (the files of one folder), for the line saying
/// what the demo runs.
fn names(paths: &[PathBuf]) -> String {
    let names: Vec<String> = paths
        .iter()
        .map(|p| {
            p.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}
