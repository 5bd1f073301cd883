use std::path::PathBuf;

use serde_json::json;

use super::*;
use crate::checkpoint::Signer;
use crate::log::{AuditLog, Options};
use crate::record::{now_rfc3339, PolicyRecord};
use ahp_bridge_base::config::FsyncPolicy;

fn policy(n: u64) -> PolicyRecord {
    PolicyRecord {
        time: now_rfc3339(),
        policy: json!({ "n": n, "text": "abc" }),
        policy_sha256: "00".into(),
    }
}

fn sample() -> String {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.jsonl");
    let (log, _) = AuditLog::open(&p, FsyncPolicy::Never).unwrap();
    for i in 0..4 {
        log.append(&policy(i)).unwrap();
    }
    drop(log);
    std::fs::read_to_string(&p).unwrap()
}

fn join(v: &[&str]) -> String {
    v.iter().map(|l| format!("{l}\n")).collect()
}

#[test]
fn intact_chain_verifies() {
    let v = verify_text(&sample()).unwrap();
    assert_eq!((v.records, v.first_seq, v.last_seq), (4, 1, 4));
    assert_eq!(v.head.len(), 64);
}

#[test]
fn records_without_a_kind_are_transforms_and_still_verify() {
    let mut r = json!({"seq": 1, "prev": GENESIS, "sections": []});
    r["hash"] = record_hash(GENESIS, &r).into();
    assert_eq!(verify_text(&format!("{r}\n")).unwrap().records, 1);
}

#[test]
fn tampering_is_caught_at_the_right_record() {
    let good = sample();
    let lines: Vec<&str> = good.lines().collect();
    let altered = good.replacen("\"n\":1", "\"n\":7", 1);
    assert_eq!(verify_text(&altered).unwrap_err().seq, 2);
    let e = verify_text(&join(&[lines[0], lines[1], lines[3]])).unwrap_err();
    assert_eq!(e.seq, 3);
    assert!(e.reason.contains("missing"), "{e}");
    assert_eq!(
        verify_text(&join(&[lines[0], lines[2], lines[1], lines[3]]))
            .unwrap_err()
            .seq,
        2
    );
    let e = verify_text(&good[..good.len() - 10]).unwrap_err();
    assert_eq!(e.seq, 4);
    assert!(e.reason.contains("cut"));
    // Junk mid-file, even an empty line, is no torn write: nothing accounts for it.
    for junk in ["{garbage", "", "{\"no\":\"seq\"}"] {
        let e = verify_text(&join(&[lines[0], lines[1], junk, lines[2], lines[3]])).unwrap_err();
        assert_eq!((e.seq, e.line), (3, 3), "{junk:?}: {e}");
        assert!(e.reason.contains("no recovered record"), "{e}");
    }
    // Junk at the end.
    let e = verify_text(&join(&[lines[0], "{junk"])).unwrap_err();
    assert_eq!((e.seq, e.line), (2, 2), "{e}");
}

fn file_with(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.jsonl");
    std::fs::write(&p, text).unwrap();
    (dir, p)
}

#[test]
fn a_cut_tail_or_an_emptied_file_fails_only_with_outside_evidence() {
    let good = sample();
    let lines: Vec<&str> = good.lines().collect();
    let v = verify_text(&good).unwrap();
    let head = Check {
        expect_head: Some((4, v.head.clone())),
        ..Default::default()
    };
    let (_d, p) = file_with(&good);
    verify_files(&[p], &head).unwrap().unwrap();
    for (what, text, first_bad) in [
        ("last removed", join(&lines[..3]), 4),
        ("last three removed", join(&lines[..1]), 2),
        ("emptied", String::new(), 1),
    ] {
        verify_text(&text).unwrap();
        let (_d, p) = file_with(&text);
        let e = verify_files(&[p], &head).unwrap().unwrap_err();
        assert_eq!(e.seq, first_bad, "{what}: {e}");
    }
    let wrong = Check {
        expect_head: Some((3, v.head.clone())),
        ..Default::default()
    };
    let (_d, p) = file_with(&good);
    assert_eq!(verify_files(&[p], &wrong).unwrap().unwrap_err().seq, 3);
    // Against a shipped copy: the same records, with a line the daemon damaged.
    let shipped = format!(
        "{good}{{\"kind\":\"shipping_gap\",\"dropped\":2}}\n{}\n",
        &lines[1][..20]
    );
    let (_s, sp) = file_with(&shipped);
    let against = Check {
        against: Some(sp),
        ..Default::default()
    };
    let (_d, p) = file_with(&good);
    let ok = verify_files(&[p], &against).unwrap().unwrap();
    assert!(
        ok.notes
            .iter()
            .any(|n| n.contains("4 shipped records match")),
        "{:?}",
        ok.notes
    );
    assert!(ok.notes.iter().any(|n| n.contains("shipping_gap")));
    let (_d, p) = file_with(&join(&lines[..2]));
    let e = verify_files(&[p], &against).unwrap().unwrap_err();
    assert_eq!(e.seq, 3, "{e}");
    let (_d, p) = file_with("");
    assert_eq!(verify_files(&[p], &against).unwrap().unwrap_err().seq, 1);
}

#[test]
fn expect_head_parses() {
    let h = "a".repeat(64);
    assert_eq!(
        super::super::against::parse_head(&format!("7:{h}")).unwrap(),
        (7, h)
    );
    assert!(super::super::against::parse_head("7").is_err());
    assert!(super::super::against::parse_head("x:ab").is_err());
}

/// A chain recomputed after an edit, as anyone with write access but no key can.
fn recompute(lines: &[String]) -> String {
    let mut prev = GENESIS.to_string();
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        let mut v: Value = serde_json::from_str(l).unwrap();
        v["seq"] = (i as u64 + 1).into();
        v["prev"] = prev.clone().into();
        v.as_object_mut().unwrap().remove("hash");
        let h = record_hash(&prev, &v);
        v["hash"] = h.clone().into();
        prev = h;
        out.push_str(&format!("{v}\n"));
    }
    out
}

#[test]
fn a_recomputed_chain_holds_without_the_key_and_fails_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.jsonl");
    let mut o = Options::new(FsyncPolicy::Never);
    o.signer = Some(Signer::from_seed([5; 32]));
    o.checkpoint_every = 3;
    let (log, _) = AuditLog::open_with(&p, o).unwrap();
    for i in 0..6 {
        log.append(&policy(i)).unwrap();
    }
    drop(log);
    let good = std::fs::read_to_string(&p).unwrap();
    let lines: Vec<String> = good.lines().map(String::from).collect();
    // 1 2 3 [cp 4] 5 6 7 [cp 8]
    let key = Check {
        key: Some(Signer::from_seed([5; 32]).verifying_key()),
        ..Default::default()
    };
    let check = |text: &str| {
        let (_d, p) = file_with(text);
        verify_files(&[p], &key).unwrap()
    };
    assert_eq!(check(&good).unwrap().checkpoints, 2);
    let mut edited = lines.clone();
    edited[5] = edited[5].replace("\"n\":4", "\"n\":9");
    let forged = recompute(&edited);
    verify_text(&forged).expect("without the key a recomputed chain holds");
    let e = check(&forged).unwrap_err();
    assert_eq!(e.seq, 6, "{e}");
    assert!(e.reason.contains("checkpoint 8 signed"), "{e}");
    // Removed, and renumbered.
    let mut removed = lines.clone();
    removed.remove(1);
    assert_eq!(check(&recompute(&removed)).unwrap_err().seq, 2);
    // Every checkpoint stripped.
    let stripped: Vec<String> = lines
        .iter()
        .filter(|l| !l.contains("checkpoint"))
        .cloned()
        .collect();
    let e = check(&recompute(&stripped)).unwrap_err();
    assert!(e.reason.contains("no signed checkpoint"), "{e}");
    // The last checkpoint stripped (no renumbering needed): the first one holds,
    // the rest is an unsigned tail only outside evidence can vouch for.
    let v = check(&join(
        &lines[..7].iter().map(String::as_str).collect::<Vec<_>>(),
    ))
    .unwrap();
    assert_eq!((v.checkpoints, v.unsigned_tail), (1, 3));
}

/// A log written by the bridge named `instance`, four records.
fn log_of(dir: &std::path::Path, instance: &str) -> PathBuf {
    let p = dir.join(format!("{instance}.jsonl"));
    let mut o = Options::new(FsyncPolicy::Never);
    o.instance = instance.into();
    let (log, _) = AuditLog::open_with(&p, o).unwrap();
    for i in 0..4 {
        log.append(&policy(i)).unwrap();
    }
    p
}

#[test]
fn one_bridges_chain_is_checked_inside_a_collector_file_that_holds_a_fleets() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        log_of(dir.path(), "bridge-a"),
        log_of(dir.path(), "bridge-b"),
    );
    let read = |p: &PathBuf| std::fs::read_to_string(p).unwrap();
    let (la, lb) = (read(&a), read(&b));
    for l in la.lines() {
        assert_eq!(
            serde_json::from_str::<Value>(l).unwrap()["instance"],
            "bridge-a"
        );
    }
    // What one collector writes for the fleet: both, interleaved (the same
    // sequence numbers twice).
    let collected: String = la
        .lines()
        .zip(lb.lines())
        .flat_map(|(x, y)| [x, y])
        .map(|l| format!("{l}\n"))
        .collect();
    let (_c, collected) = file_with(&collected);
    let of = |instance: &str| Check {
        against: Some(collected.clone()),
        instance: Some(instance.into()),
        ..Default::default()
    };
    for (p, i) in [(&a, "bridge-a"), (&b, "bridge-b")] {
        let ok = verify_files(std::slice::from_ref(p), &of(i))
            .unwrap()
            .unwrap();
        assert!(
            ok.notes
                .iter()
                .any(|n| n.contains("4 shipped records match")),
            "{i}: {:?}",
            ok.notes
        );
    }
    // Without --instance the other bridge's records are a contradiction.
    let all = Check {
        against: Some(collected.clone()),
        ..Default::default()
    };
    assert!(verify_files(std::slice::from_ref(&a), &all)
        .unwrap()
        .is_err());
    // A bridge's local log altered: its check fails, the other's holds.
    std::fs::write(&a, la.replace("\"n\":2", "\"n\":9")).unwrap();
    assert!(verify_files(&[a], &of("bridge-a")).unwrap().is_err());
    assert!(verify_files(&[b], &of("bridge-b")).unwrap().is_ok());
}
