//! `[server.tls]` and `[admin.tls]`: the certificate a listener serves and,
//! for the AHP listener, the client certificates it asks for; and the rule
//! that nothing is served in plain text off loopback unless the operator
//! says a TLS terminator stands in front.

use std::path::PathBuf;

use serde::Deserialize;

use super::{bad, AdminConfig, ConfigError, PrincipalConfig, ServerConfig};

/// Whether a listener asks for a client certificate, once `client_ca` is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientAuth {
    /// A certificate is verified when sent; without one a token is needed.
    #[default]
    Optional,
    /// No verified certificate, no handshake.
    Required,
}

/// One listener's TLS: PEM files, read at start and again when they change.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The certificate chain, leaf first (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM: PKCS#8 RSA or EC, or SEC1 EC, or PKCS#1 RSA).
    pub key: PathBuf,
    /// CAs whose client certificates are verified (PEM bundle).
    pub client_ca: Option<PathBuf>,
    /// With `client_ca`: "optional" (the default) or "required".
    #[serde(default)]
    pub client_auth: ClientAuth,
}

/// `[admin.tls]`: a certificate only (client certificates are for the AHP
/// listener).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminTlsConfig {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl AdminTlsConfig {
    /// As a listener's TLS, asking for no client certificate.
    pub fn listener(&self) -> TlsConfig {
        TlsConfig {
            cert: self.cert.clone(),
            key: self.key.clone(),
            client_ca: None,
            client_auth: ClientAuth::Optional,
        }
    }
}

impl TlsConfig {
    /// The files a change of which reloads the certificate.
    pub fn files(&self) -> Vec<PathBuf> {
        let mut f = vec![self.cert.clone(), self.key.clone()];
        f.extend(self.client_ca.clone());
        f
    }

    pub(super) fn validate(&self, table: &str) -> Result<(), ConfigError> {
        for (k, p) in [("cert", &self.cert), ("key", &self.key)] {
            if p.as_os_str().is_empty() {
                return Err(bad(&format!("{table}.{k}"), "must name a PEM file"));
            }
        }
        if self.client_auth == ClientAuth::Required && self.client_ca.is_none() {
            return Err(bad(
                &format!("{table}.client_auth"),
                "\"required\" needs client_ca, the CAs client certificates are verified against",
            ));
        }
        Ok(())
    }
}

impl TlsConfig {
    /// TLS tables, and plaintext only on loopback unless
    /// `[server] allow_plaintext_remote` says a terminator is in front.
    pub(super) fn validate_transport(
        s: &ServerConfig,
        admin: &AdminConfig,
        principals: &[PrincipalConfig],
    ) -> Result<(), ConfigError> {
        if let Some(t) = &s.tls {
            t.validate("server.tls")?;
        }
        if let Some(t) = &admin.tls {
            t.listener().validate("admin.tls")?;
        }
        if !s.listen.ip().is_loopback() && s.tls.is_none() && !s.allow_plaintext_remote {
            return Err(bad(
                "server.tls",
                format!(
                    "{} is not a loopback address: tokens, prompts and rewrites would cross the network in clear; add [server.tls] cert and key, or set [server] allow_plaintext_remote = true when a TLS terminator in front of the bridge is the only way in",
                    s.listen
                ),
            ));
        }
        let admin_remote = admin.listen.is_some_and(|a| !a.ip().is_loopback());
        if admin_remote && admin.tls.is_none() && !s.allow_plaintext_remote {
            return Err(bad(
                "admin.tls",
                "[admin] is exposed off loopback in plain text; add [admin.tls] cert and key, or set [server] allow_plaintext_remote = true when a TLS terminator is in front",
            ));
        }
        let cert_principals = principals.iter().any(|p| p.cert_identity.is_some());
        if cert_principals && s.tls.as_ref().is_none_or(|t| t.client_ca.is_none()) {
            return Err(bad(
                "server.tls.client_ca",
                "a [[principals]] entry has cert_identity: client certificates need [server.tls] client_ca",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn key_of(toml: &str) -> Option<String> {
        Config::parse(toml)
            .unwrap()
            .validate()
            .err()
            .map(|e| format!("{}: {}", e.key, e.reason))
    }

    #[test]
    fn plaintext_off_loopback_needs_the_operators_word() {
        let sha = "a".repeat(64);
        let creds = format!(
            "[[principals]]\nname = \"ide\"\ntoken_sha256 = \"{sha}\"\nroles = [\"observe\"]\n"
        );
        let remote = format!("[server]\nlisten = \"0.0.0.0:8421\"\n{creds}");
        let e = key_of(&remote).expect("refused");
        assert!(e.starts_with("server.tls:"), "{e}");
        assert!(e.contains("allow_plaintext_remote"), "{e}");
        let terminated =
            format!("[server]\nlisten = \"0.0.0.0:8421\"\nallow_plaintext_remote = true\n{creds}");
        assert_eq!(key_of(&terminated), None);
        let tls = format!(
            "[server]\nlisten = \"0.0.0.0:8421\"\n[server.tls]\ncert = \"c.pem\"\nkey = \"k.pem\"\n{creds}"
        );
        assert_eq!(key_of(&tls), None);
        // Loopback in clear is the default and stays allowed.
        assert_eq!(key_of(&creds), None);
    }

    #[test]
    fn an_exposed_admin_listener_needs_tls_or_a_terminator() {
        let exposed = "[admin]\nlisten = \"0.0.0.0:8422\"\nexpose = true\n";
        let e = key_of(exposed).expect("refused");
        assert!(e.starts_with("admin.tls:"), "{e}");
        assert_eq!(
            key_of(&format!(
                "{exposed}[admin.tls]\ncert = \"c.pem\"\nkey = \"k.pem\"\n"
            )),
            None
        );
        assert_eq!(
            key_of(&format!(
                "[server]\nallow_plaintext_remote = true\n{exposed}"
            )),
            None
        );
    }

    #[test]
    fn client_certificates_need_a_ca() {
        let e = key_of("[server.tls]\ncert = \"c\"\nkey = \"k\"\nclient_auth = \"required\"\n")
            .expect("refused");
        assert!(e.starts_with("server.tls.client_auth:"), "{e}");
        let e = key_of(
            "[[principals]]\nname = \"bot\"\ncert_identity = \"CN=bot\"\nroles = [\"observe\"]\n",
        )
        .expect("refused");
        assert!(e.starts_with("server.tls.client_ca:"), "{e}");
    }
}
