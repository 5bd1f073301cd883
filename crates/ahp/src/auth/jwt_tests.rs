//! Tokens signed in the test with generated ES256 and Ed25519 keys and the
//! RSA key in `fixtures/jwt/`, checked against key sets in files.

use std::path::{Path, PathBuf};

use ahp_bridge_testkit::{
    ed25519, es256, fixture, forged, jwks_json, now, rs256, sign_as, write_jwks, TokenSigner,
    ISSUER,
};
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk};
use jsonwebtoken::{encode, EncodingKey, Header};
use serde_json::json;

use super::*;
use ahp_bridge_base::config::Config;

/// Alice, in the admins' group, for ten minutes.
pub(super) fn claims() -> Value {
    json!({"iss": ISSUER, "aud": "ahp", "sub": "alice", "exp": now() + 600,
           "groups": ["copilot-admins", "unrelated"]})
}

/// `[[jwt]] corp` reading `jwks`, with `lines` (roles and the like).
pub(super) fn config(jwks: &str, lines: &str) -> Config {
    let text = format!(
        "[[jwt]]\nname = \"corp\"\nissuer = \"{ISSUER}\"\naudiences = [\"ahp\", \"ahp-alt\"]\njwks = {jwks:?}\nroles_claim = \"groups\"\n{lines}\n[jwt.roles]\n\"copilot-admins\" = [\"admin\"]\n\"devs\" = [\"participate\", \"customize\"]\n"
    );
    let cfg = Config::parse(&text).unwrap();
    cfg.validate().unwrap();
    cfg
}

/// A key set file with `signers`, and issuers reading it.
fn with_file(dir: &Path, signers: &[&TokenSigner], lines: &str) -> (PathBuf, Config, Issuers) {
    let path = dir.join("jwks.json");
    write_jwks(&path, signers);
    let cfg = config(path.to_str().unwrap(), lines);
    let issuers = Issuers::from_config(cfg.reloadable(), None);
    (path, cfg, issuers)
}

#[test]
fn the_rsa_fixture_jwk_is_its_key() {
    let r = rs256();
    let made = Jwk::from_encoding_key(&r.key, Algorithm::RS256).unwrap();
    let fixture: Jwk = serde_json::from_value(r.jwk.clone()).unwrap();
    let (AlgorithmParameters::RSA(a), AlgorithmParameters::RSA(b)) =
        (&made.algorithm, &fixture.algorithm)
    else {
        panic!("both RSA")
    };
    assert_eq!((&a.n, &a.e), (&b.n, &b.e));
}

#[tokio::test]
async fn rs256_es256_and_eddsa_tokens_name_principals_with_mapped_roles() {
    let dir = tempfile::tempdir().unwrap();
    let (r, e0, e, d) = (rs256(), es256("ec-0"), es256("ec-1"), ed25519("ed-1"));
    let (_, _, issuers) = with_file(
        dir.path(),
        &[&r, &e0, &e, &d],
        "default_roles = [\"observe\"]",
    );
    assert!(!issuers.is_empty());
    assert_eq!(issuers.names(), vec!["corp".to_string()]);
    let c = claims();
    for (s, kid) in [(&r, "rsa-test"), (&e, "ec-1"), (&d, "ed-1")] {
        let v = issuers.verify(&sign_as(s, Some(kid), &c)).await.unwrap();
        assert_eq!(v.principal.name, "corp:alice", "{:?}", s.alg);
        assert_eq!(v.issuer, "corp");
        assert!(v.principal.is_admin() && v.principal.has(Role::Observe));
        assert!(!v.principal.has(Role::Participate));
        let exp = c["exp"].as_u64().unwrap();
        assert_eq!(v.expires_at, UNIX_EPOCH + Duration::from_secs(exp));
        assert_eq!(
            issuers.standing("corp", v.fingerprint),
            IssuerStanding::Valid
        );
    }
    // A developer, with a single group as a string and the other audience;
    // no kid: each key for the algorithm is tried.
    let dev = json!({"iss": ISSUER, "aud": ["elsewhere", "ahp-alt"], "sub": "bob",
                     "exp": now() + 60, "groups": "devs"});
    let v = issuers.verify(&sign_as(&e, None, &dev)).await.unwrap();
    assert_eq!(v.principal.name, "corp:bob");
    assert!(v.principal.has(Role::Participate) && v.principal.has(Role::Customize));
    assert!(v.principal.has(Role::Observe) && !v.principal.is_admin());
    assert!(
        !v.principal.sees("someone"),
        "[server] session_visibility: owner"
    );
    // No group at all: the default role only.
    let plain = json!({"iss": ISSUER, "aud": "ahp", "sub": "carol", "exp": now() + 60});
    let v = issuers
        .verify(&sign_as(&d, Some("ed-1"), &plain))
        .await
        .unwrap();
    assert!(v.principal.has(Role::Observe) && !v.principal.has(Role::Participate));
    // Another claim names the principal; the entry's own visibility.
    let (_, _, issuers) = with_file(
        dir.path(),
        &[&e],
        "principal_claim = \"email\"\nsession_visibility = \"all\"",
    );
    let mut c = claims();
    c["email"] = json!("alice@example.com");
    c["groups"] = json!(["devs"]);
    let v = issuers
        .verify(&sign_as(&e, Some("ec-1"), &c))
        .await
        .unwrap();
    assert_eq!(v.principal.name, "corp:alice@example.com");
    assert!(v.principal.sees("someone"));
    // No default role, and groups that map to none.
    c["groups"] = json!(["unrelated"]);
    let refused = issuers.verify(&sign_as(&e, Some("ec-1"), &c)).await;
    assert_eq!(refused.unwrap_err(), JwtRefused::NoRole);
}

#[tokio::test]
async fn expired_premature_foreign_and_misaddressed_tokens_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let e = es256("ec-1");
    let (_, _, issuers) = with_file(dir.path(), &[&e], "default_roles = [\"observe\"]");
    let check = |changes: Value| {
        let mut c = claims();
        for (k, v) in changes.as_object().unwrap() {
            if v.is_null() {
                c.as_object_mut().unwrap().remove(k);
            } else {
                c[k] = v.clone();
            }
        }
        let token = sign_as(&e, Some("ec-1"), &c);
        let issuers = &issuers;
        async move { issuers.verify(&token).await.map(|v| v.principal.name) }
    };
    let t = now();
    assert_eq!(check(json!({})).await.unwrap(), "corp:alice");
    let cases = [
        (json!({"exp": t - 3600}), JwtRefused::Expired),
        (json!({"nbf": t + 3600}), JwtRefused::NotYetValid),
        (json!({"iss": "https://evil.test"}), JwtRefused::NoIssuer),
        (json!({"iss": null}), JwtRefused::NoIssuer),
        (json!({"aud": "other"}), JwtRefused::WrongAudience),
        (json!({"aud": ["x", "y"]}), JwtRefused::WrongAudience),
        (json!({"aud": null}), JwtRefused::ClaimMissing("aud".into())),
        (json!({"exp": null}), JwtRefused::ClaimMissing("exp".into())),
        (
            json!({"sub": null}),
            JwtRefused::PrincipalClaim("sub".into()),
        ),
        (json!({"sub": 42}), JwtRefused::PrincipalClaim("sub".into())),
        (json!({"sub": ""}), JwtRefused::PrincipalClaim("sub".into())),
        (
            json!({"sub": "a\nb"}),
            JwtRefused::PrincipalClaim("sub".into()),
        ),
        (
            json!({"sub": "x".repeat(257)}),
            JwtRefused::PrincipalClaim("sub".into()),
        ),
        (
            json!({"groups": 5}),
            JwtRefused::RolesClaim("groups".into()),
        ),
        (
            json!({"groups": ["devs", 5]}),
            JwtRefused::RolesClaim("groups".into()),
        ),
    ];
    for (changes, want) in cases {
        let got = check(changes.clone()).await;
        assert_eq!(got, Err(want), "{changes}");
        let said = got.unwrap_err().to_string();
        assert!(!said.contains("alice") && !said.contains("evil"), "{said}");
    }
    // Within the leeway (60 s) a token just expired or not quite valid passes.
    assert!(check(json!({"exp": t - 30})).await.is_ok());
    assert!(check(json!({"nbf": t + 30})).await.is_ok());
    assert!(check(json!({"sub": "x".repeat(256)})).await.is_ok());
}

#[tokio::test]
async fn bad_signatures_alg_none_and_hmac_key_confusion_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (r, e) = (rs256(), es256("ec-1"));
    let (_, _, issuers) = with_file(dir.path(), &[&r, &e], "default_roles = [\"observe\"]");
    let c = claims();
    let refused = |token: String| {
        let issuers = &issuers;
        async move { issuers.verify(&token).await.unwrap_err() }
    };
    // Another key under the same kid; a payload swapped under a signature.
    let impostor = es256("ec-1");
    assert_eq!(
        refused(sign_as(&impostor, Some("ec-1"), &c)).await,
        JwtRefused::BadSignature
    );
    let good = sign_as(&e, Some("ec-1"), &c);
    let mut bob = c.clone();
    bob["sub"] = json!("bob");
    let other = sign_as(&e, Some("ec-1"), &bob);
    let swapped = {
        let g: Vec<&str> = good.split('.').collect();
        let o: Vec<&str> = other.split('.').collect();
        format!("{}.{}.{}", g[0], o[1], g[2])
    };
    assert_eq!(refused(swapped).await, JwtRefused::BadSignature);
    // alg none, however spelt, with or without a signature.
    for none in ["none", "None", "NONE"] {
        let t = forged(&json!({"alg": none, "typ": "JWT"}), &c, "");
        assert!(looks_like_jwt(&t));
        assert_eq!(refused(t).await, JwtRefused::AlgNone);
    }
    // HS256 "signed" with the RSA public key as the secret (key confusion),
    // naming the RSA key's kid: refused for its algorithm, before any key.
    let pem = std::fs::read(fixture("rsa-test-key.pub.pem")).unwrap();
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("rsa-test".into());
    let confused = encode(&header, &c, &EncodingKey::from_secret(&pem)).unwrap();
    let why = refused(confused).await;
    assert_eq!(why, JwtRefused::AlgNotAccepted("HS256"));
    assert_eq!(
        why.to_string(),
        "algorithm HS256 not accepted (RS256, ES256, EdDSA only)"
    );
    for (alg, name) in [(Algorithm::HS512, "HS512"), (Algorithm::PS256, "PS256")] {
        let key = if alg == Algorithm::PS256 {
            rs256().key
        } else {
            EncodingKey::from_secret(&pem)
        };
        let t = encode(&Header::new(alg), &c, &key).unwrap();
        assert_eq!(refused(t).await, JwtRefused::AlgNotAccepted(name));
    }
    let t = forged(&json!({"alg": "XY999"}), &c, "c2ln");
    assert_eq!(
        refused(t).await,
        JwtRefused::AlgNotAccepted("(unregistered)")
    );
    // An ES256 token naming the RSA key; a header this verifier cannot honour.
    assert_eq!(
        refused(sign_as(&e, Some("rsa-test"), &c)).await,
        JwtRefused::KeyAlgMismatch
    );
    let crit = forged(
        &json!({"alg": "ES256", "crit": ["exp"], "exp": 1}),
        &c,
        "c2ln",
    );
    assert_eq!(refused(crit).await, JwtRefused::Critical);
    for bad in ["a.b", "a.b.c.d", "!!.b.c", "e30.e30.x", &good[1..]] {
        assert_eq!(
            refused(bad.to_string()).await,
            JwtRefused::Malformed,
            "{bad}"
        );
    }
}

#[test]
fn jwts_are_told_from_static_tokens() {
    let c = claims();
    let e = es256("ec-1");
    assert!(looks_like_jwt(&sign_as(&e, Some("ec-1"), &c)));
    assert!(looks_like_jwt(&forged(&json!({"alg": "HS256"}), &c, "")));
    for not in [
        "0123456789abcdef-policy",
        "a.b.c",
        "e30.e30.",                           // `{}`: no alg
        &forged(&json!({"alg": 1}), &c, "x"), // alg not a string
        &forged(&json!({"alg": "ES256"}), &c, "a b"),
        &format!("x{}", sign_as(&e, None, &c)), // a header that no longer decodes
    ] {
        assert!(!looks_like_jwt(not), "{not}");
    }
}

/// Rewrites a file in place and puts its modification time back: a change
/// a stat cannot see (the same size, inode and time).
fn rewrite_unseen(path: &Path, signers: &[&TokenSigner]) {
    let before = std::fs::metadata(path).unwrap();
    let bytes = jwks_json(signers);
    assert_eq!(bytes.len() as u64, before.len(), "the same size");
    std::fs::write(path, bytes).unwrap();
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(before.modified().unwrap()).unwrap();
}

#[tokio::test]
async fn an_unknown_kid_rereads_the_file_and_a_changed_file_is_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let (k1, k2, k3) = (es256("k1"), es256("k2"), ed25519("k3"));
    let (path, _, issuers) = with_file(dir.path(), &[&k1], "default_roles = [\"observe\"]");
    let c = claims();
    let (t1, t2, t3) = (
        sign_as(&k1, Some("k1"), &c),
        sign_as(&k2, Some("k2"), &c),
        sign_as(&k3, Some("k3"), &c),
    );
    assert!(issuers.verify(&t1).await.is_ok());
    // The file gains k2 unseen by a stat: the unknown kid reads it again.
    rewrite_unseen(&path, &[&k2]);
    assert_eq!(
        issuers.verify(&t2).await.unwrap().principal.name,
        "corp:alice"
    );
    // That refresh was the one allowed for 10 s: k1, gone, is not looked for.
    assert_eq!(
        issuers.verify(&t1).await.unwrap_err(),
        JwtRefused::UnknownKid
    );
    assert_eq!(
        issuers.verify(&sign_as(&k3, None, &c)).await.unwrap_err(),
        JwtRefused::NoKey("EdDSA")
    );
    // A change a stat sees is read at once, refresh allowance or not.
    write_jwks(&path, &[&k2, &k3]);
    assert!(issuers.verify(&t3).await.is_ok());
    // A file that stops parsing keeps the keys read before.
    std::fs::write(&path, b"{\"keys\": ").unwrap();
    assert!(issuers.verify(&t3).await.is_ok());
    assert!(issuers.verify(&t2).await.is_ok());
}

#[tokio::test]
async fn a_file_replaced_by_a_rename_or_a_symlink_swap_is_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let (k1, k2, k3) = (es256("k1"), es256("k2"), rs256());
    let (path, _, issuers) = with_file(dir.path(), &[&k1], "default_roles = [\"observe\"]");
    let c = claims();
    let (t1, t2) = (sign_as(&k1, Some("k1"), &c), sign_as(&k2, Some("k2"), &c));
    let t3 = sign_as(&k3, Some("rsa-test"), &c);
    assert!(issuers.verify(&t1).await.is_ok());
    // Spend the unknown-kid refresh, so only the stat can find what follows.
    assert_eq!(
        issuers.verify(&t2).await.unwrap_err(),
        JwtRefused::UnknownKid
    );
    // The same size, written elsewhere and renamed over it.
    let next = dir.path().join("jwks.json.new");
    write_jwks(&next, &[&k2]);
    std::fs::rename(&next, &path).unwrap();
    assert!(issuers.verify(&t2).await.is_ok());
    assert_eq!(
        issuers.verify(&t1).await.unwrap_err(),
        JwtRefused::UnknownKid
    );
    // As a Kubernetes Secret mounts it: jwks.json -> ..data/jwks.json, and
    // ..data -> a timestamped folder, swapped for a new one; the path's own
    // link never changes.
    #[cfg(unix)]
    {
        use std::os::unix::fs::symlink;
        let mount = dir.path().join("mount");
        for (ts, signer) in [("ts1", &k1), ("ts2", &k3)] {
            std::fs::create_dir_all(mount.join(ts)).unwrap();
            write_jwks(&mount.join(ts).join("jwks.json"), &[signer]);
        }
        symlink("ts1", mount.join("..data")).unwrap();
        let link = mount.join("jwks.json");
        symlink("..data/jwks.json", &link).unwrap();
        let cfg = config(link.to_str().unwrap(), "default_roles = [\"observe\"]");
        let issuers = Issuers::from_config(cfg.reloadable(), None);
        assert!(issuers.verify(&t1).await.is_ok());
        assert_eq!(
            issuers.verify(&t3).await.unwrap_err(),
            JwtRefused::UnknownKid
        );
        symlink("ts2", mount.join("..data_tmp")).unwrap();
        std::fs::rename(mount.join("..data_tmp"), mount.join("..data")).unwrap();
        assert!(issuers.verify(&t3).await.is_ok());
    }
}

#[tokio::test]
async fn a_missing_file_is_read_once_it_appears() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("later.json");
    let cfg = config(path.to_str().unwrap(), "default_roles = [\"observe\"]");
    let issuers = Issuers::from_config(cfg.reloadable(), None);
    let e = es256("k1");
    let t = sign_as(&e, Some("k1"), &claims());
    let why = issuers.verify(&t).await.unwrap_err();
    assert_eq!(why, JwtRefused::KeysUnavailable("corp".into()));
    assert_eq!(
        why.to_string(),
        "the key set of issuer corp is not available"
    );
    write_jwks(&path, &[&e]);
    assert!(issuers.verify(&t).await.is_ok());
}

#[tokio::test]
async fn symmetric_weak_and_mislabelled_keys_are_never_used() {
    let dir = tempfile::tempdir().unwrap();
    let e = es256("ec-1");
    let mut labelled_rs = es256("ec-rs");
    labelled_rs.jwk["alg"] = json!("RS256");
    let mut for_encryption = es256("ec-enc");
    for_encryption.jwk["use"] = json!("enc");
    let oct = TokenSigner {
        alg: Algorithm::HS256,
        key: EncodingKey::from_secret(b"s"),
        jwk: json!({"kty": "oct", "kid": "oct", "k": "cw"}),
    };
    let weak = TokenSigner {
        alg: Algorithm::RS256,
        key: rs256().key,
        jwk: json!({"kty": "RSA", "kid": "weak", "n": BASE64URL_NOPAD.encode(&[0xc5; 128]), "e": "AQAB"}),
    };
    let (_, _, issuers) = with_file(
        dir.path(),
        &[&e, &labelled_rs, &for_encryption, &oct, &weak],
        "default_roles = [\"observe\"]",
    );
    let c = claims();
    assert!(issuers.verify(&sign_as(&e, Some("ec-1"), &c)).await.is_ok());
    let why = issuers
        .verify(&sign_as(&oct, Some("oct"), &c))
        .await
        .unwrap_err();
    assert_eq!(why, JwtRefused::AlgNotAccepted("HS256"));
    // Each left out of the set: the kid is unknown (a kept key would give
    // "bad signature" for the 1024-bit RSA one, or be used for the others).
    for (s, kid) in [
        (&labelled_rs, "ec-rs"),
        (&for_encryption, "ec-enc"),
        (&weak, "weak"),
    ] {
        let why = issuers
            .verify(&sign_as(s, Some(kid), &c))
            .await
            .unwrap_err();
        assert_eq!(why, JwtRefused::UnknownKid, "{kid}");
    }
}

#[tokio::test]
async fn standing_tells_valid_changed_and_gone() {
    let dir = tempfile::tempdir().unwrap();
    let e = es256("k1");
    let (_, mut cfg, before) = with_file(dir.path(), &[&e], "default_roles = [\"observe\"]");
    let v = before
        .verify(&sign_as(&e, Some("k1"), &claims()))
        .await
        .unwrap();
    let (name, fp) = (v.issuer.as_str(), v.fingerprint);
    let same = Issuers::from_config(cfg.reloadable(), Some(&before));
    assert_eq!(same.standing(name, fp), IssuerStanding::Valid);
    cfg.jwt[0].roles.insert("devs".into(), vec![Role::Observe]);
    let after = Issuers::from_config(cfg.reloadable(), Some(&same));
    assert_eq!(after.standing(name, fp), IssuerStanding::Changed);
    // The server's visibility, which the entry does not override.
    let mut cfg2 = cfg.clone();
    let fp2 = after
        .verify(&sign_as(&e, Some("k1"), &claims()))
        .await
        .unwrap()
        .fingerprint;
    cfg2.server.session_visibility = Visibility::All;
    let wider = Issuers::from_config(cfg2.reloadable(), Some(&after));
    assert_eq!(wider.standing(name, fp2), IssuerStanding::Changed);
    assert_eq!(after.standing(name, fp2), IssuerStanding::Valid);
    cfg.jwt[0].name = "renamed".into();
    assert_eq!(
        Issuers::from_config(cfg.reloadable(), Some(&after)).standing(name, fp2),
        IssuerStanding::Gone
    );
    cfg.jwt.clear();
    let none = Issuers::from_config(cfg.reloadable(), Some(&after));
    assert!(none.is_empty());
    assert_eq!(none.standing(name, fp2), IssuerStanding::Gone);
    assert_eq!(
        none.verify(&sign_as(&e, Some("k1"), &claims()))
            .await
            .unwrap_err(),
        JwtRefused::NoIssuer
    );
}

#[test]
fn issuers_and_their_verification_are_send_and_sync() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: &T) {}
    let issuers = Issuers::default();
    send_sync(&issuers);
    send(&issuers.verify("a.b.c"));
}
