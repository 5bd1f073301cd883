//! The `health` probe's trust in an `https` admin listener: the certificate
//! the config names (`[admin.tls] cert`), pinned. The probe runs beside the
//! bridge with its config, so it knows exactly which certificate to expect;
//! no CA, host name or system store is involved, and a listener presenting
//! any other certificate is not the bridge it was asked about.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};

use crate::ahp::tls::{certificates, provider, BadPair};

/// Accepts a server whose certificate is one of the file's (a rotation may
/// be in flight: the listener still serves the chain's old leaf for a few
/// seconds, and the probe then says so).
#[derive(Debug)]
struct Pinned {
    certs: Vec<CertificateDer<'static>>,
    /// The provider's, for the handshake's signature.
    algs: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self.certs.iter().any(|c| c.as_ref() == end_entity.as_ref()) {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(
                "the admin listener presented a certificate other than [admin.tls] cert".into(),
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}

/// A client that trusts exactly the certificates in `cert_file`.
pub(super) fn client_config(cert_file: &Path) -> Result<ClientConfig, BadPair> {
    let provider = provider();
    let verifier = Pinned {
        certs: certificates(cert_file)?,
        algs: provider.signature_verification_algorithms,
    };
    Ok(ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth())
}
