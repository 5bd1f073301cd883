//! Certificates made in the test (a CA, server and client certificates,
//! with `rcgen`), the config that serves them, and clients that trust only
//! that CA: the official `ahp` client over `wss`, a raw TLS probe.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ahp::{Client, ClientConfig};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_tungstenite::Connector;

/// A test CA and the files it issued, in a folder of their own.
pub(crate) struct Pki {
    pub dir: tempfile::TempDir,
    ca: CertifiedIssuer<'static, KeyPair>,
}

/// A client certificate and its key, for a rustls client.
pub(crate) struct ClientCert {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Default for Pki {
    fn default() -> Self {
        Self::new()
    }
}

impl Pki {
    pub(crate) fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "ahp-copilot-bridge test CA");
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        Self { dir, ca }
    }

    /// The CA's certificate (PEM), as `client_ca` or a client's trust.
    pub(crate) fn ca_path(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A server certificate for 127.0.0.1 and localhost, written as
    /// `NAME.pem` and `NAME.key`; returns the two paths and the SHA-256 of
    /// the certificate's public key (base64, what Chromium's
    /// `--ignore-certificate-errors-spki-list` takes).
    pub(crate) fn server(&self, name: &str) -> (PathBuf, PathBuf, String) {
        let cert = self.dir.path().join(format!("{name}.pem"));
        let key = self.dir.path().join(format!("{name}.key"));
        let spki = self.write_server(&cert, &key, name);
        (cert, key, spki)
    }

    /// Issues a new server certificate into `cert` and `key` (written in
    /// place); returns its public key's SHA-256 (base64).
    pub(crate) fn write_server(&self, cert: &Path, key: &Path, cn: &str) -> String {
        let (pem, key_pem, spki) = self.issue_server(cn);
        std::fs::write(cert, pem).unwrap();
        std::fs::write(key, key_pem).unwrap();
        spki
    }

    /// A new server certificate's PEM, its key's PEM, its SPKI's SHA-256.
    pub(crate) fn issue_server(&self, cn: &str) -> (String, String, String) {
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        let spki = {
            use sha2::Digest;
            data_encoding::BASE64.encode(&sha2::Sha256::digest(
                rcgen::PublicKeyData::subject_public_key_info(&key),
            ))
        };
        (cert.pem(), key.serialize_pem(), spki)
    }

    /// A client certificate with subject CN `cn` and, when given, a URI SAN;
    /// `expired` makes one whose validity ended in 2020.
    pub(crate) fn client(&self, cn: &str, uri: Option<&str>, expired: bool) -> ClientCert {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        if let Some(u) = uri {
            params
                .subject_alt_names
                .push(SanType::URI(u.try_into().unwrap()));
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        if expired {
            params.not_before = rcgen::date_time_ymd(2019, 1, 1);
            params.not_after = rcgen::date_time_ymd(2020, 1, 1);
        }
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        ClientCert {
            chain: vec![cert.der().clone()],
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        }
    }

    /// A client that trusts only this CA, with a client certificate or none.
    pub(crate) fn client_config(&self, cert: Option<ClientCert>) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        let b = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        Arc::new(match cert {
            Some(c) => b.with_client_auth_cert(c.chain, c.key).unwrap(),
            None => b.with_no_client_auth(),
        })
    }

    /// `[server.tls]` serving `NAME.pem`, with `extra` keys.
    pub(crate) fn server_toml(&self, name: &str, extra: &str) -> String {
        let (cert, key, _) = self.server(name);
        format!("[server.tls]\ncert = {cert:?}\nkey = {key:?}\n{extra}\n")
    }
}

/// The official client over `wss` (the URL's query carries any token),
/// trusting what `tls` trusts; not yet initialized.
pub(crate) async fn wss_client(
    url: &str,
    tls: Arc<rustls::ClientConfig>,
) -> Result<Client, String> {
    let (ws, _) = tokio_tungstenite::connect_async_tls_with_config(
        url,
        None,
        true,
        Some(Connector::Rustls(tls)),
    )
    .await
    .map_err(|e| e.to_string())?;
    let t = ahp_ws::WebSocketTransport::from_stream(ws);
    Client::connect(t, ClientConfig::default())
        .await
        .map_err(|e| e.to_string())
}

/// A TLS handshake with the listener at `addr`; the leaf certificate it
/// served, or why the handshake failed.
pub(crate) async fn served_cert(
    addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
) -> Result<CertificateDer<'static>, String> {
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let name = ServerName::try_from("localhost").unwrap();
    let s = tokio_rustls::TlsConnector::from(tls)
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let leaf = s
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first().cloned());
    leaf.ok_or_else(|| "no certificate".into())
}
