//! `audit show`: the log as a table a person can read, one row per record
//! (time, seq, kind, session, clients, what happened to each section), and
//! with `include_content` a unified diff of every rewritten section. It reads;
//! `audit verify` judges.

use super::sdk_session::SdkSessionRecord;
use super::session_sections::SessionSectionsRecord;
use crate::audit_error::AuditError;
use std::io::Write;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

use super::customization::CustomizationRecord;
use super::decision::DecisionRecord;
use super::diff::unified;
use super::record::{CheckpointRecord, Kind, PolicyRecord, RecoveredRecord, RotationRecord};

/// Which records to show.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// A session URI, or its id (`a1` for `ahp-session:/a1`).
    pub session: Option<String>,
    pub client: Option<String>,
    pub since: Option<jiff::Timestamp>,
    /// Only the records of this bridge of a fleet (`[server] instance`).
    pub instance: Option<String>,
    /// Only Rego decisions with this outcome (`denied`, `would_deny`,
    /// `warned`, `error`): `decision` records, and transform records with a
    /// section so decided.
    pub outcome: Option<String>,
}

/// A `transform` record as read back (fields an older log lacks default).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Transform {
    #[serde(default)]
    session: String,
    #[serde(default)]
    owners: Vec<Owner>,
    #[serde(default)]
    sections: Vec<Section>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Owner {
    client_id: String,
    outcome: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Section {
    id: String,
    decision: String,
    #[serde(default)]
    owner: Option<String>,
    #[serde(default)]
    content_before: Option<String>,
    #[serde(default)]
    content_after: Option<String>,
    #[serde(default)]
    rego_decision: Option<ShownRegoOutcome>,
}

#[derive(Debug, Deserialize)]
struct ShownRegoOutcome {
    outcome: String,
}

/// `--since`: an RFC 3339 time, or a duration ago ("2h").
pub fn parse_since(s: &str) -> Result<jiff::Timestamp, super::BadArgument> {
    use super::BadArgument as Bad;
    if let Ok(t) = s.parse::<jiff::Timestamp>() {
        return Ok(t);
    }
    let ago = humantime::parse_duration(s).map_err(|_| {
        Bad(format!(
            "{s:?} is neither an RFC 3339 time nor a duration like \"2h\""
        ))
    })?;
    let ago = jiff::SignedDuration::try_from(ago).map_err(|e| Bad(e.to_string()))?;
    jiff::Timestamp::now()
        .checked_sub(ago)
        .map_err(|e| Bad(e.to_string()))
}

/// Client strings are shown escaped, so a crafted id cannot forge a row.
fn clean(s: &str) -> String {
    s.escape_debug().to_string()
}

fn session_matches(want: &str, session: &str) -> bool {
    session == want || session.rsplit_once(":/").is_some_and(|(_, id)| id == want)
}

/// Writes the table (and diffs) for `files`, a series in order.
pub fn show(files: &[PathBuf], filter: &Filter, out: &mut dyn Write) -> Result<(), AuditError> {
    writeln!(
        out,
        "{:<27} {:>6}  {:<10} {:<24} {:<20} DETAILS",
        "TIME", "SEQ", "KIND", "SESSION", "CLIENTS"
    )?;
    let mut table = Table {
        filter,
        out,
        policy: None,
    };
    for f in files {
        let file = std::fs::File::open(f).map_err(|e| AuditError::read(f, e))?;
        // Line by line: a log can be larger than memory.
        for (i, line) in std::io::BufRead::split(std::io::BufReader::new(file), b'\n').enumerate() {
            let line = line.map_err(|e| AuditError::read(f, e))?;
            if line.is_empty() {
                continue;
            }
            match serde_json::from_slice::<Value>(&line) {
                Ok(v) => table.row(&v)?,
                Err(_) => table.junk(i + 1, f, line.len())?,
            }
        }
    }
    Ok(())
}

/// The table being written, and the last policy seen (a policy row names
/// what changed since).
struct Table<'a> {
    filter: &'a Filter,
    out: &'a mut dyn Write,
    policy: Option<Value>,
}

impl Table<'_> {
    fn junk(
        &mut self,
        line: usize,
        file: &std::path::Path,
        bytes: usize,
    ) -> Result<(), AuditError> {
        writeln!(
            self.out,
            "{:<27} {:>6}  {:<10} line {line} of {} is no record ({bytes} bytes)",
            "-",
            "-",
            "junk",
            file.display(),
        )?;
        Ok(())
    }

    fn row(&mut self, v: &Value) -> Result<(), AuditError> {
        let time = v["time"].as_str().unwrap_or("-");
        if let Some(i) = &self.filter.instance {
            if v["instance"].as_str() != Some(i.as_str()) {
                return Ok(());
            }
        }
        if let Some(since) = self.filter.since {
            if time.parse::<jiff::Timestamp>().map_or(true, |t| t < since) {
                return Ok(());
            }
        }
        let seq = v["seq"].as_u64().map_or("-".into(), |s| s.to_string());
        let kind = Kind::of(v);
        if kind == Some(Kind::Transform) {
            return self.transform(v, time, &seq);
        }
        if kind == Some(Kind::Customization) {
            if self.filter.outcome.is_some() {
                return Ok(());
            }
            return self.customization(v, time, &seq);
        }
        if kind == Some(Kind::Decision) {
            return self.decision(v, time, &seq);
        }
        let scoped = self.filter.session.is_some()
            || self.filter.client.is_some()
            || self.filter.outcome.is_some();
        if scoped {
            return Ok(());
        }
        let details = self.details(kind, v, &seq)?;
        let kind = kind.map_or("?", Kind::as_str);
        writeln!(
            self.out,
            "{time:<27} {seq:>6}  {kind:<10} {:<24} {:<20} {details}",
            "", ""
        )?;
        Ok(())
    }

    /// What a record other than a transform says, in one cell.
    fn details(&mut self, kind: Option<Kind>, v: &Value, seq: &str) -> Result<String, AuditError> {
        let parse = |e: serde_json::Error| AuditError::record(seq, e);
        Ok(match kind {
            Some(Kind::Policy) => {
                let p: PolicyRecord = serde_json::from_value(v.clone()).map_err(parse)?;
                let changed = policy_changes(self.policy.as_ref(), &p.policy);
                self.policy = Some(p.policy);
                format!(
                    "policy {} {changed}",
                    &p.policy_sha256[..12.min(p.policy_sha256.len())]
                )
            }
            Some(Kind::Checkpoint) => {
                let c: CheckpointRecord = serde_json::from_value(v.clone()).map_err(parse)?;
                let to = v["seq"].as_u64().unwrap_or_default().saturating_sub(1);
                format!("signed by key {}: records {} to {to}", c.key_id, c.from_seq)
            }
            Some(Kind::Recovered) => {
                let r: RecoveredRecord = serde_json::from_value(v.clone()).map_err(parse)?;
                format!(
                    "{}: {} bytes cut at line {}, {} records not written",
                    r.reason, r.cut_bytes, r.cut_line, r.lost_records
                )
            }
            Some(Kind::Rotation) => {
                let r: RotationRecord = serde_json::from_value(v.clone()).map_err(parse)?;
                format!(
                    "continues {} (its last record {})",
                    clean(&r.previous_file),
                    r.previous_seq
                )
            }
            Some(Kind::Customization) => {
                let c: CustomizationRecord = serde_json::from_value(v.clone()).map_err(parse)?;
                c.summary()
            }
            Some(Kind::SdkSession) => {
                let r: SdkSessionRecord = serde_json::from_value(v.clone()).map_err(parse)?;
                r.summary()
            }
            Some(Kind::SessionSections) => {
                let r: SessionSectionsRecord = serde_json::from_value(v.clone()).map_err(parse)?;
                r.summary()
            }
            Some(Kind::Transform | Kind::Decision) | None => {
                format!("unknown kind {}", v["kind"])
            }
        })
    }

    /// A Rego decision's row, if the filter lets it through.
    fn decision(&mut self, v: &Value, time: &str, seq: &str) -> Result<(), AuditError> {
        let d: DecisionRecord =
            serde_json::from_value(v.clone()).map_err(|e| AuditError::record(seq, e))?;
        let f = self.filter;
        let other_session = f.session.as_deref().is_some_and(|s| {
            d.session
                .as_deref()
                .is_none_or(|have| !session_matches(s, have))
        });
        let other_client = f
            .client
            .as_ref()
            .is_some_and(|w| d.client.as_ref() != Some(w));
        let other_outcome = f.outcome.as_ref().is_some_and(|o| &d.decision.outcome != o);
        if other_session || other_client || other_outcome {
            return Ok(());
        }
        let session = d.session.as_deref().map_or("-".into(), clean);
        let client = d.client.as_deref().map_or("-".into(), clean);
        writeln!(
            self.out,
            "{time:<27} {seq:>6}  {:<10} {session:<24} {client:<20} {}",
            "decision",
            clean(&d.summary())
        )?;
        Ok(())
    }

    /// A customization row, if the filter lets it through.
    fn customization(&mut self, v: &Value, time: &str, seq: &str) -> Result<(), AuditError> {
        let c: CustomizationRecord =
            serde_json::from_value(v.clone()).map_err(|e| AuditError::record(seq, e))?;
        let f = self.filter;
        let other_session = f
            .session
            .as_deref()
            .is_some_and(|s| !session_matches(s, &c.session));
        let other_client = f
            .client
            .as_ref()
            .is_some_and(|w| c.client_id.as_ref() != Some(w));
        if other_session || other_client {
            return Ok(());
        }
        let session = clean(&c.session);
        let client = c.client_id.as_deref().map_or("-".into(), clean);
        writeln!(
            self.out,
            "{time:<27} {seq:>6}  {:<10} {session:<24} {client:<20} {}",
            "custom",
            c.summary()
        )?;
        Ok(())
    }

    /// A transform row (if the filter lets it through) and its diffs.
    fn transform(&mut self, v: &Value, time: &str, seq: &str) -> Result<(), AuditError> {
        let t: Transform =
            serde_json::from_value(v.clone()).map_err(|e| AuditError::record(seq, e))?;
        let f = self.filter;
        if f.session
            .as_deref()
            .is_some_and(|s| !session_matches(s, &t.session))
        {
            return Ok(());
        }
        if f.client
            .as_ref()
            .is_some_and(|c| !t.owners.iter().any(|o| &o.client_id == c))
        {
            return Ok(());
        }
        if f.outcome.as_ref().is_some_and(|o| {
            !t.sections
                .iter()
                .any(|s| s.rego_decision.as_ref().is_some_and(|r| &r.outcome == o))
        }) {
            return Ok(());
        }
        let clients = t
            .owners
            .iter()
            .map(|o| format!("{}:{}", clean(&o.client_id), o.outcome))
            .collect::<Vec<_>>()
            .join(",");
        let details = t
            .sections
            .iter()
            .map(|s| {
                let rego = s
                    .rego_decision
                    .as_ref()
                    .map_or(String::new(), |r| format!(" [rego:{}]", r.outcome));
                match &s.owner {
                    Some(o) => format!("{}={}{rego} ({})", s.id, s.decision, clean(o)),
                    None => format!("{}={}{rego}", s.id, s.decision),
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
        let session = clean(&t.session);
        writeln!(
            self.out,
            "{time:<27} {seq:>6}  {:<10} {session:<24} {clients:<20} {details}",
            "transform"
        )?;
        for s in &t.sections {
            let (Some(b), Some(a)) = (&s.content_before, &s.content_after) else {
                continue;
            };
            for l in unified(&s.id, b, a).iter().flat_map(|d| d.lines()) {
                writeln!(self.out, "    {}", clean(l))?;
            }
        }
        Ok(())
    }
}

/// The sections whose policy differs from the previous policy record's (the
/// first one: the sections with any rule), and any limit that changed.
fn policy_changes(before: Option<&Value>, now: &Value) -> String {
    let sections = now["sections"].as_object();
    let changed: Vec<&str> = sections
        .into_iter()
        .flatten()
        .filter(|(id, rules)| match before {
            Some(b) => b["sections"].get(id.as_str()) != Some(*rules),
            None => has_rules(rules),
        })
        .map(|(id, _)| id.as_str())
        .collect();
    let limits: Vec<&str> = [
        "transformTimeoutMs",
        "maxSections",
        "maxResponseBytes",
        "transformPrincipals",
    ]
    .into_iter()
    .filter(|k| before.is_some_and(|b| b.get(*k) != now.get(*k)))
    .collect();
    let list = |v: &[&str]| {
        if v.is_empty() {
            "none".to_owned()
        } else {
            v.join(",")
        }
    };
    match before {
        None => format!("first of this log; sections with rules: {}", list(&changed)),
        Some(_) if limits.is_empty() => format!("changed sections: {}", list(&changed)),
        Some(_) => format!(
            "changed sections: {}; changed: {}",
            list(&changed),
            limits.join(",")
        ),
    }
}

/// Whether a section's policy (as the `policy` record holds it) has any
/// rule beyond the default: a client may rewrite it freely.
fn has_rules(rules: &Value) -> bool {
    let set = |k: &str| match &rules[k] {
        Value::Null => false,
        Value::Array(a) => !a.is_empty(),
        _ => true,
    };
    rules["access"] != "transform"
        || rules["mode"] != "any"
        || [
            "override",
            "maxGrowthBytes",
            "maxShrinkBytes",
            "mustKeep",
            "deny",
            "redact",
        ]
        .into_iter()
        .any(set)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(records: &[Value], filter: &Filter) -> String {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.jsonl");
        let text: String = records.iter().map(|r| format!("{r}\n")).collect();
        std::fs::write(&p, text + "{torn\n").unwrap();
        let mut out = Vec::new();
        show(&[p], filter, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn transform(seq: u64, session: &str, client: &str, content: bool) -> Value {
        let mut s = json!({"id": "tone", "decision": "transformed", "owner": client});
        if content {
            s["contentBefore"] = "Be brief.".into();
            s["contentAfter"] = "Be brief.\nUse British English.".into();
        }
        json!({"kind": "transform", "seq": seq, "time": "2026-01-01T00:00:00Z", "session": session,
            "owners": [{"clientId": client, "outcome": "transformed", "ignored": []}], "sections": [s]})
    }

    #[test]
    fn a_table_with_every_kind_and_a_diff_when_content_is_there() {
        let recs = [
            json!({"kind": "policy", "seq": 1, "time": "2026-01-01T00:00:00Z", "policySha256": "abcdef0123456789",
                "policy": {"sections": {"safety": {"access": "hidden", "mode": "any"}, "tone": {"access": "transform", "mode": "any"}}}}),
            transform(2, "ahp-session:/a1", "ide", true),
            json!({"kind": "checkpoint", "seq": 3, "time": "2026-01-01T00:00:01Z", "keyId": "k1", "fromSeq": 1, "head": "h", "hashes": []}),
        ];
        let t = render(&recs, &Filter::default());
        assert!(t.contains("policy abcdef012345"), "{t}");
        assert!(t.contains("sections with rules: safety"), "{t}");
        assert!(
            t.contains("ahp-session:/a1")
                && t.contains("ide:transformed")
                && t.contains("tone=transformed (ide)"),
            "{t}"
        );
        assert!(t.contains("    +Use British English."), "{t}");
        assert!(t.contains("signed by key k1: records 1 to 2"), "{t}");
        assert!(t.contains("is no record"), "{t}");
    }

    #[test]
    fn a_policy_row_is_its_hash_and_the_sections_it_changed() {
        let policy = |mode: &str, timeout: u64| {
            json!({"sections": {"tone": {"access": "transform", "mode": mode},
                "safety": {"access": "hidden", "mode": "any"}}, "transformTimeoutMs": timeout})
        };
        let rec = |seq: u64, p: Value| json!({"kind": "policy", "seq": seq, "time": "2026-01-01T00:00:00Z", "policy": p, "policySha256": "0123456789abcdef"});
        let t = render(
            &[
                rec(1, policy("any", 5000)),
                rec(2, policy("append-only", 5000)),
                rec(3, policy("append-only", 9000)),
            ],
            &Filter::default(),
        );
        let rows: Vec<&str> = t
            .lines()
            .filter(|l| l.contains("policy 0123456789ab"))
            .collect();
        assert_eq!(rows.len(), 3, "{t}");
        assert!(
            rows[0].ends_with("first of this log; sections with rules: safety"),
            "{t}"
        );
        assert!(rows[1].ends_with("changed sections: tone"), "{t}");
        assert!(
            rows[2].ends_with("changed sections: none; changed: transformTimeoutMs"),
            "{t}"
        );
        assert!(!t.contains("\"sections\""), "no policy JSON in a cell: {t}");
    }

    #[test]
    fn filters_by_session_client_and_time() {
        let recs = [
            transform(1, "ahp-session:/a1", "ide", false),
            transform(2, "ahp-session:/b2", "bot\nFAKE ROW", false),
        ];
        let by_session = render(
            &recs,
            &Filter {
                session: Some("a1".into()),
                ..Default::default()
            },
        );
        assert!(
            by_session.contains("/a1") && !by_session.contains("/b2"),
            "{by_session}"
        );
        let by_client = render(
            &recs,
            &Filter {
                client: Some("bot\nFAKE ROW".into()),
                ..Default::default()
            },
        );
        assert!(
            by_client.contains("bot\\nFAKE ROW") && !by_client.contains("/a1"),
            "{by_client}"
        );
        let later = render(
            &recs,
            &Filter {
                since: Some("2027-01-01T00:00:00Z".parse().unwrap()),
                ..Default::default()
            },
        );
        assert_eq!(
            later.lines().filter(|l| l.contains("transform")).count(),
            0,
            "{later}"
        );
        assert!(parse_since("2h").unwrap() < jiff::Timestamp::now());
        assert!(parse_since("yesterday-ish").is_err());
    }
}
