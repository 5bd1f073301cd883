//! One issuer's key set (JWKS): the keys it holds, where they come from and
//! when they are read again. A file is read at start, again when a stat shows
//! it changed (a Kubernetes Secret swaps a symlink, so the path is followed),
//! and on an unknown key id; an https URL is fetched at first use, in the
//! background once older than `jwks_refresh` (the current keys serve
//! meanwhile), and on an unknown key id. An unknown key id refreshes at most
//! once per [`FORCED_EVERY`], so a stream of made-up key ids cannot make the
//! bridge hammer the issuer. A key set that fails to load keeps the keys
//! loaded before: an issuer's bad deploy does not lock everyone out.
//!
//! Only keys for RS256 (RSA, 2048 bits or more), ES256 (P-256) and EdDSA
//! (Ed25519) are kept; symmetric (`oct`) keys never are, so no token can be
//! checked with a secret an attacker also knows.

use std::path::Path;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use data_encoding::BASE64URL_NOPAD;
use jsonwebtoken::jwk::{
    AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, KeyOperations, PublicKeyUse,
};
use jsonwebtoken::{Algorithm, DecodingKey};
use rustls::ClientConfig;
use serde::Deserialize;

use super::jwks_fetch::{self, MAX_BODY};
use ahp_bridge_base::config::{HttpsUrl, JwksSource};

/// At most one refresh for an unknown key id per issuer this often; and a
/// key set that was never fetched is not asked for again sooner.
pub(super) const FORCED_EVERY: Duration = Duration::from_secs(10);

/// Which TLS client fetches an https key set.
#[derive(Clone)]
pub(crate) enum FetchTls {
    /// The system's CAs (`SSL_CERT_FILE` honoured).
    Native,
    /// Given by the caller (the tests' own CA).
    Given(Arc<ClientConfig>),
}

/// A verification key, for one algorithm.
pub(crate) struct Key {
    kid: Option<String>,
    alg: Algorithm,
    key: DecodingKey,
}

/// What a key lookup found.
pub(crate) enum Lookup {
    Keys(Vec<DecodingKey>),
    /// The token names a key id the set does not hold.
    UnknownKid,
    /// The token names no key id and no key is for its algorithm.
    NoKeyForAlg,
    /// The key id names a key for another algorithm.
    KidOtherAlg,
    /// The key set was never loaded (the first fetch failed).
    Unavailable,
}

/// What a file was when it was read: a change of any is a new file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

impl Stamp {
    fn of(path: &Path) -> std::io::Result<Self> {
        let m = std::fs::metadata(path)?; // follows symlinks
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&m);
        #[cfg(not(unix))]
        let inode = 0;
        Ok(Self {
            modified: m.modified().ok(),
            len: m.len(),
            inode,
        })
    }
}

#[derive(Default)]
struct KeySetState {
    keys: Arc<[Key]>,
    /// When the keys were last loaded (fetched or read) successfully.
    loaded: Option<Instant>,
    /// A file: what it was when last read (successfully or not).
    stamp: Option<Stamp>,
    /// The last refresh for an unknown key id.
    forced: Option<Instant>,
    /// The last failed fetch.
    failed: Option<Instant>,
    /// A background fetch is under way.
    background: bool,
    /// Fetches and reads completed, so a waiter sees one happened meanwhile.
    generation: u64,
    /// The problem last logged, so a persistent one is logged once.
    problem: Option<String>,
}

/// One issuer's keys.
pub(crate) struct KeySet {
    issuer: String,
    source: JwksSource,
    refresh: Duration,
    tls: FetchTls,
    state: Mutex<KeySetState>,
    /// One awaited fetch at a time.
    fetching: tokio::sync::Mutex<()>,
}

impl KeySet {
    /// A file is read now; a URL is fetched at first use.
    pub(crate) fn new(
        issuer: &str,
        source: JwksSource,
        refresh: Duration,
        tls: FetchTls,
    ) -> Arc<Self> {
        let set = Arc::new(Self {
            issuer: issuer.to_owned(),
            source,
            refresh,
            tls,
            state: Mutex::default(),
            fetching: tokio::sync::Mutex::new(()),
        });
        if let JwksSource::File(path) = &set.source {
            set.read_file(path);
        }
        set
    }

    /// How many loads (fetches, reads) completed, for a test to wait on.
    #[cfg(test)]
    pub(crate) fn loads(&self) -> u64 {
        self.state().generation
    }

    /// Whether `source` and `refresh` would load the same keys the same way.
    pub(crate) fn same_source(&self, source: &JwksSource, refresh: Duration) -> bool {
        self.source == *source && self.refresh == refresh
    }

    fn state(&self) -> std::sync::MutexGuard<'_, KeySetState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The keys for a token of `alg` naming `kid`, the key set refreshed
    /// first if it is stale, and once more if the key id is unknown.
    pub(crate) async fn lookup(self: &Arc<Self>, alg: Algorithm, kid: Option<&str>) -> Lookup {
        self.freshen().await;
        if self.state().loaded.is_none() {
            return Lookup::Unavailable;
        }
        match self.select(alg, kid) {
            Lookup::UnknownKid | Lookup::NoKeyForAlg if self.may_force() => {}
            found => return found,
        }
        self.reload().await;
        self.select(alg, kid)
    }

    fn select(&self, alg: Algorithm, kid: Option<&str>) -> Lookup {
        let keys = self.state().keys.clone();
        let named: Vec<&Key> = match kid {
            Some(kid) => keys
                .iter()
                .filter(|k| k.kid.as_deref() == Some(kid))
                .collect(),
            None => keys.iter().collect(),
        };
        let fit: Vec<DecodingKey> = named
            .iter()
            .filter(|k| k.alg == alg)
            .map(|k| k.key.clone())
            .collect();
        match (kid, named.is_empty(), fit.is_empty()) {
            (_, _, false) => Lookup::Keys(fit),
            (Some(_), true, _) => Lookup::UnknownKid,
            (Some(_), false, _) => Lookup::KidOtherAlg,
            (None, _, _) => Lookup::NoKeyForAlg,
        }
    }

    /// Takes the one refresh an unknown key id may cause, if it is due.
    fn may_force(&self) -> bool {
        let mut s = self.state();
        if s.forced.is_some_and(|t| t.elapsed() < FORCED_EVERY) {
            return false;
        }
        s.forced = Some(Instant::now());
        true
    }

    /// A file re-read if it changed; a URL fetched if never loaded (awaited)
    /// or stale (in the background).
    async fn freshen(self: &Arc<Self>) {
        match &self.source {
            JwksSource::File(path) => {
                let now = Stamp::of(path).ok();
                let seen = self.state().stamp.clone();
                if now.is_none() || now != seen {
                    self.read_file(path);
                }
            }
            JwksSource::Https(url) => {
                let (loaded, failed, background) = {
                    let s = self.state();
                    (s.loaded, s.failed, s.background)
                };
                if failed.is_some_and(|t| t.elapsed() < FORCED_EVERY) {
                    return; // the issuer is not asked again so soon
                }
                match loaded {
                    None => self.fetch_now(url).await,
                    Some(t) if t.elapsed() >= self.refresh && !background => {
                        self.fetch_in_background(url)
                    }
                    Some(_) => {}
                }
            }
        }
    }

    /// Reads or fetches again now (an unknown key id).
    async fn reload(self: &Arc<Self>) {
        match &self.source {
            JwksSource::File(path) => self.read_file(path),
            JwksSource::Https(url) => self.fetch_now(url).await,
        }
    }

    fn read_file(&self, path: &Path) {
        let stamp = Stamp::of(path).ok();
        let read = std::fs::File::open(path).and_then(|f| {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(
                &mut std::io::Read::take(f, MAX_BODY as u64 + 1),
                &mut bytes,
            )?;
            Ok(bytes)
        });
        let outcome = match read {
            Err(e) => Err(KeySetError::Read(e)),
            Ok(b) if b.len() > MAX_BODY => Err(KeySetError::TooLarge),
            Ok(b) => parse(&b).map_err(not_jwks),
        };
        let mut s = self.state();
        s.stamp = stamp;
        self.store(&mut s, outcome, &format!("JWKS file {}", path.display()));
    }

    async fn fetch_now(&self, url: &HttpsUrl) {
        let seen = self.state().generation;
        let _one = self.fetching.lock().await;
        if self.state().generation != seen {
            return; // another task fetched while this one waited
        }
        let outcome = fetch(url, &self.tls).await;
        let mut s = self.state();
        self.store(&mut s, outcome, &format!("JWKS {url}"));
    }

    /// Fetches without holding up the token; a key set dropped meanwhile
    /// (a reload removed the issuer) is not kept alive by it.
    fn fetch_in_background(self: &Arc<Self>, url: &HttpsUrl) {
        self.state().background = true;
        let weak: Weak<Self> = Arc::downgrade(self);
        let (url, tls) = (url.clone(), self.tls.clone());
        tokio::spawn(async move {
            let outcome = fetch(&url, &tls).await;
            if let Some(set) = weak.upgrade() {
                let mut s = set.state();
                s.background = false;
                set.store(&mut s, outcome, &format!("JWKS {url}"));
            }
        });
    }

    /// Keeps new keys, or logs why there are none and keeps the old ones.
    fn store(&self, s: &mut KeySetState, outcome: Result<Vec<Key>, KeySetError>, what: &str) {
        s.generation += 1;
        match outcome {
            Ok(keys) => {
                if keys.is_empty() {
                    tracing::warn!(issuer = %self.issuer, "{what}: no RS256, ES256 or EdDSA signing key in it");
                } else if s.problem.take().is_some() {
                    tracing::info!(issuer = %self.issuer, keys = keys.len(), "{what}: loaded again");
                } else {
                    tracing::debug!(issuer = %self.issuer, keys = keys.len(), "{what}: loaded");
                }
                s.keys = keys.into();
                s.loaded = Some(Instant::now());
                s.failed = None;
            }
            Err(why) => {
                s.failed = Some(Instant::now());
                let why = why.to_string();
                if s.problem.as_deref() != Some(why.as_str()) {
                    let then = if s.loaded.is_some() {
                        "the keys loaded before still serve"
                    } else {
                        "no key is loaded: the issuer's tokens are refused"
                    };
                    tracing::warn!(issuer = %self.issuer, kept = s.keys.len(), "{what}: {why}; {then}");
                    s.problem = Some(why);
                }
            }
        }
    }
}

/// Why a key set was not loaded; it names no key and quotes no document.
#[derive(Debug, thiserror::Error)]
enum KeySetError {
    #[error("cannot read it: {0}")]
    Read(#[source] std::io::Error),
    #[error("it is over {MAX_BODY} bytes")]
    TooLarge,
    #[error(transparent)]
    Fetch(#[from] jwks_fetch::FetchError),
    /// By position only: serde's own message may quote the document.
    #[error("not a JWKS ({kind}, at line {line} column {column})")]
    NotJwks {
        kind: &'static str,
        line: usize,
        column: usize,
    },
}

/// Fetches and parses a key set.
async fn fetch(url: &HttpsUrl, tls: &FetchTls) -> Result<Vec<Key>, KeySetError> {
    let config = match tls {
        FetchTls::Given(c) => c.clone(),
        FetchTls::Native => jwks_fetch::native_client()?,
    };
    let body = jwks_fetch::fetch(url, config).await?;
    parse(&body).map_err(not_jwks)
}

fn not_jwks(e: serde_json::Error) -> KeySetError {
    let kind = match e.classify() {
        serde_json::error::Category::Io => "unreadable",
        serde_json::error::Category::Syntax => "not JSON",
        serde_json::error::Category::Data => "JSON without a `keys` list",
        serde_json::error::Category::Eof => "JSON cut short",
    };
    KeySetError::NotJwks {
        kind,
        line: e.line(),
        column: e.column(),
    }
}

#[derive(Deserialize)]
struct RawSet {
    keys: Vec<serde_json::Value>,
}

/// The usable keys of a JWKS document; a key that does not parse or is of
/// no accepted kind is left out, a document that is no JWKS is an error.
fn parse(bytes: &[u8]) -> Result<Vec<Key>, serde_json::Error> {
    let raw: RawSet = serde_json::from_slice(bytes)?;
    Ok(raw
        .keys
        .into_iter()
        .filter_map(|v| serde_json::from_value::<Jwk>(v).ok())
        .filter_map(|jwk| usable(&jwk))
        .collect())
}

/// The bytes a base64url field decodes to (padding tolerated).
fn decoded(b64: &str) -> Option<Vec<u8>> {
    BASE64URL_NOPAD
        .decode(b64.trim_end_matches('=').as_bytes())
        .ok()
}

/// An RSA modulus of 2048 bits or more (leading zero bytes aside).
fn rsa_strong(n: &str) -> bool {
    decoded(n).is_some_and(|b| b.iter().skip_while(|x| **x == 0).count() >= 256)
}

fn len_is(b64: &str, n: usize) -> bool {
    decoded(b64).is_some_and(|b| b.len() == n)
}

/// A JWK as a verification key, if it is one for an accepted algorithm.
fn usable(jwk: &Jwk) -> Option<Key> {
    if jwk
        .common
        .public_key_use
        .as_ref()
        .is_some_and(|u| *u != PublicKeyUse::Signature)
    {
        return None;
    }
    if jwk
        .common
        .key_operations
        .as_ref()
        .is_some_and(|ops| !ops.contains(&KeyOperations::Verify))
    {
        return None;
    }
    let alg = match &jwk.algorithm {
        AlgorithmParameters::RSA(p) if rsa_strong(&p.n) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(p)
            if p.curve == EllipticCurve::P256 && len_is(&p.x, 32) && len_is(&p.y, 32) =>
        {
            Algorithm::ES256
        }
        AlgorithmParameters::OctetKeyPair(p)
            if p.curve == EllipticCurve::Ed25519 && len_is(&p.x, 32) =>
        {
            Algorithm::EdDSA
        }
        _ => return None,
    };
    if jwk
        .common
        .key_algorithm
        .is_some_and(|a| a != KeyAlgorithm::from(alg))
    {
        return None;
    }
    let key = DecodingKey::from_jwk(jwk).ok()?;
    Some(Key {
        kid: jwk.common.key_id.clone(),
        alg,
        key,
    })
}
