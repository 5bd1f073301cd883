//! People from an identity provider: JWTs on the real WebSocket upgrade,
//! each identity a principal of its own (sessions, rate limits), refused
//! tokens 401, a rotated signing key taken without a restart, an expiring
//! token's connection closed with 1008.

use crate::support;

use ahp_bridge_join::config::Config;
use serde_json::{json, Value};
use support::jwt::*;
use support::raw::{token_status, Next, Raw};
use support::*;

struct Idp {
    dir: tempfile::TempDir,
    es: TokenSigner,
    rs: TokenSigner,
}

impl Idp {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (es, rs) = (es256("es-1"), rs256());
        write_jwks(&dir.path().join("jwks.json"), &[&es, &rs]);
        Self { dir, es, rs }
    }

    fn config(&self, server: &str) -> Config {
        let text = format!(
            "[server]\n{server}\n{}",
            jwt_toml(&self.dir.path().join("jwks.json"))
        );
        let mut cfg = Config::parse(&text).unwrap();
        let base = test_config();
        cfg.server.listen = base.server.listen;
        cfg.admin.listen = None;
        cfg
    }
}

async fn init(c: &ahp::Client, id: &str) {
    c.initialize(id.into(), vec!["1.0.0".into()], vec!["ahp-root://".into()])
        .await
        .expect("initialize");
}

#[tokio::test]
async fn rs256_and_es256_tokens_name_principals_with_their_roles() {
    let idp = Idp::new();
    let r = start_host(idp.config("")).await;
    let alice = sign(&idp.rs, &claims("alice", &["copilot-users"]));
    let c = client_at_url(&format!("ws://{}/?token={alice}", r.addr)).await;
    init(&c, "alice-1").await;
    let created: Result<Value, _> = c
        .request(
            "createSession",
            json!({"channel": "ahp-session:/a1", "provider": "copilot"}),
        )
        .await;
    assert!(created.is_ok(), "copilot-users participate: {created:?}");

    let bob = sign(&idp.es, &claims("bob", &[]));
    let c = client_at_url(&format!("ws://{}/?token={bob}", r.addr)).await;
    init(&c, "bob-1").await;
    let e = c
        .request::<_, Value>(
            "createSession",
            json!({"channel": "ahp-session:/b1", "provider": "copilot"}),
        )
        .await
        .unwrap_err();
    let e = format!("{e:?}");
    assert!(
        e.contains("corp:bob") && e.contains("participate"),
        "observe only: {e}"
    );
    // bob does not see alice's session, nor reach it: each identity owns its own.
    let listed: Value = c.request("listSessions", json!({})).await.unwrap();
    assert_eq!(listed["items"], json!([]), "{listed}");
    let e = c
        .request::<_, Value>("subscribe", json!({"channel": "ahp-session:/a1"}))
        .await
        .unwrap_err();
    assert_eq!(
        rpc_code(&e),
        -32001,
        "not found for another identity: {e:?}"
    );
}

#[tokio::test]
async fn every_bad_token_is_401() {
    let idp = Idp::new();
    let r = start_host(idp.config("")).await;
    let ok = claims("alice", &["copilot-users"]);
    let with = |k: &str, v: Value| {
        let mut c = ok.clone();
        c[k] = v;
        c
    };
    let mut bad_sig = sign(&idp.es, &ok);
    bad_sig.truncate(bad_sig.len() - 4);
    bad_sig.push_str("AAAA");
    let public_pem = std::fs::read(fixture("rsa-test-key.pub.pem")).unwrap();
    let hs256 = jsonwebtoken::encode(
        &jsonwebtoken::Header {
            kid: Some("rsa-test".into()),
            ..jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256)
        },
        &ok,
        &jsonwebtoken::EncodingKey::from_secret(&public_pem),
    )
    .unwrap();
    let cases = [
        ("expired", sign(&idp.es, &with("exp", json!(now() - 3600)))),
        (
            "nbf in the future",
            sign(&idp.es, &with("nbf", json!(now() + 3600))),
        ),
        (
            "wrong iss",
            sign(&idp.es, &with("iss", json!("https://evil.test"))),
        ),
        (
            "wrong aud",
            sign(&idp.es, &with("aud", json!("someone-else"))),
        ),
        ("bad signature", bad_sig),
        (
            "alg none",
            forged(&json!({"alg": "none", "typ": "JWT"}), &ok, ""),
        ),
        ("HS256 with the public key", hs256),
    ];
    for (what, token) in cases {
        assert_eq!(token_status(r.addr, &token).await, 401, "{what}");
    }
    assert_eq!(
        token_status(r.addr, &sign(&idp.es, &ok)).await,
        101,
        "the good one"
    );
}

#[tokio::test]
async fn a_new_signing_key_is_taken_when_the_key_set_file_gains_it() {
    let idp = Idp::new();
    let r = start_host(idp.config("")).await;
    let rotated = es256("es-2");
    let token = sign(&rotated, &claims("alice", &[]));
    assert_eq!(
        token_status(r.addr, &token).await,
        401,
        "not in the set yet"
    );
    write_jwks(
        &idp.dir.path().join("jwks.json"),
        &[&idp.es, &idp.rs, &rotated],
    );
    // The unknown kid makes the bridge read the set again, at most every
    // 10 s: the first try after the write may still meet the old set.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        if token_status(r.addr, &token).await == 101 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new key is never taken"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn each_identity_has_its_own_rate_limit() {
    let idp = Idp::new();
    let r = start_host(idp.config("actions_per_second = 1\nactions_burst = 1")).await;
    let mut conns = Vec::new();
    for who in ["alice", "bob"] {
        let t = sign(&idp.es, &claims(who, &["copilot-users"]));
        let mut raw = Raw::connect(&format!("ws://{}/?token={t}", r.addr)).await;
        raw.call(
            json!(1),
            "initialize",
            json!({"clientId": who, "protocolVersions": ["1.0.0"], "initialSubscriptions": []}),
        )
        .await;
        conns.push((who, raw));
    }
    for (who, raw) in conns.iter_mut() {
        for seq in 1..=2 {
            let action = json!({"type": "root/noSuchAction"});
            raw.send_text(
                json!({"jsonrpc": "2.0", "method": "dispatchAction",
                       "params": {"channel": "ahp-root://", "clientSeq": seq, "action": action}})
                .to_string(),
            )
            .await;
        }
        // The second action of each identity meets its own limit, which names it.
        let reason = loop {
            match raw.next().await {
                Next::Json(v) => {
                    let why = v.to_string();
                    if why.contains("rate limit") {
                        break why;
                    }
                }
                Next::Closed(c) => panic!("closed: {c:?}"),
            }
        };
        assert!(reason.contains(&format!("corp:{who}")), "{reason}");
    }
}

#[tokio::test]
async fn an_expiring_token_closes_its_connection_with_1008() {
    let idp = Idp::new();
    // No leeway, so the token's exp is what the upgrade sees too.
    let mut cfg = idp.config("");
    cfg.jwt[0].leeway = std::time::Duration::ZERO;
    let r = start_host(cfg).await;
    let mut short = claims("alice", &["copilot-users"]);
    short["exp"] = json!(now() + 2);
    let t = sign(&idp.es, &short);
    let mut raw = Raw::connect(&format!("ws://{}/?token={t}", r.addr)).await;
    let init = raw
        .call(
            json!(1),
            "initialize",
            json!({"clientId": "c", "protocolVersions": ["1.0.0"], "initialSubscriptions": []}),
        )
        .await;
    assert!(init.get("result").is_some(), "{init}");
    let closed = loop {
        match raw.next().await {
            Next::Closed(c) => break c,
            Next::Json(_) => continue,
        }
    };
    let (code, reason) = closed.expect("a close frame");
    assert_eq!(code, 1008);
    assert!(reason.contains("expired"), "{reason}");
}

/// The real binary, as an operator runs it: a static token, a JWT by
/// header and by query, a refused JWT, a ticket used and reused. No
/// credential is ever in its log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_jwt_or_ticket_reaches_the_log() {
    use ahp_bridge_join::ScriptedModel;
    use support::http::post;
    use support::process::{ide_principal, BridgeProcess, TOKEN};
    let idp = Idp::new();
    let model = ScriptedModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let principals = format!(
        "{}\n{}",
        ide_principal(),
        jwt_toml(&idp.dir.path().join("jwks.json"))
    );
    let b = BridgeProcess::start_with_principals(&model, dir.path(), "", &principals);
    let jwt = sign(&idp.rs, &claims("alice", &["copilot-users"]));
    let mut expired = claims("alice", &[]);
    expired["exp"] = json!(now() - 3600);
    let expired = sign(&idp.es, &expired);

    assert_eq!(token_status(b.addr, TOKEN).await, 101);
    assert_eq!(token_status(b.addr, &jwt).await, 101);
    assert_eq!(token_status(b.addr, &expired).await, 401);
    let bearer = format!("Bearer {jwt}");
    let answer = post(b.addr, "/ticket", &[("Authorization", &bearer)]).unwrap();
    assert_eq!(answer.status, 200, "{answer:?}");
    let body: Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(body["principal"], "corp:alice");
    assert_eq!(body["expiresIn"], 30);
    let ticket = body["ticket"].as_str().unwrap().to_owned();
    let by_ticket = |t: &str| format!("ws://{}/?ticket={t}", b.addr);
    let first = tokio_tungstenite::connect_async(by_ticket(&ticket)).await;
    assert!(first.is_ok(), "the ticket lets it in once");
    let again = tokio_tungstenite::connect_async(by_ticket(&ticket)).await;
    assert!(again.is_err(), "and only once");
    let refused = post(
        b.addr,
        "/ticket",
        &[("Authorization", "Bearer wrong-token-0123456789")],
    )
    .unwrap();
    assert_eq!(refused.status, 401);
    drop(first);

    // The refusals and the ticket were logged (so the log was looked at)...
    let mark = 0;
    b.wait_log(mark, "ticket issued").await;
    b.wait_log(mark, "token refused: expired").await;
    // ... and no credential, nor a recognisable part of one, is in it.
    let signature = |t: &str| t.rsplit('.').next().unwrap().to_owned();
    let secrets = [
        TOKEN.to_owned(),
        jwt.clone(),
        signature(&jwt),
        expired.clone(),
        ticket,
    ];
    for line in b.all_log_lines() {
        for s in &secrets {
            assert!(
                !line.contains(s.as_str()),
                "a credential in the log: {line}"
            );
        }
    }
}
