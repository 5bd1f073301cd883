//! Time a signed checkpoint adds to one audited append.
//!
//! Two logs in one temp dir, written alternately in one run: unsigned, and
//! signed with `checkpoint_every = 1` (every record followed by an Ed25519
//! checkpoint, the most signing the bridge can be told to do). The record is
//! a transform record of 3 sections with hashes only, as the router writes
//! it; fsync "batch" (the default: no fsync on the append path).
//! Run: cargo bench --bench audit_signing [-- ITERATIONS]

use std::time::{Duration, Instant};

use ahp_bridge_join::audit::Signer;
use ahp_bridge_join::audit::{
    now_rfc3339, OwnerOutcome, OwnerRecord, SectionDecision, SectionRecord, TransformRecord,
};
use ahp_bridge_join::audit::{AuditLog, Options};
use ahp_bridge_join::config::FsyncPolicy;

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn record(i: usize) -> TransformRecord {
    let sections = [
        ("tone", 600),
        ("guidelines", 1200),
        ("environment_context", 900),
    ]
    .into_iter()
    .map(|(id, n)| {
        let before = format!("{i}{}", "x".repeat(n));
        let after = format!("{before} (house style)");
        SectionRecord::new(
            id,
            SectionDecision::Transformed,
            Some("bench"),
            &before,
            &after,
            false,
        )
    })
    .collect();
    TransformRecord {
        time: now_rfc3339(),
        session: "ahp-session:/bench".into(),
        runtime_session: "rt".into(),
        owners: vec![OwnerRecord {
            principal: Some("ide".into()),
            client_id: "bench".into(),
            outcome: OwnerOutcome::Transformed,
            ignored: vec![],
        }],
        sections,
        latency_us: 80,
        policy_sha256: "0".repeat(64),
    }
}

fn main() {
    let iterations: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5000);
    let dir = tempfile::tempdir().unwrap();
    let (plain, _) = AuditLog::open(&dir.path().join("plain.jsonl"), FsyncPolicy::Batch).unwrap();
    let mut o = Options::new(FsyncPolicy::Batch);
    o.signer = Some(Signer::from_seed([42; 32]));
    o.checkpoint_every = 1;
    let (signed, _) = AuditLog::open_with(&dir.path().join("signed.jsonl"), o).unwrap();
    // The default, for scale: one checkpoint per 256 records.
    let mut o = Options::new(FsyncPolicy::Batch);
    o.signer = Some(Signer::from_seed([42; 32]));
    let (amortized, _) = AuditLog::open_with(&dir.path().join("default.jsonl"), o).unwrap();
    let round = |i: usize| {
        let r = record(i);
        let t0 = Instant::now();
        plain.append(&r).unwrap();
        let p = t0.elapsed();
        let t0 = Instant::now();
        signed.append(&r).unwrap();
        let s = t0.elapsed();
        let t0 = Instant::now();
        amortized.append(&r).unwrap();
        (p, s, t0.elapsed())
    };
    for i in 0..500 {
        round(i); // warm-up
    }
    let (mut base, mut sig, mut dflt) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..iterations {
        let (p, s, d) = round(i);
        base.push(p);
        sig.push(s);
        dflt.push(d);
    }
    let (b50, b99, s50, s99) = (
        pct(&mut base, 0.5),
        pct(&mut base, 0.99),
        pct(&mut sig, 0.5),
        pct(&mut sig, 0.99),
    );
    println!(
        "audited append, {iterations} iterations, transform record of 3 sections, fsync batch"
    );
    println!("  unsigned                     : p50 {b50:?}  p99 {b99:?}");
    println!("  signed, checkpoint_every = 1 : p50 {s50:?}  p99 {s99:?}");
    println!(
        "  signed, every 256 (default)  : p50 {:?}  p99 {:?}",
        pct(&mut dflt, 0.5),
        pct(&mut dflt, 0.99)
    );
    println!(
        "  added at p50                 : {:?}  (ratio {:.2}x)",
        s50.saturating_sub(b50),
        s50.as_secs_f64() / b50.as_secs_f64()
    );
    println!(
        "  added at p99                 : {:?}  (ratio {:.2}x)",
        s99.saturating_sub(b99),
        s99.as_secs_f64() / b99.as_secs_f64()
    );
}
