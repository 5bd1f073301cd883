//! Loading a policy: its modules and data into a prepared interpreter (a
//! syntax or analysis error names the module's file, line and column, with
//! the source line and a caret), the static part of the strict check
//! ([`super::check`]), the revision, and what in the modules regorus may
//! get wrong.

use regorus::{Engine, Value};
use sha2::{Digest, Sha256};

use super::check::statically;
use super::quiet::captured;
use ahp_bridge_base::config::RegoSources;

/// An engine with every module and data file loaded (Rego v1) and
/// prepared, the static part of the strict check passed, and what regorus
/// said of the modules on the way (its warnings, which it would otherwise
/// write to the process's stderr). Print output is gathered, never written.
pub(crate) fn engine(sources: &RegoSources) -> Result<(Engine, Vec<String>), CompileError> {
    let (loaded, said) = captured(|| load(sources));
    let mut engine = loaded?;
    let found = statically(&mut engine);
    if !found.is_empty() {
        return Err(CompileError::new(found));
    }
    Ok((engine, said))
}

fn load(sources: &RegoSources) -> Result<Engine, CompileError> {
    let mut engine = Engine::new();
    engine.set_rego_v0(false);
    engine.set_gather_prints(true);
    for (name, text) in &sources.modules {
        engine
            .add_policy(name.clone(), text.clone())
            .map_err(|e| CompileError::one(diagnostic(&e)))?;
    }
    for (name, doc) in &sources.data {
        engine
            .add_data(Value::from(doc.clone()))
            .map_err(|e| CompileError::one(format!("{name}: {}", diagnostic(&e))))?;
    }
    // Analysis (undefined names, unsafe variables, recursion) happens when
    // an engine is first prepared: do it now, so a load fails here and not
    // at the first decision.
    engine
        .eval_query("true".to_owned(), false)
        .map_err(|e| CompileError::one(diagnostic(&e)))?;
    Ok(engine)
}

/// regorus's error with its causes and its source excerpt, lines kept (the
/// caret must stand under the place): `{:#}` is the error with its causes,
/// and this crate names no `anyhow` type.
pub(crate) fn diagnostic(e: &impl std::fmt::Display) -> String {
    let text = format!("{e:#}");
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    let first = lines.iter().position(|l| !l.is_empty()).unwrap_or(0);
    lines[first..].join("\n")
}

/// SHA-256 (hex) of the modules (name and text, in order) and the data
/// (canonical JSON): the revision every decision names.
pub(crate) fn revision(sources: &RegoSources) -> String {
    let mut h = Sha256::new();
    for (name, text) in &sources.modules {
        h.update(b"module\0");
        h.update(name.as_bytes());
        h.update(b"\0");
        h.update(text.as_bytes());
        h.update(b"\0");
    }
    for (name, doc) in &sources.data {
        h.update(b"data\0");
        h.update(name.as_bytes());
        h.update(b"\0");
        h.update(doc.to_string().as_bytes());
        h.update(b"\0");
    }
    hex::encode(h.finalize())
}

/// Each `import` of a package that spans several modules: regorus 0.14
/// evaluates a rule reached through such an alias wrongly when it is not in
/// the package's first module (it can come out undefined, and a `deny` be
/// lost). docs/policy.md says to write the full path instead.
pub(super) fn split_imports(sources: &RegoSources, packages: &[String]) -> Vec<String> {
    let import = regex::Regex::new(r"(?m)^\s*import\s+(data\.[A-Za-z0-9_.]+)").expect("valid");
    let mut out = Vec::new();
    for (name, text) in &sources.modules {
        for c in import.captures_iter(text) {
            let imported = &c[1];
            let modules = packages.iter().filter(|p| p.as_str() == imported).count();
            if modules > 1 {
                out.push(format!(
                    "{name}: `import {imported}`, a package of {modules} modules: regorus can evaluate its rules wrongly through the import; write `{imported}.RULE` in full (docs/policy.md)"
                ));
            }
        }
    }
    out
}

/// A policy refused at load: each finding a diagnostic, with its file,
/// line and column, the source line and a caret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .findings.join("\n"))]
pub struct CompileError {
    findings: Vec<String>,
}

impl CompileError {
    pub(crate) fn new(findings: Vec<String>) -> Self {
        Self { findings }
    }

    pub(crate) fn one(finding: String) -> Self {
        Self::new(vec![finding])
    }
}
