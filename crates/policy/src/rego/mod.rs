//! The operator's Rego modules (`[policy.rego]`), compiled once per load and
//! asked at five decision points ([`Point`]). Each point is a package
//! (`ahp.opt_in`, `ahp.session`, `ahp.transform`, `ahp.permission`,
//! `ahp.customization`) with a `deny` set (enforced) and a `warn` set
//! (recorded only) of messages, as conftest reads them; an empty or
//! undefined set allows. The built-in rules decide first; a Rego deny adds
//! to them.
//!
//! Evaluation is in-process, by regorus's interpreter: the one engine that
//! decides, evaluates (`policy eval`) and tests (`policy test`), so what
//! one accepts no other refuses. It is bounded by a deadline the
//! interpreter checks as it works, so a decision never waits on anything
//! but the CPU and never outlives its budget. An evaluation that errs, runs
//! past its deadline or yields a rule of the wrong type is the outcome
//! `error`, which refuses as a deny does. With `enforcement = "report"`
//! nothing is refused: a deny is recorded as `would_deny`.
//!
//! A module set is put in force only once it passes the strict check
//! ([`check`]): what would err at every evaluation is refused at load.
//!
//! Pure: the sources come in as text ([`RegoSources`], read by the config).
//! Loading them is [`compile`]; each point's `input` is built in
//! [`input`]; `policy test`'s runner of `test_*` rules is [`testing`].

mod check;
mod compile;
pub mod examples;
mod input;
mod point;
mod quiet;
pub mod testing;

use compile::revision;
use compile::split_imports;
pub use compile::CompileError;
pub(crate) use compile::{diagnostic, engine};
pub use input::{lexical, session_config, Body, ClientKind, Customization, Input, Server, Subject};
pub use point::Point;
use point::Sets;

use std::collections::BTreeMap;
use std::fmt;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::Duration;

use regorus::utils::limits::ExecutionTimerConfig;
use regorus::{Engine, Value};

use ahp_bridge_base::config::{Enforcement, RegoSources};
use ahp_bridge_telemetry::metrics;

/// The most messages one set may carry into a record, and the most bytes
/// each: a policy's messages are the operator's, but a rule can make many.
const MAX_MESSAGES: usize = 32;
const MAX_MESSAGE_BYTES: usize = 1024;

/// How many work units the interpreter does between two looks at the clock:
/// small enough that a 50 ms budget is kept to well under a millisecond.
const CHECK_INTERVAL: u32 = 64;

/// The least deadline of one evaluation of the strict check at load.
const CHECK_TIMEOUT: Duration = Duration::from_secs(1);

/// What a decision came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    Allowed,
    Denied,
    WouldDeny,
    Warned,
    Error,
}

impl Outcome {
    pub const ALL: [Outcome; 5] = [
        Self::Allowed,
        Self::Denied,
        Self::WouldDeny,
        Self::Warned,
        Self::Error,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Denied => "denied",
            Self::WouldDeny => "would_deny",
            Self::Warned => "warned",
            Self::Error => "error",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

/// One decision: its outcome, the messages of each set, why it erred, and
/// whether it refuses the action (a deny or an error, when enforced).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub point: Point,
    pub outcome: Outcome,
    pub deny: Vec<String>,
    pub warn: Vec<String>,
    pub error: Option<String>,
    /// The revision that decided (SHA-256 of the modules and data).
    pub revision: String,
    refuses: bool,
}

impl Decision {
    /// Whether the action is refused.
    pub fn refuses(&self) -> bool {
        self.refuses
    }

    /// Whether it belongs in the audit chain: anything but a plain allow.
    pub fn recorded(&self) -> bool {
        self.outcome != Outcome::Allowed
    }

    /// What a refused requester is told: the deny messages, or the error.
    pub fn reason(&self) -> String {
        match (&self.error, self.deny.is_empty()) {
            (Some(e), _) => format!("policy error: {e}"),
            (None, false) => self.deny.join("; "),
            (None, true) => "denied by policy".to_owned(),
        }
    }
}

/// The compiled modules and data: one revision, shared by every reader of
/// the policy in force. A prepared interpreter is taken from a pool for
/// each decision and given back.
pub struct Rego {
    prototype: Engine,
    pool: Mutex<Vec<Engine>>,
    /// Each point a package is declared for, with the sets it declares (an
    /// undeclared rule is no rule path to the interpreter: never asked).
    points: BTreeMap<Point, Sets>,
    revision: String,
    enforcement: Enforcement,
    timeout: Duration,
    modules: Vec<String>,
    /// What in the modules regorus may get wrong (see [`split_imports`]).
    warnings: Vec<String>,
}

impl fmt::Debug for Rego {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rego")
            .field("revision", &self.revision)
            .field("enforcement", &self.enforcement)
            .field("points", &self.points)
            .finish_non_exhaustive()
    }
}

impl Rego {
    /// Compiles `sources` and checks them strictly; an error holds every
    /// finding, each naming the module's file, line and column.
    pub fn compile(
        sources: &RegoSources,
        enforcement: Enforcement,
        timeout: Duration,
    ) -> Result<Self, CompileError> {
        let (prototype, said) = engine(sources)?;
        let packages = prototype
            .get_packages()
            .map_err(|e| CompileError::one(diagnostic(&e)))?;
        let mut points: BTreeMap<Point, Sets> = BTreeMap::new();
        // get_packages is in the order the modules were added.
        for ((name, _), package) in sources.modules.iter().zip(&packages) {
            let Some(point) = Point::ALL.into_iter().find(|p| p.package() == package) else {
                continue;
            };
            let declares = |rule: &str| {
                prototype
                    .has_declared_rule_rooted_at(name, rule)
                    .map_err(|e| CompileError::one(format!("{name}: {}", diagnostic(&e))))
            };
            let sets = points.entry(point).or_default();
            sets.deny |= declares("deny")?;
            sets.warn |= declares("warn")?;
        }
        let mut warnings = split_imports(sources, &packages);
        warnings.extend(said);
        let rego = Self {
            warnings,
            prototype,
            pool: Mutex::new(Vec::new()),
            points,
            revision: revision(sources),
            enforcement,
            timeout,
            modules: sources.modules.iter().map(|(n, _)| n.clone()).collect(),
        };
        // The dynamic part of the strict check: each set, as a decision
        // reads it, on the documented inputs (a generous deadline: a load
        // is not a request, and a slow machine must not refuse a policy).
        let found = check::on_examples(&rego.points, sources.additions, |point, sets, doc| {
            let input = Value::from(doc.clone());
            rego.interpret(point, sets, input, CHECK_TIMEOUT.max(timeout))
                .err()
                .map(|e| e.to_string())
        });
        if !found.is_empty() {
            return Err(CompileError::new(found));
        }
        for w in &rego.warnings {
            tracing::warn!("{w}");
        }
        Ok(rego)
    }

    pub fn revision(&self) -> &str {
        &self.revision
    }

    pub fn enforcement(&self) -> Enforcement {
        self.enforcement
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// What in the modules regorus may get wrong, said at every load.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The module files, as named in errors.
    pub fn modules(&self) -> &[String] {
        &self.modules
    }

    /// The points this policy declares a package for (the others allow).
    pub fn points(&self) -> impl Iterator<Item = Point> + '_ {
        self.points
            .iter()
            .filter(|(_, s)| s.deny || s.warn)
            .map(|(p, _)| *p)
    }

    /// Decides `input` at its point within `[policy.rego] timeout` or
    /// `budget`, whichever is shorter; counted by point and outcome.
    pub fn decide(&self, input: &Input<'_>, budget: Duration) -> Decision {
        self.decide_value(input.body.point(), input.to_value(), budget)
    }

    /// Decides a document given whole (`policy eval`): as [`Self::decide`].
    pub fn decide_json(
        &self,
        point: Point,
        input: &serde_json::Value,
        budget: Duration,
    ) -> Decision {
        self.decide_value(point, Value::from(input.clone()), budget)
    }

    fn decide_value(&self, point: Point, input: Value, budget: Duration) -> Decision {
        let declared = self.points.get(&point).copied().unwrap_or_default();
        let sets = if declared == Sets::default() {
            // No package for this point: nothing to deny or warn.
            Ok((vec![], vec![]))
        } else {
            let limit = budget.min(self.timeout);
            if limit.is_zero() {
                Err(SetsError::NoTime)
            } else {
                self.interpret(point, declared, input, limit)
            }
        };
        let d = self.conclude(point, sets);
        metrics().policy_decision(point.as_str(), d.outcome.as_str());
        d
    }

    fn conclude(
        &self,
        point: Point,
        sets: Result<(Vec<String>, Vec<String>), SetsError>,
    ) -> Decision {
        let enforced = self.enforcement == Enforcement::Enforce;
        let (outcome, deny, warn, error) = match sets {
            Err(e) => (Outcome::Error, vec![], vec![], Some(e.to_string())),
            Ok((deny, warn)) if !deny.is_empty() => {
                let o = if enforced {
                    Outcome::Denied
                } else {
                    Outcome::WouldDeny
                };
                (o, deny, warn, None)
            }
            Ok((deny, warn)) if !warn.is_empty() => (Outcome::Warned, deny, warn, None),
            Ok((deny, warn)) => (Outcome::Allowed, deny, warn, None),
        };
        let refuses = enforced && matches!(outcome, Outcome::Denied | Outcome::Error);
        Decision {
            point,
            outcome,
            deny,
            warn,
            error,
            revision: self.revision.clone(),
            refuses,
        }
    }

    /// The point's `deny` and `warn` sets, or why they could not be had.
    fn interpret(
        &self,
        point: Point,
        declared: Sets,
        value: Value,
        limit: Duration,
    ) -> Result<(Vec<String>, Vec<String>), SetsError> {
        let mut engine = self.take();
        engine.set_execution_timer_config(timer(limit));
        engine.set_input(value);
        let result = sets(point, declared, |rule| {
            engine
                .eval_rule(rule.to_owned())
                .map_err(|e| SetsError::Engine(diagnostic(&e)))
        });
        // `print` output is gathered (never written to stderr): dropped
        // here, so a pooled engine does not keep it.
        let _ = engine.take_prints();
        // An engine that erred may be mid-way through anything: not reused.
        if result.is_ok() {
            give_back(&self.pool, engine);
        }
        result
    }

    fn take(&self) -> Engine {
        let pooled = self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop();
        pooled.unwrap_or_else(|| self.prototype.clone())
    }
}

/// An evaluator back to its pool: as many as have ever been busy at once,
/// up to a few per core.
fn give_back<T>(pool: &Mutex<Vec<T>>, evaluator: T) {
    let mut pool = pool.lock().unwrap_or_else(|p| p.into_inner());
    if pool.len() < 16 {
        pool.push(evaluator);
    }
}

/// An evaluator's deadline of one evaluation.
pub(crate) fn timer(limit: Duration) -> ExecutionTimerConfig {
    ExecutionTimerConfig {
        limit,
        check_interval: NonZeroU32::new(CHECK_INTERVAL).expect("non-zero"),
    }
}

/// Why a point's sets could not be had: the decision's error.
#[derive(Debug, thiserror::Error)]
enum SetsError {
    #[error("no time was left to decide")]
    NoTime,
    /// The engine's own error, as its diagnostic reads (regorus's errors
    /// are `anyhow` chains: kept as the text they print).
    #[error("{0}")]
    Engine(String),
    #[error("{rule} is {kind}, not a set of strings")]
    NotASet { rule: String, kind: &'static str },
    #[error("{rule} holds {kind}, not a string")]
    NotAString { rule: String, kind: &'static str },
}

/// The point's `deny` and `warn` sets, each that its package declares,
/// asked of an evaluator by rule path.
fn sets(
    point: Point,
    declared: Sets,
    mut eval: impl FnMut(&str) -> Result<Value, SetsError>,
) -> Result<(Vec<String>, Vec<String>), SetsError> {
    let mut set = |name: &str, wanted: bool| -> Result<Vec<String>, SetsError> {
        if !wanted {
            return Ok(vec![]);
        }
        let rule = format!("{}.{name}", point.package());
        strings(&rule, &eval(&rule)?)
    };
    Ok((set("deny", declared.deny)?, set("warn", declared.warn)?))
}

/// One set's value as its messages, bounded: undefined is empty; anything
/// but a set or array of strings is an error naming the rule.
fn strings(rule: &str, value: &Value) -> Result<Vec<String>, SetsError> {
    let items: Vec<&Value> = match value {
        Value::Undefined => return Ok(vec![]),
        Value::Set(s) => s.iter().collect(),
        Value::Array(a) => a.iter().collect(),
        other => {
            return Err(SetsError::NotASet {
                rule: rule.to_owned(),
                kind: kind_of(other),
            })
        }
    };
    let mut out = Vec::with_capacity(items.len().min(MAX_MESSAGES));
    for v in items {
        let Value::String(s) = v else {
            return Err(SetsError::NotAString {
                rule: rule.to_owned(),
                kind: kind_of(v),
            });
        };
        if out.len() < MAX_MESSAGES {
            out.push(bounded(s));
        }
    }
    Ok(out)
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Set(_) => "a set",
        Value::Object(_) => "an object",
        Value::Undefined => "undefined",
    }
}

/// A message cut at a character boundary to the most bytes one may hold.
fn bounded(s: &str) -> String {
    if s.len() <= MAX_MESSAGE_BYTES {
        return s.to_owned();
    }
    let mut end = MAX_MESSAGE_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
