//! The fake runtime's scenarios as data: `fixtures/fake-runtime/NAME.json`,
//! `{"description": "...", "steps": [STEP, ...]}`, where a step is
//!
//! - `{"on": METHOD, "reply": RESULT}`, `{"on": METHOD, "error": {"code": N,
//!   "message": "..."}}` or `{"on": METHOD, "ignore": true}`: how the fake
//!   answers each call of METHOD;
//! - `{"emit": EVENT_TYPE, "data": {...}, "session": ID}`: a `session.event`
//!   the fake sends after answering the `on` step above it, to the session the
//!   call named (`params.sessionId`) unless `session` says another.
//!
//! In a reply or an event's data, a string `"$params.NAME"` stands for that
//! field of the call's params (e.g. `"$params.sessionId"`, `"$params.prompt"`).
//! `fixtures/README.md` has the whole format.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::{json, Value};

/// How the fake answers one method.
#[derive(Clone, Debug)]
pub(crate) enum Reaction {
    Reply(Value),
    /// A JSON-RPC error (code, message).
    Error(i64, String),
    /// Never answer.
    Ignore,
}

/// One event the fake sends after answering a call.
#[derive(Clone, Debug)]
pub(crate) struct Emit {
    pub event_type: String,
    pub data: Value,
    /// Another session than the call's.
    pub session: Option<String>,
}

/// One `on` step and the `emit` steps after it.
#[derive(Clone, Debug)]
pub(crate) struct Rule {
    pub answer: Reaction,
    pub emits: Vec<Emit>,
}

#[derive(Debug)]
pub(crate) struct Scenario {
    pub description: String,
    /// Method and rule, in file order.
    pub rules: Vec<(String, Rule)>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    description: String,
    steps: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OnStep {
    on: String,
    reply: Option<Value>,
    error: Option<ErrorStep>,
    #[serde(default)]
    ignore: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ErrorStep {
    code: i64,
    message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EmitStep {
    emit: String,
    #[serde(default = "empty_object")]
    data: Value,
    session: Option<String>,
}

fn empty_object() -> Value {
    json!({})
}

/// `fixtures/fake-runtime/`.
pub(crate) fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fake-runtime")
}

/// The scenario `fixtures/fake-runtime/NAME.json`. Every file there is parsed
/// on first use, so one that does not parse fails every fake-runtime test,
/// naming the file and the step.
pub(crate) fn scenario(name: &str) -> &'static Scenario {
    static ALL: OnceLock<BTreeMap<String, Scenario>> = OnceLock::new();
    let all = ALL.get_or_init(|| {
        let mut all = BTreeMap::new();
        for entry in std::fs::read_dir(dir()).expect("fixtures/fake-runtime/ exists") {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                let file = path.display().to_string();
                let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
                let s = parse(&file, &text).unwrap_or_else(|e| panic!("{e}"));
                all.insert(path.file_stem().unwrap().to_string_lossy().into_owned(), s);
            }
        }
        all
    });
    all.get(name).unwrap_or_else(|| {
        panic!(
            "no scenario {name:?} in {}: there are {:?}",
            dir().display(),
            all.keys().collect::<Vec<_>>()
        )
    })
}

/// Parses a scenario; `file` names it in errors.
pub(crate) fn parse(file: &str, text: &str) -> Result<Scenario, String> {
    let doc: File = serde_json::from_str(text).map_err(|e| format!("{file}: {e}"))?;
    let mut rules: Vec<(String, Rule)> = Vec::new();
    for (i, step) in doc.steps.iter().enumerate() {
        let bad = |e: String| format!("{file}: steps[{i}] {step}: {e}");
        if step.get("on").is_some() {
            let on = OnStep::deserialize(step).map_err(|e| bad(e.to_string()))?;
            let answer = match (on.reply, on.error, on.ignore) {
                (Some(v), None, false) => Reaction::Reply(v),
                (None, Some(e), false) => Reaction::Error(e.code, e.message),
                (None, None, true) => Reaction::Ignore,
                _ => {
                    return Err(bad(
                        "an on step has exactly one of \"reply\", \"error\", \"ignore\": true"
                            .into(),
                    ))
                }
            };
            if rules.iter().any(|(m, _)| *m == on.on) {
                return Err(bad(format!("a second step for {:?}", on.on)));
            }
            rules.push((
                on.on,
                Rule {
                    answer,
                    emits: vec![],
                },
            ));
        } else if step.get("emit").is_some() {
            let e = EmitStep::deserialize(step).map_err(|e| bad(e.to_string()))?;
            let Some((_, rule)) = rules.last_mut() else {
                return Err(bad("an emit step must come after an on step (it is sent once that call is answered)".into()));
            };
            rule.emits.push(Emit {
                event_type: e.emit,
                data: e.data,
                session: e.session,
            });
        } else {
            return Err(bad(
                "a step is {\"on\": METHOD, ...} or {\"emit\": EVENT_TYPE, ...}".into(),
            ));
        }
    }
    Ok(Scenario {
        description: doc.description,
        rules,
    })
}

/// `v` with every string `"$params.A.B"` replaced by `params.A.B` (null when
/// the call has no such field).
pub(crate) fn fill(v: &Value, params: &Value) -> Value {
    match v {
        Value::String(s) => match s.strip_prefix("$params.") {
            Some(path) => path.split('.').fold(params, |v, key| &v[key]).clone(),
            None => v.clone(),
        },
        Value::Array(a) => Value::Array(a.iter().map(|v| fill(v, params)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), fill(v, params)))
                .collect(),
        ),
        other => other.clone(),
    }
}
