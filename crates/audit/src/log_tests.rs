//! The writer on real files: reopening, torn tails, failed writes, checkpoints
//! and rotation, each checked with `verify`.

use std::io::Write;

use serde_json::{json, Value};

use super::*;
use crate::checkpoint::Signer;
use crate::record::PolicyRecord;
use crate::verify::{verify_files, verify_text, Check};

fn policy(n: u64) -> PolicyRecord {
    PolicyRecord {
        time: now_rfc3339(),
        policy: json!({ "n": n }),
        policy_sha256: "00".into(),
    }
}

fn lines(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn signed(every: u64) -> Options {
    let mut o = Options::new(FsyncPolicy::Never);
    o.signer = Some(Signer::from_seed([3; 32]));
    o.checkpoint_every = every;
    o
}

#[tokio::test]
async fn chain_continues_after_reopen_and_a_torn_tail_is_accounted_for() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.jsonl");
    {
        let (log, rec) = AuditLog::open(&p, FsyncPolicy::Always).unwrap();
        assert_eq!(rec.records, 0);
        log.append(&policy(1)).unwrap();
        log.append(&policy(2)).unwrap();
    }
    // A crash mid-write leaves half a line.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&p)
        .unwrap()
        .write_all(b"{\"seq\":3,\"x\"")
        .unwrap();
    assert!(verify_text(&std::fs::read_to_string(&p).unwrap()).is_err());
    let (log, rec) = AuditLog::open(&p, FsyncPolicy::Never).unwrap();
    assert_eq!(
        rec,
        Recovery {
            records: 2,
            torn_bytes: Some(12)
        }
    );
    let r = log.append(&policy(3)).unwrap();
    assert_eq!(
        (r["seq"].as_u64(), r["kind"].as_str()),
        (Some(4), Some("policy"))
    );
    let text = std::fs::read_to_string(&p).unwrap();
    assert!(
        text.contains("{\"seq\":3,\"x\"\n"),
        "torn bytes kept as evidence"
    );
    let recs = lines(&p);
    assert_eq!(recs[2]["kind"], "recovered");
    assert_eq!(
        recs[2]["cutBytes"], 13,
        "the torn bytes and the newline ending them"
    );
    assert_eq!(recs[2]["cutLine"], 3);
    let v = verify_text(&text).unwrap();
    assert_eq!(v.records, 4);
    assert!(v.notes[0].contains("line 3"), "{:?}", v.notes);
}

#[test]
fn a_record_cut_just_before_its_newline_is_still_whole() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.jsonl");
    let (log, _) = AuditLog::open(&p, FsyncPolicy::Never).unwrap();
    log.append(&policy(1)).unwrap();
    log.append(&policy(2)).unwrap();
    drop(log);
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, text.trim_end()).unwrap();
    let (log, rec) = AuditLog::open(&p, FsyncPolicy::Never).unwrap();
    assert_eq!(
        rec,
        Recovery {
            records: 2,
            torn_bytes: None
        }
    );
    log.append(&policy(3)).unwrap();
    let v = verify_text(&std::fs::read_to_string(&p).unwrap()).unwrap();
    assert_eq!((v.records, v.notes.len()), (3, 0));
}

#[test]
fn bytes_a_failed_write_could_not_cut_back_are_accounted_for_on_a_fresh_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.jsonl");
    let (log, _) = AuditLog::open(&p, FsyncPolicy::Never).unwrap();
    log.append(&policy(1)).unwrap();
    {
        // What a write that failed part-way, and a failed ftruncate, leave.
        log.lock().leave_torn_for_test(b"{\"kind\":\"pol", 1);
    }
    let r = log.append(&policy(2)).unwrap();
    assert_eq!(r["seq"], 3, "the recovered record took seq 2");
    let recs = lines(&p);
    assert_eq!(recs[1]["kind"], "recovered");
    assert_eq!(recs[1]["lostRecords"], 1);
    let v = verify_text(&std::fs::read_to_string(&p).unwrap()).unwrap();
    assert_eq!(v.records, 3);
    // The same junk without its recovered record fails, naming the line.
    let text = std::fs::read_to_string(&p).unwrap();
    let mut ls: Vec<&str> = text.lines().collect();
    ls.remove(2);
    let e = verify_text(&(ls.join("\n") + "\n")).unwrap_err();
    assert_eq!((e.seq, e.line), (2, 2), "{e}");
}

#[test]
fn a_write_that_fails_is_counted_in_the_next_recovered_record() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.jsonl");
    let (log, _) = AuditLog::open(&p, FsyncPolicy::Never).unwrap();
    log.append(&policy(1)).unwrap();
    log.lock().fail_writes_for_test(true);
    assert!(log.append(&policy(2)).is_err());
    assert!(log.append(&policy(3)).is_err());
    log.lock().fail_writes_for_test(false);
    log.append(&policy(4)).unwrap();
    let recs = lines(&p);
    assert_eq!(recs.len(), 3);
    assert_eq!(
        (recs[1]["kind"].as_str(), recs[1]["lostRecords"].as_u64()),
        (Some("recovered"), Some(2))
    );
    assert_eq!(recs[1]["cutBytes"], 0);
    assert_eq!(recs[2]["policy"]["n"], 4);
    verify_text(&std::fs::read_to_string(&p).unwrap()).unwrap();
}

#[test]
fn checkpoints_every_n_records_and_at_close_verify_with_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.jsonl");
    let (log, _) = AuditLog::open_with(&p, signed(2)).unwrap();
    for n in 0..5 {
        log.append(&policy(n)).unwrap();
    }
    let kinds: Vec<String> = lines(&p)
        .iter()
        .map(|r| r["kind"].as_str().unwrap().into())
        .collect();
    assert_eq!(
        kinds,
        [
            "policy",
            "policy",
            "checkpoint",
            "policy",
            "policy",
            "checkpoint",
            "policy"
        ]
    );
    log.close().unwrap();
    assert_eq!(lines(&p).last().unwrap()["kind"], "checkpoint");
    assert!(
        log.checkpoint_now().unwrap().is_none(),
        "nothing new to cover"
    );
    let key = Signer::from_seed([3; 32]).verifying_key();
    let check = Check {
        key: Some(key),
        ..Default::default()
    };
    let v = verify_files(std::slice::from_ref(&p), &check)
        .unwrap()
        .unwrap();
    assert_eq!((v.records, v.checkpoints, v.unsigned_tail), (8, 3, 0));
    // Reopened, the writer picks up what the last checkpoint covered.
    drop(log);
    let (log, _) = AuditLog::open_with(&p, signed(2)).unwrap();
    log.append(&policy(9)).unwrap();
    log.append(&policy(10)).unwrap();
    let v = verify_files(std::slice::from_ref(&p), &check)
        .unwrap()
        .unwrap();
    assert_eq!((v.checkpoints, v.unsigned_tail), (4, 0));
    let other = Check {
        key: Some(Signer::from_seed([4; 32]).verifying_key()),
        ..Default::default()
    };
    let e = verify_files(&[p], &other).unwrap().unwrap_err();
    assert_eq!(e.seq, 3, "{e}");
    assert!(e.reason.contains("not by the given key"), "{e}");
}

#[tokio::test(start_paused = true)]
async fn a_checkpoint_follows_the_interval_when_records_were_written() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.jsonl");
    let mut o = signed(1000);
    o.checkpoint_interval = std::time::Duration::from_secs(60);
    let (log, _) = AuditLog::open_with(&p, o).unwrap();
    log.append(&policy(1)).unwrap();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(600);
    while lines(&p).len() < 2 {
        assert!(tokio::time::Instant::now() < deadline, "no checkpoint");
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    assert_eq!(lines(&p)[1]["kind"], "checkpoint");
    // Nothing new: no further checkpoint.
    tokio::time::sleep(std::time::Duration::from_secs(180)).await;
    assert_eq!(lines(&p).len(), 2);
}

#[test]
fn rotation_links_files_into_one_series() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    let p = logs.join("audit.jsonl");
    let mut o = signed(1000);
    o.max_bytes = 4096;
    let (log, _) = AuditLog::open_with(&p, o).unwrap();
    let big = "x".repeat(900);
    for n in 0..20 {
        log.append(&PolicyRecord {
            time: now_rfc3339(),
            policy: json!({ "n": n, "pad": big }),
            policy_sha256: "00".into(),
        })
        .unwrap();
    }
    log.close().unwrap();
    let files = crate::rotation::series(std::slice::from_ref(&logs))
        .unwrap()
        .files;
    assert!(files.len() >= 4, "{files:?}");
    assert_eq!(files.last().unwrap(), &p, "the active file is the last");
    for f in &files[..files.len() - 1] {
        assert!(std::fs::metadata(f).unwrap().len() < 4096 + 2048);
        assert_eq!(lines(f).last().unwrap()["kind"], "checkpoint");
    }
    let second = lines(&files[1]);
    assert_eq!(second[0]["kind"], "rotation");
    assert_eq!(
        second[0]["previousFile"],
        files[0].file_name().unwrap().to_str().unwrap()
    );
    assert_eq!(second[0]["prev"], lines(&files[0]).last().unwrap()["hash"]);
    let check = Check {
        key: Some(Signer::from_seed([3; 32]).verifying_key()),
        ..Default::default()
    };
    let v = verify_files(&files, &check).unwrap().unwrap();
    assert_eq!(v.first_seq, 1);
    assert_eq!(v.unsigned_tail, 0);
    // A file missing from the series is named.
    let mut gap = files.clone();
    gap.remove(1);
    let e = verify_files(&gap, &check).unwrap().unwrap_err();
    assert!(e.reason.contains("follows"), "{e}");
    // One rotated file alone verifies from where it starts, with a note.
    let v = verify_files(&files[1..2], &check).unwrap().unwrap();
    assert!(v.notes[0].contains("continues"), "{:?}", v.notes);
}

#[test]
fn a_default_checkpoint_fits_a_default_rsyslog_message() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.jsonl");
    let mut o = signed(ahp_bridge_base::config::AuditConfig::default().checkpoint_every);
    o.fsync = FsyncPolicy::Never;
    let (log, _) = AuditLog::open_with(&p, o).unwrap();
    for n in 0..256 {
        log.append(&policy(n)).unwrap();
    }
    let cp = lines(&p).pop().unwrap();
    assert_eq!(cp["kind"], "checkpoint");
    // rsyslog's default maxMessageSize is 8 KiB, header included.
    assert!(
        cp.to_string().len() < 8192 - 200,
        "{}",
        cp.to_string().len()
    );
}

#[test]
fn an_old_file_rotates_by_age() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("audit.jsonl");
    let mut o = Options::new(FsyncPolicy::Never);
    o.max_age = std::time::Duration::from_nanos(1);
    let (log, _) = AuditLog::open_with(&p, o).unwrap();
    log.append(&policy(1)).unwrap();
    log.append(&policy(2)).unwrap();
    let rotated = dir.path().join("audit.jsonl.1");
    assert_eq!(
        lines(&rotated).len(),
        1,
        "the first file ends before the second record"
    );
    let now = lines(&p);
    assert_eq!(
        (now[0]["kind"].as_str(), now[0]["previousFile"].as_str()),
        (Some("rotation"), Some("audit.jsonl.1"))
    );
    assert_eq!(now[1]["seq"], 3);
    let v = verify_files(
        &crate::rotation::series(&[dir.path().to_owned()])
            .unwrap()
            .files,
        &Check::default(),
    )
    .unwrap()
    .unwrap();
    assert_eq!(v.records, 3);
}

#[test]
fn a_junk_line_longer_than_any_record_is_streamed_and_still_accounted_for() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.jsonl");
    let (log, _) = AuditLog::open(&p, FsyncPolicy::Never).unwrap();
    log.append(&policy(1)).unwrap();
    let junk = vec![b'z'; 300 * 1024]; // past verify's line limit in tests (64 KiB)
    {
        log.lock().leave_torn_for_test(&junk, 0);
    }
    log.append(&policy(2)).unwrap();
    let text = std::fs::read_to_string(&p).unwrap();
    let v = verify_text(&text).unwrap();
    assert_eq!(v.records, 3);
    assert!(
        v.notes[0].contains(&format!("{} bytes", junk.len() + 1)),
        "{:?}",
        v.notes
    );
    let lines: Vec<&str> = text.lines().collect();
    let unaccounted = format!("{}\n{}\n{}\n", lines[0], lines[1], lines[3]);
    let e = verify_text(&unaccounted).unwrap_err();
    assert_eq!((e.seq, e.line), (2, 2), "{e}");
}

#[test]
fn a_quick_append_is_only_a_line_and_declines_anything_that_may_block() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("q.jsonl");
    let (log, _) = AuditLog::open_with(&p, signed(3)).unwrap();
    // A line: written and chained like any append.
    assert!(log.append_if_quick(&policy(1)).unwrap().is_ok());
    assert!(log.append_if_quick(&policy(2)).unwrap().is_ok());
    // The next record brings a checkpoint (an ed25519 signature): declined,
    // nothing written.
    assert!(log.append_if_quick(&policy(3)).is_none());
    assert_eq!(lines(&p).len(), 2);
    log.append(&policy(3)).unwrap();
    // The lock held (a flusher, another writer): declined.
    let held = log.lock();
    assert!(log.append_if_quick(&policy(4)).is_none());
    drop(held);
    // Waiting for the disk is never quick.
    let (always, _) = AuditLog::open(&dir.path().join("a.jsonl"), FsyncPolicy::Always).unwrap();
    assert!(always.append_if_quick(&policy(1)).is_none());
    let check = Check {
        key: Some(Signer::from_seed([3; 32]).verifying_key()),
        ..Default::default()
    };
    let v = verify_files(std::slice::from_ref(&p), &check)
        .unwrap()
        .unwrap();
    assert_eq!((v.records, v.checkpoints), (4, 1));
}
