//! What TLS costs a user, measured in one run:
//!
//! 1. The transform round trip at the runtime's pipe, `wss` against `ws`,
//!    interleaved: two bridges, each with a fake runtime on TCP
//!    (`common::pipe`) and the official `ahp` client answering
//!    `systemMessageTransform` (the same answer), one over TLS and one in
//!    clear. Each round asks both, in turn first. The difference is what TLS
//!    adds to the two WebSocket messages of the round trip.
//! 2. The cryptography alone: a 3.5 KB message encrypted by a rustls server
//!    and decrypted by a rustls client in memory, no sockets: back to back,
//!    and each after other work (as in the round trip, where it runs cold),
//!    through the connections and through the record layer alone.
//! 3. TLS handshakes a second on one core: a bridge whose runtime has one
//!    thread, and clients on the other core making full handshakes (TCP
//!    connect, TLS 1.3 handshake with an ECDSA P-256 certificate, close),
//!    eight at a time.
//!
//! Run: cargo bench --bench tls_overhead [-- ITERATIONS] [--same]
//! (`--same`: both bridges in clear, an A/A run of the comparison itself)

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ahp_bridge_join::config::{Config, TlsConfig};
use ahp_bridge_join::{Agent, Running};
use common::pct;
use common::pipe::{PipeConn, PipeRuntime};
use common::us;
use rustls::pki_types::ServerName;
use serde_json::{json, Value};

/// A self-signed certificate for 127.0.0.1 in `dir`, and a client config
/// that trusts it alone.
fn certificate(dir: &std::path::Path) -> (TlsConfig, Arc<rustls::ClientConfig>) {
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let (c, k) = (dir.join("bench.pem"), dir.join("bench.key"));
    std::fs::write(&c, cert.pem()).unwrap();
    std::fs::write(&k, key.serialize_pem()).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tls = TlsConfig {
        cert: c,
        key: k,
        client_ca: None,
        client_auth: Default::default(),
    };
    (tls, Arc::new(client))
}

/// One bridge with its fake runtime, its client and the runtime's pipe to it.
struct Side {
    _running: Running,
    _client: ahp::Client,
    pipe: PipeConn,
    ask: Value,
}

async fn side(dir: &std::path::Path, tls: Option<(TlsConfig, Arc<rustls::ClientConfig>)>) -> Side {
    let mut fake = PipeRuntime::start().await;
    let mut cfg = Config::default();
    cfg.server.listen = "127.0.0.1:0".parse().unwrap();
    cfg.admin.listen = None;
    cfg.runtime.connect = Some(fake.addr.to_string().into());
    // Each its own folder: the state store sits beside the audit log.
    let own = dir.join(if tls.is_some() { "wss" } else { "ws" });
    std::fs::create_dir_all(&own).unwrap();
    cfg.audit.path = Some(own.join("audit.jsonl"));
    cfg.server.tls = tls.as_ref().map(|t| t.0.clone());
    let r = ahp_bridge_join::start(Arc::new(cfg), Agent::Copilot)
        .await
        .unwrap();
    // Both clients connect the same way (Nagle off), so TLS is the only difference.
    let connector = tls
        .as_ref()
        .map(|(_, client)| tokio_tungstenite::Connector::Rustls(client.clone()));
    let (ws, _) =
        tokio_tungstenite::connect_async_tls_with_config(r.ws_url(), None, true, connector)
            .await
            .unwrap();
    let transport = ahp_ws::WebSocketTransport::from_stream(ws);
    let c = common::bench_client(transport).await;
    let mut pipe = fake.next_conn().await;
    let runtime_id = pipe.created().await;
    let text = "Prefer small, reviewable changes; never run rm -rf. ".repeat(20);
    let sections = json!({"tone": {"content": text}, "guidelines": {"content": text},
                          "environment_context": {"content": text}});
    Side {
        _running: r,
        _client: c,
        pipe,
        ask: json!({"sessionId": runtime_id, "sections": sections}),
    }
}

impl Side {
    /// The round trip as the pipe times it, and its two legs: to the
    /// client's handler, and from there back to the pipe.
    async fn round_trip(&self) -> (Duration, Duration, Duration) {
        let asked = Instant::now();
        let (took, answer) = self
            .pipe
            .ask("systemMessage.transform", self.ask.clone())
            .await;
        let tone = answer["result"]["sections"]["tone"]["content"].as_str();
        assert!(
            tone.is_some_and(|t| t.ends_with("(house style)")),
            "{answer}"
        );
        let done = Instant::now();
        let handled = common::HANDLED_AT.lock().unwrap().take().unwrap();
        (took, handled - asked, done - handled)
    }
}

fn line(name: &str, v: &mut [Duration]) -> (Duration, Duration) {
    let (p50, p99) = (pct(v, 0.5), pct(v, 0.99));
    println!("  {name:<24}: p50 {:>9}  p99 {:>9}", us(p50), us(p99));
    (p50, p99)
}

async fn round_trips(iterations: usize, same: bool) {
    let dir = tempfile::tempdir().unwrap();
    let cert = certificate(dir.path());
    let plain = side(dir.path(), None).await;
    // `--same`: both in clear, to show the comparison itself adds nothing.
    let tls = if same {
        side(&dir.path().join("b"), None).await
    } else {
        side(dir.path(), Some(cert)).await
    };
    for _ in 0..200 {
        plain.round_trip().await; // warm-up
        tls.round_trip().await;
    }
    let (mut ws, mut wss) = (Vec::new(), Vec::new());
    for i in 0..iterations {
        if i % 2 == 0 {
            ws.push(plain.round_trip().await);
            wss.push(tls.round_trip().await);
        } else {
            wss.push(tls.round_trip().await);
            ws.push(plain.round_trip().await);
        }
    }
    println!("transform round trip at the runtime's pipe, {iterations} iterations, interleaved");
    let a = line(
        "client over ws",
        &mut ws.iter().map(|r| r.0).collect::<Vec<_>>(),
    );
    let b = line(
        "client over wss",
        &mut wss.iter().map(|r| r.0).collect::<Vec<_>>(),
    );
    // Each leg carries one WebSocket message: what TLS adds splits about evenly.
    for (name, v) in [("ws", &ws), ("wss", &wss)] {
        let mut to = v.iter().map(|r| r.1).collect::<Vec<_>>();
        let mut back = v.iter().map(|r| r.2).collect::<Vec<_>>();
        println!(
            "    {name:<3} legs at p50: to the client {}, back {}",
            us(pct(&mut to, 0.5)),
            us(pct(&mut back, 0.5))
        );
    }
    for (what, x, y) in [("p50", a.0, b.0), ("p99", a.1, b.1)] {
        println!(
            "  TLS adds at {what}          : {:>9}  (ratio {:.3}x)",
            us(y.saturating_sub(x)),
            y.as_secs_f64() / x.as_secs_f64()
        );
    }
}

/// Stands for the rest of a round trip between two TLS messages: a 300 µs
/// pause (the thread waits for the other side) with 4 MB of other memory
/// touched (the bridge's and the client's own work), after which the TLS
/// code and buffers are cold, as in the round trip.
fn other_work(junk: &mut [u8], i: usize) {
    std::thread::sleep(Duration::from_micros(300));
    for j in (0..junk.len()).step_by(64) {
        junk[j] = junk[j].wrapping_add(i as u8);
    }
}

/// A 3.5 KB message through a rustls server and client in memory, without
/// sockets or tasks: back to back, and cold as in the round trip; through
/// the connections' buffered API (as tokio-rustls drives it), and through
/// the negotiated cipher suite's record encryption alone.
fn in_memory(messages: u32) {
    use rustls::crypto::cipher::{
        AeadKey, InboundOpaqueMessage, Iv, OutboundChunks, OutboundPlainMessage,
    };
    use rustls::{ContentType, ProtocolVersion};
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let (tls, client) = certificate(dir.path());
    let server = ahp_bridge_join::ahp::tls::server_config(&tls).unwrap();
    let mut s = rustls::ServerConnection::new(Arc::new(server)).unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut c = rustls::ClientConnection::new(client, name).unwrap();
    let mut wire = Vec::new();
    while c.is_handshaking() || s.is_handshaking() {
        wire.clear();
        c.write_tls(&mut wire).unwrap();
        s.read_tls(&mut &wire[..]).unwrap();
        s.process_new_packets().unwrap();
        wire.clear();
        s.write_tls(&mut wire).unwrap();
        c.read_tls(&mut &wire[..]).unwrap();
        c.process_new_packets().unwrap();
    }
    let msg = vec![b'x'; 3500];
    let mut out = vec![0u8; 8192];
    // One message from the server's writer to the client's reader, each
    // half timed, with `between` run between the halves.
    let mut one = |wire: &mut Vec<u8>, between: &mut dyn FnMut()| {
        let t = Instant::now();
        s.writer().write_all(&msg).unwrap();
        wire.clear();
        s.write_tls(wire).unwrap();
        let encrypted = t.elapsed();
        between();
        let t = Instant::now();
        c.read_tls(&mut &wire[..]).unwrap();
        c.process_new_packets().unwrap();
        let mut got = 0;
        while got < msg.len() {
            got += c.reader().read(&mut out).unwrap();
        }
        (encrypted, t.elapsed())
    };
    let t = Instant::now();
    for _ in 0..messages {
        one(&mut wire, &mut || {});
    }
    let hot = t.elapsed() / messages;
    // Cold: other work before each half, as the sender's encryption and the
    // receiver's decryption each come after the rest of a round trip.
    let mut junk = vec![0u8; 4 << 20];
    let (mut enc, mut dec) = (Vec::new(), Vec::new());
    for i in 0..2000 {
        other_work(&mut junk, i);
        let (e, d) = one(&mut wire, &mut || other_work(&mut junk, i + 1));
        enc.push(e);
        dec.push(d);
    }
    let suite = s.negotiated_cipher_suite().unwrap();
    println!(
        "a 3.5 KB message in memory ({:?}): encrypted and decrypted back to back {hot:?}",
        suite.suite()
    );
    let (e, d) = (pct(&mut enc, 0.5), pct(&mut dec, 0.5));
    println!(
        "  cold, through the connections: encrypt p50 {}, decrypt p50 {}",
        us(e),
        us(d)
    );
    // The same suite's record protection alone: what the cipher costs cold,
    // without the connections' buffers and copies.
    let rustls::SupportedCipherSuite::Tls13(tls13) = suite else {
        panic!("TLS 1.3 negotiated")
    };
    // ring's first suite, AES-256-GCM, whose key is 32 bytes.
    assert_eq!(tls13.aead_alg.key_len(), 32, "{:?}", suite.suite());
    let key = || AeadKey::from([7u8; 32]);
    let mut seal = tls13.aead_alg.encrypter(key(), Iv::new([1; 12]));
    let mut open = tls13.aead_alg.decrypter(key(), Iv::new([1; 12]));
    let (mut enc, mut dec) = (Vec::new(), Vec::new());
    for i in 0..2000u64 {
        other_work(&mut junk, i as usize);
        let t = Instant::now();
        let plain = OutboundPlainMessage {
            typ: ContentType::ApplicationData,
            version: ProtocolVersion::TLSv1_2,
            payload: OutboundChunks::Single(&msg),
        };
        let mut record = seal.encrypt(plain, i).unwrap().encode();
        enc.push(t.elapsed());
        other_work(&mut junk, i as usize + 1);
        let t = Instant::now();
        let inbound = InboundOpaqueMessage::new(
            ContentType::ApplicationData,
            ProtocolVersion::TLSv1_2,
            &mut record[5..],
        );
        let opened = open.decrypt(inbound, i).unwrap();
        dec.push(t.elapsed());
        assert_eq!(opened.payload.len(), msg.len());
    }
    let (re, rd) = (pct(&mut enc, 0.5), pct(&mut dec, 0.5));
    println!(
        "  cold, the record layer alone:  encrypt p50 {}, decrypt p50 {}",
        us(re),
        us(rd)
    );
    // A round trip carries two messages, each encrypted once and decrypted
    // once, each cold: an estimate (a sum of medians) of what TLS adds.
    println!(
        "  cold, a round trip's two messages (sums of medians): {} through the connections, {} in the record layer",
        us(2 * (e + d)),
        us(2 * (re + rd))
    );
}

/// Full handshakes a second against a bridge running on one thread.
fn handshakes(seconds: u64) {
    let dir = tempfile::tempdir().unwrap();
    let (tls, client) = certificate(dir.path());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut cfg = Config::default();
            cfg.server.listen = "127.0.0.1:0".parse().unwrap();
            cfg.admin.listen = None;
            cfg.server.tls = Some(tls);
            cfg.server.max_connections = Some(4096);
            let r = ahp_bridge_join::start(Arc::new(cfg), Agent::None)
                .await
                .unwrap();
            tx.send(r.addr).unwrap();
            std::future::pending::<()>().await;
        });
    });
    let addr = rx.recv().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let done = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + Duration::from_secs(seconds);
    rt.block_on(async {
        let mut loops = Vec::new();
        for _ in 0..8 {
            let (client, done) = (client.clone(), done.clone());
            loops.push(tokio::spawn(async move {
                let connector = tokio_rustls::TlsConnector::from(client);
                while Instant::now() < until {
                    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
                    let name = ServerName::try_from("127.0.0.1").unwrap();
                    let s = connector.connect(name, tcp).await.unwrap();
                    drop(s);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        for l in loops {
            l.await.unwrap();
        }
    });
    let n = done.load(Ordering::Relaxed);
    println!(
        "TLS handshakes, the bridge on one thread, 8 clients at a time: {n} in {seconds} s = {:.0} a second",
        n as f64 / seconds as f64
    );
}

fn main() {
    let iterations: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // Timed on a worker thread, where the bridge's own tasks run.
    let same = std::env::args().any(|a| a == "--same");
    rt.block_on(async { tokio::spawn(round_trips(iterations, same)).await.unwrap() });
    drop(rt);
    in_memory(20_000);
    handshakes(5);
}
