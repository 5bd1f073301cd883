//! Loading a policy: its modules and data into a prepared interpreter (a
//! syntax or analysis error names the module's file and line), the points'
//! sets compiled to regorus's VM, the revision, and what in the modules
//! regorus may get wrong.

use std::collections::BTreeMap;
use std::sync::Arc;

use regorus::languages::rego::compiler::Compiler;
use regorus::rvm::program::Program;
use regorus::{Engine, Value};
use sha2::{Digest, Sha256};

use super::point::{Point, Sets};
use crate::config::RegoSources;

/// An engine with every module and data file loaded (Rego v1), not prepared.
pub(crate) fn engine(sources: &RegoSources) -> Result<Engine, CompileError> {
    let mut engine = Engine::new();
    engine.set_rego_v0(false);
    for (name, text) in &sources.modules {
        engine
            .add_policy(name.clone(), text.clone())
            .map_err(|e| CompileError(one_error(&e)))?;
    }
    for (name, doc) in &sources.data {
        engine
            .add_data(Value::from(doc.clone()))
            .map_err(|e| CompileError(format!("{name}: {}", one_error(&e))))?;
    }
    // Analysis (undefined names, unsafe variables, recursion) happens when
    // an engine is first prepared: do it now, so a load fails here and not
    // at the first decision.
    engine
        .eval_query("true".to_owned(), false)
        .map_err(|e| CompileError(one_error(&e)))?;
    Ok(engine)
}

/// regorus's error with its source excerpt, on one line for the log.
/// Generic over the error: `{:#}` is regorus's error with its causes,
/// and this crate names no `anyhow` type.
pub(super) fn one_error(e: &impl std::fmt::Display) -> String {
    let text = format!("{e:#}");
    text.lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" | ")
}

/// SHA-256 (hex) of the modules (name and text, in order) and the data
/// (canonical JSON): the revision every decision names.
pub fn revision(sources: &RegoSources) -> String {
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

/// The VM's program of every declared set, or `None` (logged) where the VM
/// cannot run the policy: the interpreter decides then.
pub(super) fn vm_program(
    engine: &Engine,
    points: &BTreeMap<Point, Sets>,
) -> Option<(Arc<Program>, Value)> {
    let rules: Vec<String> = points
        .iter()
        .flat_map(|(p, s)| {
            let deny = s.deny.then(|| format!("{}.deny", p.package()));
            let warn = s.warn.then(|| format!("{}.warn", p.package()));
            deny.into_iter().chain(warn)
        })
        .collect();
    let first = rules.first()?;
    let mut e = engine.clone();
    let compiled = (|| -> Result<Arc<Program>, String> {
        let policy = e
            .compile_with_entrypoint(&regorus::Rc::from(first.as_str()))
            .map_err(|e| one_error(&e))?;
        let entries: Vec<&str> = rules.iter().map(String::as_str).collect();
        Compiler::compile_from_policy(&policy, &entries).map_err(|e| e.to_string())
    })();
    match compiled {
        Ok(program) => Some((program, engine.get_data())),
        Err(why) => {
            tracing::warn!(
                "the Rego VM cannot run this policy ({why}); the interpreter decides, more slowly"
            );
            None
        }
    }
}

/// A policy that does not compile: its file and line are in the message.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CompileError(pub String);
