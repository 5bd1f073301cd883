//! `audit show`: the log as a table a person can read, one row per record
//! (time, seq, kind, session, clients, what happened to each section), and
//! with `include_content` a unified diff of every rewritten section. It reads;
//! `audit verify` judges.

use std::io::Write;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

use super::diff::unified;
use super::record::{CheckpointRecord, Kind, PolicyRecord, RecoveredRecord, RotationRecord};

/// Which records to show.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// A session URI, or its id (`a1` for `ahp-session:/a1`).
    pub session: Option<String>,
    pub client: Option<String>,
    pub since: Option<jiff::Timestamp>,
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
}

/// `--since`: an RFC 3339 time, or a duration ago ("2h").
pub fn parse_since(s: &str) -> Result<jiff::Timestamp, String> {
    if let Ok(t) = s.parse::<jiff::Timestamp>() {
        return Ok(t);
    }
    let ago = humantime::parse_duration(s)
        .map_err(|_| format!("{s:?} is neither an RFC 3339 time nor a duration like \"2h\""))?;
    let ago = jiff::SignedDuration::try_from(ago).map_err(|e| e.to_string())?;
    jiff::Timestamp::now()
        .checked_sub(ago)
        .map_err(|e| e.to_string())
}

/// Client strings are shown escaped, so a crafted id cannot forge a row.
fn clean(s: &str) -> String {
    s.escape_debug().to_string()
}

fn session_matches(want: &str, session: &str) -> bool {
    session == want || session.rsplit_once(":/").is_some_and(|(_, id)| id == want)
}

/// Writes the table (and diffs) for `files`, a series in order.
pub fn show(files: &[PathBuf], filter: &Filter, out: &mut dyn Write) -> anyhow::Result<()> {
    writeln!(
        out,
        "{:<27} {:>6}  {:<10} {:<24} {:<20} DETAILS",
        "TIME", "SEQ", "KIND", "SESSION", "CLIENTS"
    )?;
    for f in files {
        let file = std::fs::File::open(f)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", f.display()))?;
        // Line by line: a log can be larger than memory.
        for (i, line) in std::io::BufRead::split(std::io::BufReader::new(file), b'\n').enumerate() {
            let line = line.map_err(|e| anyhow::anyhow!("cannot read {}: {e}", f.display()))?;
            if line.is_empty() {
                continue;
            }
            let Ok(v) = serde_json::from_slice::<Value>(&line) else {
                writeln!(
                    out,
                    "{:<27} {:>6}  {:<10} line {} of {} is no record ({} bytes)",
                    "-",
                    "-",
                    "junk",
                    i + 1,
                    f.display(),
                    line.len()
                )?;
                continue;
            };
            row(&v, filter, out)?;
        }
    }
    Ok(())
}

fn row(v: &Value, filter: &Filter, out: &mut dyn Write) -> anyhow::Result<()> {
    let time = v["time"].as_str().unwrap_or("-");
    if let Some(since) = filter.since {
        if time.parse::<jiff::Timestamp>().map_or(true, |t| t < since) {
            return Ok(());
        }
    }
    let seq = v["seq"].as_u64().map_or("-".into(), |s| s.to_string());
    let kind = Kind::of(v);
    let scoped = filter.session.is_some() || filter.client.is_some();
    if kind != Some(Kind::Transform) && scoped {
        return Ok(());
    }
    let plain = |details: String| (String::new(), String::new(), details);
    let parse = |e: serde_json::Error| anyhow::anyhow!("record {seq}: {e}");
    let (session, clients, details) = match kind {
        Some(Kind::Transform) => {
            let t: Transform = serde_json::from_value(v.clone()).map_err(parse)?;
            if filter
                .session
                .as_deref()
                .is_some_and(|s| !session_matches(s, &t.session))
            {
                return Ok(());
            }
            if let Some(c) = &filter.client {
                if !t.owners.iter().any(|o| &o.client_id == c) {
                    return Ok(());
                }
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
                .map(|s| match &s.owner {
                    Some(o) => format!("{}={} ({})", s.id, s.decision, clean(o)),
                    None => format!("{}={}", s.id, s.decision),
                })
                .collect::<Vec<_>>()
                .join(" ");
            writeln!(
                out,
                "{time:<27} {seq:>6}  {:<10} {:<24} {clients:<20} {details}",
                "transform",
                clean(&t.session)
            )?;
            for s in &t.sections {
                if let (Some(b), Some(a)) = (&s.content_before, &s.content_after) {
                    if let Some(d) = unified(&s.id, b, a) {
                        for l in d.lines() {
                            writeln!(out, "    {}", clean(l))?;
                        }
                    }
                }
            }
            return Ok(());
        }
        Some(Kind::Policy) => {
            let p: PolicyRecord = serde_json::from_value(v.clone()).map_err(parse)?;
            plain(format!(
                "policy {} {}",
                &p.policy_sha256[..12.min(p.policy_sha256.len())],
                p.policy
            ))
        }
        Some(Kind::Checkpoint) => {
            let c: CheckpointRecord = serde_json::from_value(v.clone()).map_err(parse)?;
            let to = v["seq"].as_u64().unwrap_or_default().saturating_sub(1);
            plain(format!(
                "signed by key {}: records {} to {to}",
                c.key_id, c.from_seq
            ))
        }
        Some(Kind::Recovered) => {
            let r: RecoveredRecord = serde_json::from_value(v.clone()).map_err(parse)?;
            plain(format!(
                "{}: {} bytes cut at line {}, {} records not written",
                r.reason, r.cut_bytes, r.cut_line, r.lost_records
            ))
        }
        Some(Kind::Rotation) => {
            let r: RotationRecord = serde_json::from_value(v.clone()).map_err(parse)?;
            plain(format!(
                "continues {} (its last record {})",
                clean(&r.previous_file),
                r.previous_seq
            ))
        }
        None => plain(format!("unknown kind {}", v["kind"])),
    };
    let kind = kind.map_or("?", Kind::as_str);
    writeln!(
        out,
        "{time:<27} {seq:>6}  {kind:<10} {session:<24} {clients:<20} {details}"
    )?;
    Ok(())
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
            json!({"kind": "policy", "seq": 1, "time": "2026-01-01T00:00:00Z", "policy": {"restricted": ["safety"]}, "policySha256": "abcdef0123456789"}),
            transform(2, "ahp-session:/a1", "ide", true),
            json!({"kind": "checkpoint", "seq": 3, "time": "2026-01-01T00:00:01Z", "keyId": "k1", "fromSeq": 1, "head": "h", "hashes": []}),
        ];
        let t = render(&recs, &Filter::default());
        assert!(t.contains("policy abcdef012345"), "{t}");
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
