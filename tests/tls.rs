//! Off loopback, safely: `wss` with certificates made here, the REAL
//! runtime behind it; plain text and TLS 1.1 refused; certificates rotated
//! under open connections; client certificates naming principals.

use crate::support;

use std::time::Duration;

use ahp_bridge_join::config::{ClientAuth, TlsConfig};
use ahp_bridge_join::ScriptedModel;
use serde_json::{json, Value};
use support::e2e::*;
use support::tls::*;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn tls(pki: &Pki, client_auth: Option<ClientAuth>) -> TlsConfig {
    let (cert, key, _) = pki.server("server");
    TlsConfig {
        cert,
        key,
        client_ca: client_auth.map(|_| pki.ca_path()),
        client_auth: client_auth.unwrap_or_default(),
    }
}

async fn init(c: &ahp::Client, id: &str) {
    c.initialize(id.into(), vec!["1.0.0".into()], vec!["ahp-root://".into()])
        .await
        .expect("initialize");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ahp_client_over_wss_converses_and_its_transform_reaches_the_model() {
    let pki = Pki::new();
    let st = start_stack(|cfg| cfg.server.tls = Some(tls(&pki, None))).await;
    let url = st.bridge.ws_url();
    assert!(url.starts_with("wss://"), "{url}");
    let c = wss_client(&url, pki.client_config(None)).await.unwrap();
    init(&c, "ide").await;
    c.set_server_request_handler(|method, params: Value| async move {
        assert_eq!(method, "systemMessageTransform");
        let tone = params["sections"]["tone"]["content"]
            .as_str()
            .unwrap_or_default();
        Ok(json!({"sections": {"tone": {"content": format!("{tone}\nOVER-WSS-REWRITE")}}}))
    });
    let entry =
        json!({"clientId": "ide", "tools": [], "systemMessageTransform": {"sections": ["tone"]}});
    ready_session(&c, "ahp-session:/w1", Some(entry)).await;
    let end = run_turn(&c, "w1", "t1", "hello").await;
    assert_eq!(end.kind, "complete", "{end:?}");
    let prompt = ScriptedModel::system_prompt(st.model.requests().last().unwrap()).unwrap();
    assert!(
        prompt.contains("OVER-WSS-REWRITE"),
        "the rewrite reached the model"
    );
    let audit = std::fs::read_to_string(st.dir.path().join("audit.jsonl")).unwrap();
    assert!(
        audit
            .lines()
            .any(|l| l.contains("\"transform\"") && l.contains("\"transformed\"")),
        "the transform is audited"
    );
}

#[tokio::test]
async fn plain_text_to_the_tls_port_is_told_to_use_tls() {
    let pki = Pki::new();
    let mut cfg = test_config();
    cfg.server.tls = Some(tls(&pki, None));
    let r = start_host(cfg).await;
    match tokio_tungstenite::connect_async(format!("ws://{}", r.addr)).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
            assert_eq!(resp.status().as_u16(), 400);
            let body =
                String::from_utf8_lossy(resp.body().as_deref().unwrap_or_default()).into_owned();
            assert!(body.contains("wss://"), "{body}");
        }
        other => panic!("plain ws must be refused: {:?}", other.map(|_| ())),
    }
    // The same port serves wss.
    let c = wss_client(&r.ws_url(), pki.client_config(None))
        .await
        .unwrap();
    init(&c, "ok").await;
}

/// A TLS 1.1 ClientHello (no supported_versions extension), as an old
/// client sends it: answered with an alert, never a ServerHello.
#[tokio::test]
async fn tls_1_1_is_refused() {
    let pki = Pki::new();
    let mut cfg = test_config();
    cfg.server.tls = Some(tls(&pki, None));
    let r = start_host(cfg).await;
    let mut hello = vec![0x03, 0x02]; // client_version TLS 1.1
    hello.extend([7u8; 32]); // random
    hello.push(0); // no session id
    hello.extend([0x00, 0x04, 0x00, 0x2f, 0x00, 0x35]); // AES-CBC-SHA suites
    hello.extend([0x01, 0x00]); // null compression
    let mut handshake = vec![0x01, 0x00, 0x00, hello.len() as u8];
    handshake.extend(hello);
    let mut record = vec![0x16, 0x03, 0x01, 0x00, handshake.len() as u8];
    record.extend(handshake);
    let mut s = tokio::net::TcpStream::connect(r.addr).await.unwrap();
    s.write_all(&record).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(DEADLINE, s.read_to_end(&mut answer)).await;
    assert!(!answer.is_empty(), "an answer, then the close");
    assert_eq!(
        answer[0], 0x15,
        "an alert record, not a handshake: {answer:?}"
    );
    // ... and the version a current client speaks works.
    assert!(served_cert(r.addr, pki.client_config(None)).await.is_ok());
}

/// Waits until a new connection is served `want` (the certificate's DER).
async fn wait_served(addr: std::net::SocketAddr, pki: &Pki, want: &[u8]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(c) = served_cert(addr, pki.client_config(None)).await {
            if c.as_ref() == want {
                return;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new certificate is not served within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn der_of(pem: &str) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_certificate_serves_new_connections_and_open_ones_go_on() {
    let pki = Pki::new();
    let mut cfg = test_config();
    let t = tls(&pki, None);
    let (cert, key) = (t.cert.clone(), t.key.clone());
    cfg.server.tls = Some(t);
    let r = start_host(cfg).await;
    let open = wss_client(&r.ws_url(), pki.client_config(None))
        .await
        .unwrap();
    init(&open, "open").await;

    // Written in place, the certificate first, then its key.
    let (pem, key_pem, _) = pki.issue_server("second");
    std::fs::write(&cert, &pem).unwrap();
    std::fs::write(&key, &key_pem).unwrap();
    wait_served(r.addr, &pki, &der_of(&pem)).await;

    // Replaced by a rename, as cert-manager and kubelet do.
    let (pem, key_pem, _) = pki.issue_server("third");
    let dir = cert.parent().unwrap();
    std::fs::write(dir.join("cert.tmp"), &pem).unwrap();
    std::fs::write(dir.join("key.tmp"), &key_pem).unwrap();
    std::fs::rename(dir.join("key.tmp"), &key).unwrap();
    std::fs::rename(dir.join("cert.tmp"), &cert).unwrap();
    wait_served(r.addr, &pki, &der_of(&pem)).await;

    // A broken pair (a key that is not the certificate's) is refused and
    // counted; the last good pair serves on.
    let failures = || {
        let m = ahp_bridge_join::telemetry::metrics().encode(false);
        m.lines()
            .find(|l| l.starts_with("ahp_bridge_tls_reload_failures_total"))
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let before = failures();
    let (_, other_key, _) = pki.issue_server("mismatch");
    std::fs::write(&key, other_key).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while failures() <= before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the bad pair is not counted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let served = served_cert(r.addr, pki.client_config(None)).await.unwrap();
    assert_eq!(
        served.as_ref(),
        der_of(&pem).as_slice(),
        "the good pair serves on"
    );

    // The connection opened before all this still works.
    let listed: Value = open
        .request("listSessions", json!({}))
        .await
        .expect("the open connection still answers");
    assert!(listed["items"].is_array(), "{listed}");
}

const CERT_PRINCIPALS: &str = r#"
[[principals]]
name = "alice"
cert_identity = "CN=alice"
roles = ["observe"]

[[principals]]
name = "ci-bot"
cert_identity = "URI:spiffe://example.org/ns/ci/sa/bot"
roles = ["observe", "participate"]
"#;

fn cert_config(pki: &Pki, auth: ClientAuth) -> ahp_bridge_join::config::Config {
    let mut cfg = ahp_bridge_join::config::Config::parse(CERT_PRINCIPALS).unwrap();
    let base = test_config();
    cfg.server.listen = base.server.listen;
    cfg.admin.listen = None;
    cfg.server.tls = Some(tls(pki, Some(auth)));
    cfg
}

/// The session a principal's `createSession` gets: created, or the error.
async fn create(c: &ahp::Client, uri: &str) -> Result<Value, String> {
    c.request::<_, Value>(
        "createSession",
        json!({"channel": uri, "provider": "copilot"}),
    )
    .await
    .map_err(|e| format!("{e:?}"))
}

#[tokio::test]
async fn client_certificates_name_principals_without_a_token() {
    let pki = Pki::new();
    let r = start_host(cert_config(&pki, ClientAuth::Optional)).await;
    let url = r.ws_url();

    let alice = pki.client_config(Some(pki.client("alice", None, false)));
    let c = wss_client(&url, alice).await.expect("alice by CN");
    init(&c, "alice-client").await;
    let e = create(&c, "ahp-session:/a1").await.unwrap_err();
    assert!(
        e.contains("participate") && e.contains("alice"),
        "observe only: {e}"
    );

    let spiffe = Some("spiffe://example.org/ns/ci/sa/bot");
    let bot = pki.client_config(Some(pki.client("some-pod", spiffe, false)));
    let c = wss_client(&url, bot).await.expect("the bot by SPIFFE ID");
    init(&c, "bot-client").await;
    create(&c, "ahp-session:/b1")
        .await
        .expect("the bot participates");

    // No certificate and no token: 401; a certificate naming no principal too.
    let e = wss_client(&url, pki.client_config(None))
        .await
        .err()
        .unwrap();
    assert!(e.contains("401"), "{e}");
    let nobody = pki.client_config(Some(pki.client("mallory", None, false)));
    let e = wss_client(&url, nobody).await.err().unwrap();
    assert!(e.contains("401"), "{e}");
}

#[tokio::test]
async fn required_client_certificates_refuse_the_handshake_without_one() {
    let pki = Pki::new();
    let r = start_host(cert_config(&pki, ClientAuth::Required)).await;
    let url = r.ws_url();
    let e = wss_client(&url, pki.client_config(None))
        .await
        .err()
        .unwrap();
    assert!(
        !e.contains("401"),
        "refused in the handshake, not by HTTP: {e}"
    );
    let expired = pki.client_config(Some(pki.client("alice", None, true)));
    assert!(
        wss_client(&url, expired).await.is_err(),
        "an expired client certificate fails"
    );
    let alice = pki.client_config(Some(pki.client("alice", None, false)));
    let c = wss_client(&url, alice)
        .await
        .expect("a valid one is let in");
    init(&c, "alice").await;
}

/// `[admin.tls]`: `/healthz` and `/metrics` over https, with the same
/// certificate machinery; plain HTTP to it gets nothing.
#[tokio::test]
async fn the_admin_listener_serves_https() {
    use tokio::io::AsyncWriteExt as _;
    let pki = Pki::new();
    let mut cfg = test_config();
    cfg.admin.listen = "127.0.0.1:0".parse().ok();
    let (cert, key, _) = pki.server("admin");
    cfg.admin.tls = Some(ahp_bridge_join::config::AdminTlsConfig {
        cert: cert.clone(),
        key: key.clone(),
    });
    let r = start_host(cfg).await;
    let admin = r.admin.expect("the admin listener");
    assert!(r.admin_url().unwrap().starts_with("https://"));
    let tcp = tokio::net::TcpStream::connect(admin).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut s = tokio_rustls::TlsConnector::from(pki.client_config(None))
        .connect(name, tcp)
        .await
        .expect("a TLS handshake with the admin listener");
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    let _ = tokio::time::timeout(DEADLINE, s.read_to_string(&mut answer)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("ok\n"), "{answer}");

    // `health --config` asks over https, trusting the config's certificate
    // only: /readyz's checks come back; a config naming another certificate
    // is told that; without the config it speaks plain HTTP and gets nothing.
    let (other, other_key, _) = pki.server("other");
    let served = (&cert, &key, "\"checks\"");
    let another = (
        &other,
        &other_key,
        "a certificate other than [admin.tls] cert",
    );
    for (cert, key, says) in [served, another] {
        let file = pki.dir.path().join("health.toml");
        let toml = format!(
            "[admin]\nlisten = \"{admin}\"\n[admin.tls]\ncert = \"{}\"\nkey = \"{}\"\n",
            cert.display(),
            key.display()
        );
        std::fs::write(&file, toml).unwrap();
        let out = health(&["--config", file.to_str().unwrap()]).await;
        assert!(out.contains(says), "{}: {out}", cert.display());
    }
    let out = health(&["--admin", &admin.to_string()]).await;
    assert!(
        out.starts_with("not ready:") && !out.contains("checks"),
        "{out}"
    );
}

/// `ahp-copilot-bridge health ARGS`: what it printed (both streams), off
/// the runtime's threads (the bridge it asks runs on them).
async fn health(args: &[&str]) -> String {
    let args: Vec<String> = ["health"]
        .iter()
        .chain(args)
        .map(|a| a.to_string())
        .collect();
    let run = tokio::task::spawn_blocking(move || support::process::run_bin(args));
    let (_, out) = tokio::time::timeout(DEADLINE, run)
        .await
        .expect("health answers within its own deadline")
        .unwrap();
    out
}

/// The TLS handshake counts inside `[server] handshake_timeout`: a socket
/// that connects and says nothing, or stops halfway through its
/// ClientHello, is closed at the deadline.
#[tokio::test]
async fn a_silent_or_stalled_tls_client_is_closed_at_the_handshake_deadline() {
    let pki = Pki::new();
    let mut cfg = test_config();
    cfg.server.tls = Some(tls(&pki, None));
    cfg.server.handshake_timeout = Duration::from_millis(300);
    let r = start_host(cfg).await;
    for first_bytes in [&b""[..], &[0x16, 0x03, 0x01, 0x02, 0x00, 0x01][..]] {
        let mut s = tokio::net::TcpStream::connect(r.addr).await.unwrap();
        s.write_all(first_bytes).await.unwrap();
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(DEADLINE, s.read(&mut buf))
            .await
            .expect("closed by the host, not left open");
        assert!(matches!(read, Ok(0) | Err(_)), "{first_bytes:?}: {read:?}");
    }
}
