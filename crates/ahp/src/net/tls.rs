//! TLS for a listener: the certificate in force (replaced when its files
//! change, so cert-manager and Kubernetes Secrets rotate it without a
//! restart), TLS 1.2 and 1.3 only, ALPN `http/1.1`, client certificates
//! verified against `client_ca`, and the identities a verified client
//! certificate carries.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use sha2::{Digest, Sha256};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use ahp_bridge_base::config::{watch_files, Watched};
use ahp_bridge_base::config::{CertIdentity, ClientAuth, TlsConfig};
use ahp_bridge_telemetry::metrics;

/// A `[server.tls]` or `[admin.tls]` whose pair was not taken at start.
#[derive(Debug, thiserror::Error)]
#[error("config {table}: {pair}")]
pub struct TlsLoadError {
    pub table: &'static str,
    pub pair: BadPair,
}

/// Why a certificate pair was not taken.
#[derive(Debug, thiserror::Error)]
pub enum BadPair {
    #[error("{}: {reason}", path.display())]
    File { path: PathBuf, reason: String },
    #[error("{0}")]
    Tls(#[from] rustls::Error),
}

fn file_err(path: &Path, reason: impl std::fmt::Display) -> BadPair {
    BadPair::File {
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

/// The ring provider: the one crypto this binary builds (no C toolchain
/// beyond ring's own, no OpenSSL).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The certificates of a PEM file, in order (a chain, or a CA bundle); at
/// least one.
pub fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, BadPair> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_err(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_err(path, e))?;
    if certs.is_empty() {
        return Err(file_err(path, "no CERTIFICATE in the file"));
    }
    Ok(certs)
}

/// Builds the server side of `cfg` from its files as they are now.
pub fn server_config(cfg: &TlsConfig) -> Result<ServerConfig, BadPair> {
    let chain = certificates(&cfg.cert)?;
    let key = PrivateKeyDer::from_pem_file(&cfg.key).map_err(|e| file_err(&cfg.key, e))?;
    let provider = provider();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?;
    let builder = match &cfg.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for c in certificates(ca)? {
                roots.add(c).map_err(|e| file_err(ca, e))?;
            }
            let v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let v = match cfg.client_auth {
                ClientAuth::Optional => v.allow_unauthenticated(),
                ClientAuth::Required => v,
            };
            let v = v.build().map_err(|e| file_err(ca, e))?;
            builder.with_client_cert_verifier(v)
        }
    };
    // Checks that the key is the certificate's.
    let mut sc = builder.with_single_cert(chain, key)?;
    sc.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(sc)
}

/// The digest of the files as they are: a reload that finds them unchanged
/// does nothing.
fn fingerprint(files: &[PathBuf]) -> Option<[u8; 32]> {
    let mut h = Sha256::new();
    for f in files {
        h.update(std::fs::read(f).ok()?);
        h.update([0]);
    }
    Some(h.finalize().into())
}

struct InForce {
    config: Arc<ServerConfig>,
    fingerprint: Option<[u8; 32]>,
}

/// A listener's TLS: the pair in force, replaced by [`Tls::reload`].
pub struct Tls {
    cfg: TlsConfig,
    /// `server.tls` or `admin.tls`, for the log.
    table: &'static str,
    in_force: RwLock<InForce>,
}

impl Tls {
    /// Loads the files now; a bad pair at start is an error naming the table.
    pub fn load(cfg: &TlsConfig, table: &'static str) -> Result<Arc<Self>, TlsLoadError> {
        let config = server_config(cfg).map_err(|pair| TlsLoadError { table, pair })?;
        Ok(Arc::new(Self {
            cfg: cfg.clone(),
            table,
            in_force: RwLock::new(InForce {
                config: Arc::new(config),
                fingerprint: fingerprint(&cfg.files()),
            }),
        }))
    }

    /// The acceptor for the next connection.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        let g = self.in_force.read().unwrap_or_else(|e| e.into_inner());
        tokio_rustls::TlsAcceptor::from(g.config.clone())
    }

    /// Reads the files again. Unchanged: nothing. A good new pair serves the
    /// next connections (open ones keep theirs); a bad one is logged and
    /// counted, and the old pair serves on. Returns whether it changed.
    pub fn reload(&self) -> bool {
        let now = fingerprint(&self.cfg.files());
        {
            let g = self.in_force.read().unwrap_or_else(|e| e.into_inner());
            if now.is_some() && now == g.fingerprint {
                return false;
            }
        }
        match server_config(&self.cfg) {
            Ok(config) => {
                let mut g = self.in_force.write().unwrap_or_else(|e| e.into_inner());
                *g = InForce {
                    config: Arc::new(config),
                    fingerprint: now,
                };
                info!(table = self.table, cert = %self.cfg.cert.display(), "certificate reloaded; new connections get it");
                true
            }
            Err(e) => {
                metrics().tls_reload_failed();
                // Remembered, so one bad pair is said once, not at every look.
                self.in_force
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .fingerprint = now;
                error!(
                    table = self.table,
                    "certificate reload refused, the old one serves on: {e}"
                );
                false
            }
        }
    }

    /// Reloads when a file changes (written in place, replaced by a rename,
    /// or a Kubernetes `..data` symlink swap: the folders are watched, for
    /// these entries only), and every [`POLL`] in case the folder's events
    /// are lost, until `stop`.
    pub fn watch(self: &Arc<Self>, stop: CancellationToken) {
        let this = Arc::downgrade(self);
        let watched = Watched::files(&self.cfg.files());
        watch_files(watched, POLL, "certificate", stop, move || {
            match this.upgrade() {
                Some(tls) => {
                    tls.reload();
                    true
                }
                None => false,
            }
        });
    }
}

/// The fallback look at the files when no change was seen.
pub const POLL: Duration = Duration::from_secs(5);

/// The identities a verified client certificate carries: its subject's
/// common names and its URI and DNS alternative names. Only called on a
/// certificate the verifier accepted.
pub fn identities(der: &[u8]) -> Vec<CertIdentity> {
    use x509_cert::der::{Decode, Tag, Tagged};
    use x509_cert::ext::pkix::name::GeneralName;
    use x509_cert::ext::pkix::SubjectAltName;
    let Ok(cert) = x509_cert::Certificate::from_der(der) else {
        return Vec::new();
    };
    let tbs = &cert.tbs_certificate;
    let text_tags = [Tag::Utf8String, Tag::PrintableString, Tag::Ia5String];
    let mut out: Vec<CertIdentity> = (tbs.subject.0.iter())
        .flat_map(|rdn| rdn.0.iter())
        .filter(|atv| atv.oid == x509_cert::der::oid::db::rfc4519::CN)
        .filter(|atv| text_tags.contains(&atv.value.tag()))
        .filter_map(|atv| std::str::from_utf8(atv.value.value()).ok())
        .map(|cn| CertIdentity::CommonName(cn.to_owned()))
        .collect();
    if let Ok(Some((_, san))) = tbs.get::<SubjectAltName>() {
        for name in san.0 {
            match name {
                GeneralName::UniformResourceIdentifier(u) => {
                    out.push(CertIdentity::Uri(u.as_str().to_owned()))
                }
                GeneralName::DnsName(d) => out.push(CertIdentity::Dns(d.as_str().to_owned())),
                _ => {}
            }
        }
    }
    out
}

/// The identities of the client certificate a TLS connection verified.
pub fn peer_identities(stream: &tokio_rustls::server::TlsStream<TcpStream>) -> Vec<CertIdentity> {
    stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|leaf| identities(leaf.as_ref()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_names_its_cn_and_its_uri_and_dns_alternative_names() {
        let mut p = rcgen::CertificateParams::new(vec!["build.example.org".to_string()]).unwrap();
        p.distinguished_name
            .push(rcgen::DnType::CommonName, "alice");
        p.subject_alt_names.push(rcgen::SanType::URI(
            "spiffe://example.org/ns/ci/sa/bot".try_into().unwrap(),
        ));
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap();
        let ids = identities(cert.der());
        for want in [
            "CN=alice",
            "DNS:build.example.org",
            "URI:spiffe://example.org/ns/ci/sa/bot",
        ] {
            assert!(
                ids.contains(&CertIdentity::parse(want).unwrap()),
                "{want} in {ids:?}"
            );
        }
        assert!(identities(b"not a certificate").is_empty());
    }
}
