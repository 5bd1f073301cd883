//! The strict check: what `opa check` refuses, refused before a module set
//! is put in force (at `config check`, at start, on SIGHUP and on a change
//! of the files: every load goes through [`super::Rego::compile`]). The
//! engine itself refuses parse errors and unsafe variables when it is
//! prepared; this adds what it would only find at an evaluation, where an
//! error refuses the request: a call to a function no engine here has (an
//! OPA built-in this build leaves out, or the network, named as such),
//! rules of one name defined in conflicting kinds, and a point's `deny` or
//! `warn` that errs or is not a set of strings on the documented example
//! inputs of that point ([`super::examples`]).
//!
//! Each finding is a diagnostic with its lines kept: the file, line and
//! column, the source line and a caret under the place.

use std::collections::{BTreeMap, BTreeSet};

use regorus::unstable::{
    Expr, Literal, LiteralStmt, Module, Query, Ref, Rule, RuleHead, Span, BUILTINS,
};
use regorus::Engine;

use super::point::{Point, Sets};

/// OPA built-ins that reach the network: a decision never waits on one.
const NETWORK: &[&str] = &["http.send", "net.lookup_ip_addr"];

/// OPA's built-ins regorus does not implement (whole families end in a
/// dot), to tell "this build leaves it out" from "no such function" (a
/// typo). docs/policy.md lists the same.
const LEFT_OUT: &[&str] = &[
    "io.jwt.",
    "crypto.",
    "graphql.",
    "providers.aws.",
    "rego.metadata.",
    "rego.parse_module",
    "strings.render_template",
];

/// The findings of the static part of the check, each a diagnostic.
pub(super) fn statically(engine: &mut Engine) -> Vec<String> {
    let modules: Vec<Ref<Module>> = engine.get_modules().clone();
    let functions = user_functions(&modules);
    let mut out = Vec::new();
    let mut kinds: BTreeMap<String, (RuleKind, Span)> = BTreeMap::new();
    for m in &modules {
        let package = m.package.refr.span().text().to_owned();
        for rule in &m.policy {
            let (kind, path, span) = kind_of(rule);
            let name = format!("data.{package}.{path}");
            match kinds.get(&name) {
                Some((k, first)) if *k != kind => out.push(span.message(
                    "error",
                    &format!(
                        "conflicting rules {name}: defined as {} here and as {} at {}:{}",
                        kind.as_str(),
                        k.as_str(),
                        first.source.file(),
                        first.line
                    ),
                )),
                Some(_) => {}
                None => {
                    kinds.insert(name, (kind, span.clone()));
                }
            }
            let mut calls = Vec::new();
            rule_calls(rule, &mut calls);
            for (called, span) in calls {
                if let Some(why) = unknown(&called, &functions) {
                    out.push(span.message("error", &why));
                }
            }
        }
    }
    out
}

/// Why a call to `name` can never be answered here, or `None` when it can.
fn unknown(name: &str, functions: &BTreeSet<String>) -> Option<String> {
    if BUILTINS.contains_key(name) {
        return None;
    }
    let last = name.rsplit('.').next().unwrap_or(name);
    if functions.contains(last) {
        return None;
    }
    Some(if NETWORK.contains(&name) {
        format!("{name}: a policy here has no network (a decision never waits on a network call), so OPA's {name} is refused")
    } else if LEFT_OUT.iter().any(|o| match o.strip_suffix('.') {
        Some(family) => name.starts_with(o) || name == family,
        None => name == *o,
    }) {
        format!("{name} is an OPA built-in this build of the bridge does not have (docs/policy.md lists them)")
    } else {
        format!("undefined function {name}")
    })
}

/// The last name of every function the modules define: a call to one of
/// them (by its local name, its full path or through an import) is known.
fn user_functions(modules: &[Ref<Module>]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for m in modules {
        for rule in &m.policy {
            let refr = match rule.as_ref() {
                Rule::Spec {
                    head: RuleHead::Func { refr, .. },
                    ..
                } => refr,
                Rule::Default { refr, args, .. } if !args.is_empty() => refr,
                _ => continue,
            };
            let text = refr.span().text();
            out.insert(text.rsplit('.').next().unwrap_or(text).to_owned());
        }
    }
    out
}

/// How a rule defines its name: OPA refuses one name defined in two kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RuleKind {
    Complete,
    PartialSet,
    PartialObject,
    Function,
}

impl RuleKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Complete => "a complete value (`:=`, `=` or `if` alone)",
            Self::PartialSet => "a partial set (`contains`)",
            Self::PartialObject => "a partial object (`name[key] := value`)",
            Self::Function => "a function",
        }
    }
}

/// A rule's kind, the path of its name within its package, and its span.
fn kind_of(rule: &Rule) -> (RuleKind, String, Span) {
    let (kind, refr) = match rule {
        Rule::Spec { head, .. } => match head {
            RuleHead::Compr { refr, .. } => {
                let kind = if matches!(refr.as_ref(), Expr::RefBrack { .. }) {
                    RuleKind::PartialObject
                } else {
                    RuleKind::Complete
                };
                (kind, refr)
            }
            RuleHead::Set { refr, .. } => (RuleKind::PartialSet, refr),
            RuleHead::Func { refr, .. } => (RuleKind::Function, refr),
        },
        Rule::Default { refr, args, .. } => {
            let kind = if args.is_empty() {
                RuleKind::Complete
            } else {
                RuleKind::Function
            };
            (kind, refr)
        }
    };
    let text = refr.span().text();
    // `p[k] := v` names `p`.
    let path = text.split('[').next().unwrap_or(text).trim().to_owned();
    (kind, path, rule.span().clone())
}

/// Every function call in a rule, by the name it is called by.
fn rule_calls(rule: &Rule, out: &mut Vec<(String, Span)>) {
    match rule {
        Rule::Spec { head, bodies, .. } => {
            match head {
                RuleHead::Compr { refr, assign, .. } => {
                    expr_calls(refr, out);
                    if let Some(a) = assign {
                        expr_calls(&a.value, out);
                    }
                }
                RuleHead::Set { refr, key, .. } => {
                    expr_calls(refr, out);
                    if let Some(k) = key {
                        expr_calls(k, out);
                    }
                }
                RuleHead::Func { args, assign, .. } => {
                    for a in args {
                        expr_calls(a, out);
                    }
                    if let Some(a) = assign {
                        expr_calls(&a.value, out);
                    }
                }
            }
            for b in bodies {
                if let Some(a) = &b.assign {
                    expr_calls(&a.value, out);
                }
                query_calls(&b.query, out);
            }
        }
        Rule::Default { value, .. } => expr_calls(value, out),
    }
}

fn query_calls(q: &Query, out: &mut Vec<(String, Span)>) {
    for stmt in &q.stmts {
        stmt_calls(stmt, out);
    }
}

fn stmt_calls(stmt: &LiteralStmt, out: &mut Vec<(String, Span)>) {
    for w in &stmt.with_mods {
        expr_calls(&w.r#as, out);
    }
    match &stmt.literal {
        Literal::SomeVars { .. } => {}
        Literal::SomeIn {
            key,
            value,
            collection,
            ..
        } => membership_calls(key.as_ref(), value, collection, out),
        Literal::Expr { expr, .. } | Literal::NotExpr { expr, .. } => expr_calls(expr, out),
        Literal::Every { domain, query, .. } => {
            expr_calls(domain, out);
            query_calls(query, out);
        }
    }
}

fn expr_calls(e: &Expr, out: &mut Vec<(String, Span)>) {
    match e {
        Expr::String { .. }
        | Expr::RawString { .. }
        | Expr::Number { .. }
        | Expr::Bool { .. }
        | Expr::Null { .. }
        | Expr::Var { .. } => {}
        Expr::Array { items, .. } | Expr::Set { items, .. } => {
            for i in items {
                expr_calls(i, out);
            }
        }
        Expr::Object { fields, .. } => {
            for (_, k, v) in fields {
                expr_calls(k, out);
                expr_calls(v, out);
            }
        }
        Expr::ArrayCompr { term, query, .. } | Expr::SetCompr { term, query, .. } => {
            expr_calls(term, out);
            query_calls(query, out);
        }
        Expr::ObjectCompr {
            key, value, query, ..
        } => {
            expr_calls(key, out);
            expr_calls(value, out);
            query_calls(query, out);
        }
        Expr::Call { fcn, params, .. } => {
            out.push((fcn.span().text().to_owned(), fcn.span().clone()));
            for p in params {
                expr_calls(p, out);
            }
        }
        Expr::UnaryExpr { expr, .. } => expr_calls(expr, out),
        Expr::RefDot { refr, .. } => expr_calls(refr, out),
        Expr::RefBrack { refr, index, .. } => {
            expr_calls(refr, out);
            expr_calls(index, out);
        }
        Expr::BinExpr { lhs, rhs, .. }
        | Expr::BoolExpr { lhs, rhs, .. }
        | Expr::ArithExpr { lhs, rhs, .. }
        | Expr::AssignExpr { lhs, rhs, .. } => {
            expr_calls(lhs, out);
            expr_calls(rhs, out);
        }
        Expr::Membership {
            key,
            value,
            collection,
            ..
        } => membership_calls(key.as_ref(), value, collection, out),
    }
}

/// `some k, v in c` and `k, v in c` alike.
fn membership_calls(
    key: Option<&Ref<Expr>>,
    value: &Expr,
    collection: &Expr,
    out: &mut Vec<(String, Span)>,
) {
    if let Some(k) = key {
        expr_calls(k, out);
    }
    expr_calls(value, out);
    expr_calls(collection, out);
}

/// The dynamic part: each declared set of each point, evaluated on each
/// documented example input of the point (a section addition's only when
/// the policy decides additions) with `erred` (why it erred, if
/// it did), must be a set (or array) of strings. `erred` is the deciding
/// evaluator's own path, so what passes here decides the same way in service.
pub(super) fn on_examples(
    points: &BTreeMap<Point, Sets>,
    additions: bool,
    mut erred: impl FnMut(Point, Sets, &serde_json::Value) -> Option<String>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (point, sets) in points {
        if *sets == Sets::default() {
            continue;
        }
        for (i, example) in super::examples::of(*point, additions).iter().enumerate() {
            if let Some(why) = erred(*point, *sets, example) {
                out.push(format!(
                    "{}: on the documented example input {} of `{}` (docs/policy.md), the policy errs, and so would refuse every such request:\n{why}",
                    point.package(),
                    i + 1,
                    point.as_str()
                ));
            }
        }
    }
    out
}
