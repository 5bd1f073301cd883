//! `[policy.rego]`: the operator's own decisions as Rego modules, beside the
//! built-in rules: which files, what data, enforce or only report, and one
//! evaluation's deadline. Reading the files it names is here too, so every
//! loader (startup, a reload, `config check`, `policy eval`) reads them the
//! same way, within the same bounds.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::{bad, duration, ConfigError};

/// The most module and data files one policy may name, and the most bytes
/// each and all of them may hold: a policy is code an operator wrote, not a
/// data set, and every evaluation clones nothing of it but reads it all.
pub const MAX_REGO_FILES: usize = 512;
pub const MAX_REGO_FILE_BYTES: u64 = 4 * 1024 * 1024;
pub const MAX_REGO_TOTAL_BYTES: u64 = 32 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegoConfig {
    /// `.rego` files, folders (every `.rego` in them) or globs whose last
    /// component has `*` or `?`; relative to the config file's folder.
    pub modules: Vec<PathBuf>,
    /// JSON files, each an object, merged under `data`.
    #[serde(default)]
    pub data: Vec<PathBuf>,
    #[serde(default)]
    pub enforcement: Enforcement,
    /// One evaluation's deadline.
    #[serde(default = "default_timeout", deserialize_with = "duration")]
    pub timeout: Duration,
}

/// One evaluation's deadline when `timeout` is not set.
pub const DEFAULT_REGO_TIMEOUT: Duration = Duration::from_millis(50);

fn default_timeout() -> Duration {
    DEFAULT_REGO_TIMEOUT
}

/// What a Rego deny does: `enforce` refuses, `report` only records
/// `would_deny` and lets the action go on (a rollout's first step).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Enforcement {
    #[default]
    Enforce,
    Report,
}

impl Enforcement {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enforce => "enforce",
            Self::Report => "report",
        }
    }
}

/// The files of a policy as read: each module's name (its path as shown in
/// errors) and text, each data file's name and document.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RegoSources {
    pub modules: Vec<(String, String)>,
    pub data: Vec<(String, serde_json::Value)>,
    /// The policy also decides section additions (in front of the
    /// runtime's own AHP host): the strict check evaluates it on their
    /// documented input too. Set by who knows the runtime's protocol.
    pub additions: bool,
}

impl RegoConfig {
    pub(super) fn validate(&self, transform_timeout: Duration) -> Result<(), ConfigError> {
        if self.modules.is_empty() {
            return Err(bad("policy.rego.modules", "names no module"));
        }
        if self.timeout.is_zero() {
            return Err(bad("policy.rego.timeout", "must be more than 0"));
        }
        if self.timeout >= transform_timeout {
            return Err(bad(
                "policy.rego.timeout",
                "must be less than [policy] transform_timeout (a transform's sections are decided within it)",
            ));
        }
        Ok(())
    }

    /// Makes each relative path relative to `base` (the config file's folder).
    pub(super) fn resolve(&mut self, base: &Path) {
        for p in self.modules.iter_mut().chain(self.data.iter_mut()) {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
    }

    /// The module files as the config names them, in a stable order: each
    /// file, each folder's `.rego` files (not below it), each glob's matches.
    pub fn module_files(&self) -> Result<Vec<PathBuf>, ConfigError> {
        let mut out = Vec::new();
        for p in &self.modules {
            let found = expand(p, "rego").map_err(|r| bad("policy.rego.modules", r.to_string()))?;
            if found.is_empty() {
                return Err(bad(
                    "policy.rego.modules",
                    format!("{} matches no .rego file", p.display()),
                ));
            }
            out.extend(found);
        }
        out.dedup();
        Ok(out)
    }

    /// Every file the policy is read from: what a watcher watches.
    pub fn files(&self) -> Vec<PathBuf> {
        let mut out = self.module_files().unwrap_or_default();
        out.extend(self.data.iter().cloned());
        out
    }

    /// Reads every module and data file within the bounds; an error names
    /// the key and the file.
    pub fn read(&self) -> Result<RegoSources, ConfigError> {
        let modules = self.module_files()?;
        if modules.len() + self.data.len() > MAX_REGO_FILES {
            return Err(bad(
                "policy.rego",
                format!("more than {MAX_REGO_FILES} files"),
            ));
        }
        let mut total = 0;
        let mut out = RegoSources::default();
        for path in &modules {
            let text = read_bounded(path, &mut total)
                .map_err(|r| bad("policy.rego.modules", r.to_string()))?;
            out.modules.push((path.display().to_string(), text));
        }
        for path in &self.data {
            let text = read_bounded(path, &mut total)
                .map_err(|r| bad("policy.rego.data", r.to_string()))?;
            let doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                bad(
                    "policy.rego.data",
                    format!("{}: not JSON: {e}", path.display()),
                )
            })?;
            if !doc.is_object() {
                return Err(bad(
                    "policy.rego.data",
                    format!("{}: must hold a JSON object", path.display()),
                ));
            }
            out.data.push((path.display().to_string(), doc));
        }
        Ok(out)
    }
}

/// Why the policy's files could not be taken.
#[derive(Debug, thiserror::Error)]
enum RegoFileError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {len} bytes, more than {MAX_REGO_FILE_BYTES}", path.display())]
    FileTooLarge { path: PathBuf, len: u64 },
    #[error("the files hold more than {MAX_REGO_TOTAL_BYTES} bytes")]
    TotalTooLarge,
    #[error("{}: no such file or folder", .0.display())]
    Missing(PathBuf),
    #[error("{}: only the last component may hold * or ?", .0.display())]
    GlobInFolder(PathBuf),
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> RegoFileError + '_ {
    move |source| RegoFileError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One module or data file's text, counted against the policy's total.
fn read_bounded(path: &Path, total: &mut u64) -> Result<String, RegoFileError> {
    let len = std::fs::metadata(path).map_err(io_at(path))?.len();
    if len > MAX_REGO_FILE_BYTES {
        return Err(RegoFileError::FileTooLarge {
            path: path.to_path_buf(),
            len,
        });
    }
    *total += len;
    if *total > MAX_REGO_TOTAL_BYTES {
        return Err(RegoFileError::TotalTooLarge);
    }
    std::fs::read_to_string(path).map_err(io_at(path))
}

/// A file, a folder's files ending in `.ext`, or a glob in the last
/// component (`*`, `?`), sorted by name.
fn expand(path: &Path, ext: &str) -> Result<Vec<PathBuf>, RegoFileError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let is_glob = name.contains(['*', '?']);
    if !is_glob && !path.is_dir() {
        return if path.is_file() {
            Ok(vec![path.to_path_buf()])
        } else {
            Err(RegoFileError::Missing(path.to_path_buf()))
        };
    }
    let dir = if is_glob {
        path.parent().unwrap_or(Path::new("."))
    } else {
        path
    };
    if dir.to_string_lossy().contains(['*', '?']) {
        return Err(RegoFileError::GlobInFolder(path.to_path_buf()));
    }
    let entries = std::fs::read_dir(dir).map_err(io_at(dir))?;
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_at(dir))?;
        let file = entry.file_name().to_string_lossy().into_owned();
        let wanted = if is_glob {
            wildcard(&name, &file)
        } else {
            file.ends_with(&format!(".{ext}"))
        };
        if wanted && entry.path().is_file() {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

/// `*` any run of characters, `?` one character, the rest itself.
fn wildcard(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // The classic two-pointer match with one backtrack point for the last `*`.
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < n.len() {
        if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_names() {
        assert!(wildcard("*.rego", "tone.rego"));
        assert!(!wildcard("*.rego", "tone.rego.bak"));
        assert!(wildcard("t?ne*.rego", "tone_test.rego"));
        assert!(!wildcard("t?ne.rego", "tne.rego"));
        assert!(wildcard("*", ""));
    }

    #[test]
    fn files_folders_and_globs_expand_in_order() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["b.rego", "a.rego", "a_test.rego", "notes.txt"] {
            std::fs::write(dir.path().join(f), "package x\n").unwrap();
        }
        let names = |v: Vec<PathBuf>| -> Vec<String> {
            v.iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(
            names(expand(dir.path(), "rego").unwrap()),
            ["a.rego", "a_test.rego", "b.rego"]
        );
        assert_eq!(
            names(expand(&dir.path().join("a*.rego"), "rego").unwrap()),
            ["a.rego", "a_test.rego"]
        );
        assert_eq!(
            names(expand(&dir.path().join("b.rego"), "rego").unwrap()),
            ["b.rego"]
        );
        let missing = expand(&dir.path().join("c.rego"), "rego").unwrap_err();
        assert!(
            missing.to_string().contains("c.rego: no such file"),
            "{missing}"
        );
    }

    #[test]
    fn read_names_the_bad_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("p.rego"), "package ahp.session\n").unwrap();
        std::fs::write(dir.path().join("d.json"), "[1]").unwrap();
        let mut cfg = RegoConfig {
            modules: vec!["*.rego".into()],
            data: vec!["d.json".into()],
            enforcement: Enforcement::Enforce,
            timeout: default_timeout(),
        };
        cfg.resolve(dir.path());
        let e = cfg.read().unwrap_err();
        assert_eq!(e.key, "policy.rego.data");
        assert!(e.reason.contains("d.json: must hold a JSON object"), "{e}");
        std::fs::write(dir.path().join("d.json"), r#"{"hosts": ["a"]}"#).unwrap();
        let read = cfg.read().unwrap();
        assert_eq!(read.modules.len(), 1);
        assert_eq!(read.data[0].1["hosts"][0], "a");
        let mut none = cfg.clone();
        none.modules = vec![dir.path().join("*.none")];
        assert!(none.read().unwrap_err().reason.contains("matches no .rego"));
    }
}
