//! Key sets fetched over https from a small TLS server on loopback, with a
//! certificate from a CA made in the test (given to the issuers as their
//! roots: `SSL_CERT_FILE` is process-wide, so it is left alone); and what
//! loading key sets logs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, PKCS_ECDSA_P256_SHA256};
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use serde_json::json;

use super::tests::{claims, config};
use super::*;
use crate::auth::jwks_fetch::{self, client_config, FetchError};
use ahp_bridge_base::config::{HttpsUrl, JwksSource};
use ahp_bridge_testkit::{es256, jwks_json, sign_as};

/// How the server frames its answer.
#[derive(Debug, Clone, Copy)]
enum Mode {
    Chunked,
    Sized,
    ToEof,
    Status(u16),
}

/// An identity provider's key set endpoint.
struct Idp {
    url: String,
    hits: Arc<AtomicUsize>,
    body: Arc<Mutex<Vec<u8>>>,
    mode: Arc<Mutex<Mode>>,
    /// A TLS client trusting the server's CA.
    tls: Arc<ClientConfig>,
}

impl Idp {
    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    fn serve(&self, body: Vec<u8>) {
        *self.body.lock().unwrap() = body;
    }
}

/// A CA's certificate and an issuer to sign with.
fn ca() -> (CertificateDer<'static>, rcgen::Issuer<'static, KeyPair>) {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "jwt test CA");
    let cert = params.self_signed(&key).unwrap();
    (cert.der().clone(), rcgen::Issuer::new(params, key))
}

fn trusting(ca: CertificateDer<'static>) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(ca).unwrap();
    client_config(roots).unwrap()
}

async fn idp(body: Vec<u8>, mode: Mode) -> Idp {
    let (ca_der, issuer) = ca();
    let leaf_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let server =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
            )
            .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let idp = Idp {
        url: format!("https://127.0.0.1:{port}/keys"),
        hits: Arc::default(),
        body: Arc::new(Mutex::new(body)),
        mode: Arc::new(Mutex::new(mode)),
        tls: trusting(ca_der),
    };
    let acceptor = TlsAcceptor::from(Arc::new(server));
    let (hits, body, mode) = (idp.hits.clone(), idp.body.clone(), idp.mode.clone());
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, hits, body, mode) =
                (acceptor.clone(), hits.clone(), body.clone(), mode.clone());
            tokio::spawn(async move {
                let Ok(mut s) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.ends_with(b"\r\n\r\n") && request.len() < 8192 {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                assert!(request.starts_with(b"GET /keys HTTP/1.1\r\n"));
                hits.fetch_add(1, Ordering::SeqCst);
                let body = body.lock().unwrap().clone();
                let mode = *mode.lock().unwrap();
                let _ = s.write_all(&answer(&body, mode)).await;
                let _ = s.shutdown().await;
            });
        }
    });
    idp
}

fn answer(body: &[u8], mode: Mode) -> Vec<u8> {
    let (head, framed) = match mode {
        Mode::Sized => (format!("Content-Length: {}\r\n", body.len()), body.to_vec()),
        Mode::ToEof => (String::new(), body.to_vec()),
        Mode::Chunked => {
            let (a, b) = body.split_at(body.len() / 2);
            let mut framed = Vec::new();
            for part in [a, b] {
                framed.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
                framed.extend_from_slice(part);
                framed.extend_from_slice(b"\r\n");
            }
            framed.extend_from_slice(b"0\r\n\r\n");
            ("Transfer-Encoding: chunked\r\n".to_string(), framed)
        }
        Mode::Status(code) => {
            let text = b"no keys here".to_vec();
            let head = format!(
                "HTTP/1.1 {code} Nope\r\nContent-Length: {}\r\n\r\n",
                text.len()
            );
            return [head.into_bytes(), text].concat();
        }
    };
    let head = format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{head}\r\n");
    [head.into_bytes(), framed].concat()
}

fn url_of(idp: &Idp) -> HttpsUrl {
    let cfg = config(&idp.url, "default_roles = [\"observe\"]");
    match cfg.jwt[0].jwks_source().unwrap() {
        JwksSource::Https(u) => u,
        JwksSource::File(_) => panic!("an https URL"),
    }
}

#[tokio::test]
async fn a_jwks_over_https_is_fetched_at_first_use_and_kept_across_a_reload() {
    let (k1, k2, k3) = (es256("k1"), es256("k2"), es256("k3"));
    let idp = idp(jwks_json(&[&k1]), Mode::Chunked).await;
    let cfg = config(&idp.url, "default_roles = [\"observe\"]");
    let issuers = Issuers::with_tls(cfg.reloadable(), None, idp.tls.clone());
    assert_eq!(idp.hits(), 0, "nothing is fetched before a token needs it");
    let c = claims();
    let v = issuers.verify(&sign_as(&k1, Some("k1"), &c)).await.unwrap();
    assert_eq!(v.principal.name, "corp:alice");
    assert_eq!(idp.hits(), 1);
    assert!(issuers.verify(&sign_as(&k1, Some("k1"), &c)).await.is_ok());
    assert_eq!(idp.hits(), 1, "fresh keys are not fetched again");
    // The issuer rotates in k2: its first token fetches the set again, once.
    idp.serve(jwks_json(&[&k1, &k2]));
    let t2 = sign_as(&k2, Some("k2"), &c);
    assert!(issuers.verify(&t2).await.is_ok());
    assert_eq!(idp.hits(), 2);
    let t3 = sign_as(&k3, Some("k3"), &c);
    assert_eq!(
        issuers.verify(&t3).await.unwrap_err(),
        JwtRefused::UnknownKid
    );
    assert_eq!(idp.hits(), 2, "one refresh for unknown key ids per 10 s");
    // A reload that changes the roles keeps the keys (no fetch)...
    let mut cfg2 = cfg.clone();
    cfg2.jwt[0].default_roles = vec![Role::Participate];
    let after = Issuers::with_tls(cfg2.reloadable(), Some(&issuers), idp.tls.clone());
    let v2 = after.verify(&t2).await.unwrap();
    assert!(v2.principal.has(Role::Participate) && !v2.principal.has(Role::Observe));
    assert_eq!(idp.hits(), 2);
    assert_eq!(
        after.standing("corp", v.fingerprint),
        IssuerStanding::Changed
    );
    // ...one that changes where or how often keys come is a new key set.
    cfg2.jwt[0].jwks_refresh = Duration::from_secs(60);
    let refetching = Issuers::with_tls(cfg2.reloadable(), Some(&after), idp.tls.clone());
    assert!(refetching.verify(&t2).await.is_ok());
    assert_eq!(idp.hits(), 3);
}

#[tokio::test]
async fn a_stale_jwks_is_fetched_in_the_background_while_the_old_keys_serve() {
    let (k1, k2) = (es256("k1"), es256("k2"));
    let idp = idp(jwks_json(&[&k1]), Mode::ToEof).await;
    let mut cfg = config(&idp.url, "default_roles = [\"observe\"]");
    // Below the validated minimum, so the test need not wait 10 s.
    cfg.jwt[0].jwks_refresh = Duration::from_secs(1);
    let issuers = Issuers::with_tls(cfg.reloadable(), None, idp.tls.clone());
    let c = claims();
    let (t1, t2) = (sign_as(&k1, Some("k1"), &c), sign_as(&k2, Some("k2"), &c));
    assert!(issuers.verify(&t1).await.is_ok());
    assert_eq!(idp.hits(), 1);
    idp.serve(jwks_json(&[&k2]));
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let loads = issuers.entries[0].keys.loads();
    // Stale: this token is checked with the keys held, the fetch runs behind it.
    assert!(issuers.verify(&t1).await.is_ok());
    for _ in 0..500 {
        if issuers.entries[0].keys.loads() > loads {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(idp.hits(), 2, "one background fetch");
    assert!(issuers.verify(&t2).await.is_ok());
    assert_eq!(idp.hits(), 2, "k2 came with the background fetch");
    assert_eq!(
        issuers.verify(&t1).await.unwrap_err(),
        JwtRefused::UnknownKid
    );
}

#[tokio::test]
async fn a_failed_first_fetch_is_refused_and_not_retried_at_once() {
    let k1 = es256("k1");
    let idp = idp(jwks_json(&[&k1]), Mode::Status(500)).await;
    let cfg = config(&idp.url, "default_roles = [\"observe\"]");
    let issuers = Issuers::with_tls(cfg.reloadable(), None, idp.tls.clone());
    let t1 = sign_as(&k1, Some("k1"), &claims());
    let unavailable = JwtRefused::KeysUnavailable("corp".into());
    assert_eq!(issuers.verify(&t1).await.unwrap_err(), unavailable);
    assert_eq!(idp.hits(), 1);
    *idp.mode.lock().unwrap() = Mode::Sized;
    assert_eq!(issuers.verify(&t1).await.unwrap_err(), unavailable);
    assert_eq!(idp.hits(), 1, "the issuer is not asked again within 10 s");
}

#[tokio::test]
async fn the_fetch_checks_the_certificate_the_status_and_the_framing() {
    let k1 = es256("k1");
    let keys = jwks_json(&[&k1]);
    let idp = idp(keys.clone(), Mode::Sized).await;
    let url = url_of(&idp);
    assert_eq!(
        jwks_fetch::fetch(&url, idp.tls.clone()).await.unwrap(),
        keys
    );
    for mode in [Mode::Chunked, Mode::ToEof] {
        *idp.mode.lock().unwrap() = mode;
        let got = jwks_fetch::fetch(&url, idp.tls.clone()).await.unwrap();
        assert_eq!(got, keys, "{mode:?}");
    }
    *idp.mode.lock().unwrap() = Mode::Status(404);
    let e = jwks_fetch::fetch(&url, idp.tls.clone()).await.unwrap_err();
    assert!(matches!(e, FetchError::Status(404)), "{e}");
    // A client trusting another CA refuses the server's certificate.
    *idp.mode.lock().unwrap() = Mode::Sized;
    let hits = idp.hits();
    let stranger = trusting(ca().0);
    let e = jwks_fetch::fetch(&url, stranger).await.unwrap_err();
    assert!(matches!(e, FetchError::Io(_)), "{e}");
    assert!(e.to_string().to_lowercase().contains("certificate"), "{e}");
    assert_eq!(idp.hits(), hits, "no request went out");
}

/// Everything logged while `f` runs, at debug level and up.
async fn logged<F: std::future::Future<Output = ()>>(f: F) -> String {
    #[derive(Clone, Default)]
    struct Buf(Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buf = Buf::default();
    let writer = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    // tracing caches a callsite's interest for the whole process, and while
    // one dispatcher is registered it asks only the registering thread's
    // own: a test on another thread (no subscriber) reaching a callsite
    // first would cache "never", and this capture would miss the event (it
    // did, at three test threads). With a second dispatcher held while
    // capturing, every registration asks all of them, this one included.
    let _anchor = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    let _guard = tracing::subscriber::set_default(subscriber);
    f.await;
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    text
}

#[tokio::test]
async fn logs_name_the_source_issuer_and_principal_but_no_token_claim_or_key() {
    let dir = tempfile::tempdir().unwrap();
    let e = es256("k1");
    let idp = idp(b"{}".to_vec(), Mode::Status(500)).await;
    let mut c = claims();
    c["email"] = json!("hidden@example.com");
    let token = sign_as(&e, Some("k1"), &c);
    let log = logged(async {
        let path = dir.path().join("jwks.json");
        std::fs::write(&path, jwks_json(&[&e])).unwrap();
        let cfg = config(path.to_str().unwrap(), "default_roles = [\"observe\"]");
        let issuers = Issuers::from_config(cfg.reloadable(), None);
        assert!(issuers.verify(&token).await.is_ok());
        std::fs::write(&path, br#"{"keys": "PRIVATE-LOOKING-MATERIAL"}"#).unwrap();
        assert!(issuers.verify(&token).await.is_ok(), "the old keys serve");
        let cfg = config(&idp.url, "default_roles = [\"observe\"]");
        let issuers = Issuers::with_tls(cfg.reloadable(), None, idp.tls.clone());
        assert!(issuers.verify(&token).await.is_err());
    })
    .await;
    assert!(
        log.contains(&idp.url) && log.contains("HTTP status 500"),
        "{log}"
    );
    assert!(log.contains("corp:alice"), "the principal, at debug: {log}");
    assert!(log.contains("jwks.json") && log.contains("corp"), "{log}");
    assert!(log.contains("not a JWKS"), "{log}");
    let x = e.jwk["x"].as_str().unwrap();
    for secret in [
        token.as_str(),
        "hidden@example.com",
        "copilot-admins",
        "PRIVATE",
        x,
    ] {
        assert!(!log.contains(secret), "{secret:?} in {log}");
    }
}
