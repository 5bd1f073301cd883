//! The router with `[policy.sections.ID]` rules: a rewrite that breaks one
//! keeps its original while the rest of the answer applies, a redacted
//! secret goes out as a placeholder and comes back as itself, and a swapped
//! policy applies to the next request. Same scripted peers and paused time
//! as the tests around it.

use super::*;

const TOKEN: &str = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8";

fn with_rules(toml: &'static str) -> impl FnOnce(&mut Config) {
    move |c: &mut Config| {
        let parsed = Config::parse(toml).expect("test rules parse");
        c.policy.sections = parsed.policy.sections;
    }
}

#[tokio::test(start_paused = true)]
async fn a_section_that_breaks_a_rule_keeps_its_original_and_the_rest_applies() {
    let dir = tempfile::tempdir().unwrap();
    let (router, _log) = router(
        &dir,
        with_rules(
            "[policy.sections.tone]\nmode = \"append-only\"\n\
             [policy.sections.guidelines]\ndeny = ['(?i)forbidden']\n\
             [policy.sections.identity]\naccess = \"read-only\"\n",
        ),
    );
    let mut clients = ScriptedClients::default();
    let ids = ["tone", "guidelines", "identity", "last_instructions"];
    clients.add(
        "ide",
        &ids,
        Script::Raw(json!({"sections": {
            "tone": {"content": "Be loud."},
            "guidelines": {"content": "original guidelines text, Forbidden words"},
            "identity": {"content": "original identity text (inspected)"},
            "last_instructions": {"content": "original last_instructions text +ide"},
        }})),
    );
    let original = request(&ids);

    let merged = router.route(&clients, "s", "rt", &original).await;

    let sent = clients.asked("ide")[0]["sections"].clone();
    assert_eq!(
        sent["identity"]["content"], original["identity"],
        "a read-only section is sent for inspection"
    );
    assert_eq!(merged["tone"], original["tone"]);
    assert_eq!(merged["guidelines"], original["guidelines"]);
    assert_eq!(merged["identity"], original["identity"]);
    assert_eq!(
        merged["last_instructions"], "original last_instructions text +ide",
        "the rest of the answer still applies"
    );
    let recs = records(&dir);
    let d = |id| decision(&recs[0], id);
    assert_eq!(d("tone"), ("refused:append-only".into(), json!("ide")));
    assert_eq!(d("guidelines"), ("refused:deny[0]".into(), json!("ide")));
    assert_eq!(d("identity"), ("refused:read-only".into(), json!("ide")));
    assert_eq!(d("last_instructions"), ("transformed".into(), json!("ide")));
    assert_eq!(recs[0]["owners"][0]["outcome"], "transformed");
    assert_eq!(recs[0]["policySha256"], router.policy().policy_sha256());
    assert_audited(&recs[0], &merged, &original);
}

#[tokio::test(start_paused = true)]
async fn an_answer_whose_every_change_is_refused_is_recorded_as_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (router, _log) = router(
        &dir,
        with_rules("[policy.sections.tone]\nmax_growth_bytes = 3\nmust_keep = [\"tone\"]\n"),
    );
    let mut clients = ScriptedClients::default();
    clients.add("ide", &["tone"], Script::Append(" +four"));
    let original = request(&["tone"]);

    let merged = router.route(&clients, "s", "rt", &original).await;

    assert_eq!(merged, original);
    let recs = records(&dir);
    assert_eq!(
        decision(&recs[0], "tone"),
        ("refused:max_growth_bytes".into(), json!("ide"))
    );
    assert_eq!(recs[0]["owners"][0]["outcome"], "refused");
}

#[tokio::test(start_paused = true)]
async fn a_redacted_secret_goes_out_as_a_placeholder_and_comes_back_as_itself() {
    let dir = tempfile::tempdir().unwrap();
    let (router, _log) = router(
        &dir,
        with_rules("[policy.sections.custom_instructions]\nredact = ['ghp_[A-Za-z0-9]{36}']\n"),
    );
    let mut clients = ScriptedClients::default();
    clients.add(
        "ide",
        &["custom_instructions", "tone"],
        Script::Append("\nAlways answer in French."),
    );
    let mut original = request(&["custom_instructions", "tone"]);
    let secret_text = format!("Push with {TOKEN} please.");
    original.insert("custom_instructions".into(), secret_text.clone());

    let merged = router.route(&clients, "s", "rt", &original).await;

    let asked = clients.asked("ide");
    assert!(
        !asked[0].to_string().contains("ghp_"),
        "the secret never reaches the client: {asked:?}"
    );
    assert_eq!(
        asked[0]["sections"]["custom_instructions"]["content"],
        "Push with [REDACTED#1] please."
    );
    assert_eq!(
        merged["custom_instructions"],
        format!("{secret_text}\nAlways answer in French."),
        "the kept placeholder is restored from the original"
    );
    let recs = records(&dir);
    assert_eq!(decision(&recs[0], "custom_instructions").0, "transformed");
    assert_audited(&recs[0], &merged, &original);
}

#[tokio::test(start_paused = true)]
async fn a_placeholder_never_sent_makes_the_answer_malformed() {
    let dir = tempfile::tempdir().unwrap();
    let (router, _log) = router(
        &dir,
        with_rules("[policy.sections.custom_instructions]\nredact = ['ghp_[A-Za-z0-9]{36}']\n"),
    );
    let mut clients = ScriptedClients::default();
    clients.add(
        "ide",
        &["custom_instructions", "tone"],
        Script::Raw(json!({"sections": {
            "custom_instructions": {"content": "[REDACTED#1] [REDACTED#2]"},
            "tone": {"content": "a fine rewrite"},
        }})),
    );
    let mut original = request(&["custom_instructions", "tone"]);
    original.insert("custom_instructions".into(), format!("Token {TOKEN}."));

    let merged = router.route(&clients, "s", "rt", &original).await;

    assert_eq!(merged, original, "nothing of a malformed answer applies");
    let recs = records(&dir);
    assert_eq!(recs[0]["owners"][0]["outcome"], "malformed");
    assert_eq!(decision(&recs[0], "tone").0, "malformed");
}

#[tokio::test(start_paused = true)]
async fn a_swapped_policy_applies_to_the_next_request() {
    let dir = tempfile::tempdir().unwrap();
    let (router, _log) = router(&dir, |_| {});
    let mut clients = ScriptedClients::default();
    clients.add("ide", &["tone"], Script::Append(" +ide"));
    let original = request(&["tone"]);
    let first = router.route(&clients, "s", "rt", &original).await;
    assert_eq!(first["tone"], "original tone text +ide");
    let old_hash = router.policy().policy_sha256();

    let mut cfg = Config::default();
    with_rules("[policy.sections.tone]\naccess = \"read-only\"\n")(&mut cfg);
    cfg.validate().unwrap();
    router.set_policy(Policy::from_config(&cfg).unwrap());
    let second = router.route(&clients, "s", "rt", &original).await;

    assert_eq!(second, original, "read-only now: the rewrite is refused");
    let recs = records(&dir);
    assert_eq!(recs[0]["policySha256"], old_hash);
    assert_ne!(recs[1]["policySha256"], old_hash);
    assert_eq!(recs[1]["policySha256"], router.policy().policy_sha256());
    assert_eq!(decision(&recs[1], "tone").0, "refused:read-only");
}
