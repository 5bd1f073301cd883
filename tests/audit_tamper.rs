//! The tamper matrix on a real signed log: the real Copilot CLI against the
//! scripted model writes it through the bridge (key from `audit keygen`,
//! checkpoints every 2 records and at shutdown); then every single-record
//! change, removal, reorder, junk insertion, and the same with the chain
//! recomputed without the key, is checked with the binary's `audit verify
//! --pubkey`, which must fail naming the first bad sequence number. A cut tail
//! and an emptied file need outside evidence (`--expect-head`, `--against`).

use crate::support;

use std::path::PathBuf;

use ahp_bridge_join::audit::{record_hash, GENESIS};
use serde_json::{json, Value};
use support::e2e::{ready_session, run_turn, start_stack};
use support::*;

/// Runs the binary; (success, stdout + stderr).
fn run(args: &[&str]) -> (bool, String) {
    support::process::run_bin(args)
}

struct Matrix {
    dir: tempfile::TempDir,
    pubkey: PathBuf,
    n: usize,
}

impl Matrix {
    /// `audit verify --pubkey` on `lines` (plus `extra` args); None when it
    /// passes, else the first bad sequence number it names.
    fn first_bad(&mut self, lines: &[String], extra: &[&str]) -> Option<u64> {
        self.n += 1;
        let p = self.dir.path().join(format!("case{}.jsonl", self.n));
        std::fs::write(
            &p,
            lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
        )
        .unwrap();
        let mut args = vec![
            "audit",
            "verify",
            p.to_str().unwrap(),
            "--pubkey",
            self.pubkey.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let (ok, out) = run(&args);
        if ok {
            return None;
        }
        let at = out
            .find("audit verify: record ")
            .unwrap_or_else(|| panic!("no record named: {out}"));
        let rest = &out[at + "audit verify: record ".len()..];
        Some(rest[..rest.find(' ').unwrap()].parse().unwrap())
    }

    fn expect(&mut self, what: &str, lines: &[String], extra: &[&str], first_bad: u64) {
        assert_eq!(self.first_bad(lines, extra), Some(first_bad), "{what}");
    }
}

fn parse(l: &str) -> Value {
    serde_json::from_str(l).unwrap()
}

/// One field of the record changed, its hash left as it was.
fn changed(l: &str) -> String {
    let mut v = parse(l);
    v["time"] = json!("1999-01-01T00:00:00Z");
    v.to_string()
}

/// What someone who can write the file but has no key can do: renumber and
/// rechain everything.
fn recompute(lines: &[String]) -> Vec<String> {
    let mut prev = GENESIS.to_string();
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let mut v = parse(l);
            v["seq"] = json!(i + 1);
            v["prev"] = json!(prev);
            v.as_object_mut().unwrap().remove("hash");
            let h = record_hash(&prev, &v);
            v["hash"] = json!(h);
            prev = h;
            v.to_string()
        })
        .collect()
}

/// A signed log written by the bridge: policy, then four transforms, with a
/// checkpoint after every two records and one at shutdown.
async fn real_signed_log() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let keys = tempfile::tempdir().unwrap();
    let prefix = keys.path().join("audit");
    let (ok, out) = run(&["audit", "keygen", "--out", prefix.to_str().unwrap()]);
    assert!(ok, "{out}");
    assert!(out.contains("key id:"), "{out}");
    let (again, out) = run(&["audit", "keygen", "--out", prefix.to_str().unwrap()]);
    assert!(!again && out.contains("not overwritten"), "{out}");
    let st = start_stack(|c| {
        c.audit.signing_key = Some(keys.path().join("audit.key"));
        c.audit.checkpoint_every = 2;
        c.audit.include_content = true;
    })
    .await;
    let c = initialized(&st.bridge, "ide").await;
    answer_by_appending(&c, "rewritten");
    for i in 1..=4 {
        let entry = json!({"clientId": "ide", "tools": [], "systemMessageTransform": {"sections": ["tone"]}});
        ready_session(&c, &format!("ahp-session:/t{i}"), Some(entry)).await;
        assert_eq!(
            run_turn(&c, &format!("t{i}"), "t1", "hi").await.kind,
            "complete"
        );
    }
    st.bridge.stop(std::time::Duration::from_secs(10)).await;
    let log = st.dir.path().join("audit.jsonl");
    let copy = keys.path().join("audit.jsonl");
    std::fs::copy(&log, &copy).unwrap();
    (keys, copy, prefix.with_extension("pub"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tampering_is_detected_naming_the_first_bad_record() {
    let (_keys, log, pubkey) = real_signed_log().await;
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<String> = text.lines().map(String::from).collect();
    let kinds: Vec<String> = lines
        .iter()
        .map(|l| parse(l)["kind"].as_str().unwrap().into())
        .collect();
    assert_eq!(
        kinds,
        [
            "policy",
            "transform",
            "checkpoint",
            "transform",
            "transform",
            "checkpoint",
            "transform",
            "checkpoint"
        ],
        "the last checkpoint is the one written at shutdown"
    );
    let n = lines.len() as u64;
    let mut m = Matrix {
        dir: tempfile::tempdir().unwrap(),
        pubkey: pubkey.clone(),
        n: 0,
    };
    // `audit show` on it: one session's row, and the diff of its rewrite.
    let (ok, out) = run(&["audit", "show", log.to_str().unwrap(), "--session", "t2"]);
    assert!(ok, "{out}");
    let rows: Vec<&str> = out.lines().filter(|l| l.contains(" transform ")).collect();
    assert_eq!(rows.len(), 1, "{out}");
    assert!(
        rows[0].contains("ahp-session:/t2")
            && rows[0].contains("ide:transformed")
            && rows[0].contains("tone=transformed (ide)"),
        "{out}"
    );
    assert!(
        out.contains("    --- tone (before)") && out.contains("    +rewritten"),
        "{out}"
    );
    let (ok, out) = run(&["audit", "show", log.to_str().unwrap()]);
    assert!(
        ok && out.contains(" policy ") && out.contains("signed by key"),
        "{out}"
    );
    // Untouched: it verifies, every checkpoint checked, and says what it cannot vouch for.
    let (ok, out) = run(&[
        "audit",
        "verify",
        log.to_str().unwrap(),
        "--pubkey",
        pubkey.to_str().unwrap(),
    ]);
    assert!(ok, "{out}");
    assert!(
        out.contains("ok: 8 records") && out.contains("signed: 3 checkpoints verified"),
        "{out}"
    );
    assert!(out.contains("tail: not checked"), "{out}");
    let head = out
        .lines()
        .find_map(|l| l.strip_prefix("head: "))
        .unwrap()
        .to_owned();
    assert_eq!(
        m.first_bad(
            &lines,
            &["--expect-head", &head, "--against", log.to_str().unwrap()]
        ),
        None
    );

    for i in 0..lines.len() {
        let seq = i as u64 + 1;
        let mut c = lines.clone();
        c[i] = changed(&lines[i]);
        m.expect(&format!("record {seq} changed"), &c, &[], seq);
        m.expect(
            &format!("record {seq} changed, chain recomputed"),
            &recompute(&c),
            &[],
            seq,
        );
        let mut junk = lines.clone();
        junk.insert(i, "{\"torn\":".into());
        m.expect(&format!("junk before record {seq}"), &junk, &[], seq);
        if seq < n {
            let mut r = lines.clone();
            r.remove(i);
            m.expect(&format!("record {seq} removed"), &r, &[], seq);
            m.expect(
                &format!("record {seq} removed, chain recomputed"),
                &recompute(&r),
                &[],
                seq,
            );
            let mut s = lines.clone();
            s.swap(i, i + 1);
            m.expect(
                &format!("records {seq} and {} swapped", seq + 1),
                &s,
                &[],
                seq,
            );
            m.expect(
                &format!("records {seq} and {} swapped, chain recomputed", seq + 1),
                &recompute(&s),
                &[],
                seq,
            );
        }
    }
    let mut junk = lines.clone();
    junk.push(String::new());
    m.expect("an empty line appended", &junk, &[], n + 1);
    // Without the key a recomputed chain passes: the signature is what catches it.
    let mut c = lines.clone();
    c[3] = changed(&lines[3]);
    let p = m.dir.path().join("forged.jsonl");
    std::fs::write(
        &p,
        recompute(&c)
            .iter()
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
    )
    .unwrap();
    let (ok, out) = run(&["audit", "verify", p.to_str().unwrap()]);
    assert!(ok && out.contains("unsigned: no --pubkey"), "{out}");
    // Every checkpoint stripped and the chain recomputed.
    let stripped: Vec<String> = lines
        .iter()
        .filter(|l| parse(l)["kind"] != "checkpoint")
        .cloned()
        .collect();
    m.expect("every checkpoint stripped", &recompute(&stripped), &[], 1);

    // A cut tail or an emptied file passes on its own (nothing left to contradict it)...
    let cuts = [
        ("the last record removed", 7usize, n),
        ("the last three removed", 5, n - 2),
        ("the file emptied", 0, 1),
    ];
    for (what, keep, _) in cuts {
        let (ok, out) = {
            let p = m.dir.path().join("cut.jsonl");
            std::fs::write(
                &p,
                lines[..keep]
                    .iter()
                    .map(|l| format!("{l}\n"))
                    .collect::<String>(),
            )
            .unwrap();
            run(&["audit", "verify", p.to_str().unwrap()])
        };
        assert!(ok, "{what}: {out}");
    }
    // ...and fails with the head written down elsewhere, or the shipped copy.
    for (what, keep, first_bad) in cuts {
        let kept = lines[..keep].to_vec();
        m.expect(what, &kept, &["--expect-head", &head], first_bad);
        m.expect(
            what,
            &kept,
            &["--against", log.to_str().unwrap()],
            first_bad,
        );
    }
    // And a different key is refused.
    let other = m.dir.path().join("other");
    assert!(run(&["audit", "keygen", "--out", other.to_str().unwrap()]).0);
    let (ok, out) = run(&[
        "audit",
        "verify",
        log.to_str().unwrap(),
        "--pubkey",
        &format!("{}.pub", other.display()),
    ]);
    assert!(!ok && out.contains("not by the given key"), "{out}");
}
