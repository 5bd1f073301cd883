//! One key set (JWKS) fetched over https: a minimal HTTP/1.1 GET, no more.
//! A whole HTTP client would be a large dependency for one request a few
//! times an hour; this one sends `Connection: close`, reads a body framed by
//! `Transfer-Encoding: chunked`, `Content-Length` or the end of the stream,
//! takes only status 200 (no redirects: the operator names the exact URL),
//! at most [`MAX_BODY`] bytes, within [`FETCH_DEADLINE`].

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::ServerName;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use ahp_bridge_base::config::HttpsUrl;

/// The whole fetch, from connect to the last byte.
pub(super) const FETCH_DEADLINE: Duration = Duration::from_secs(10);
/// The largest body taken: a key set is a few kilobytes.
pub(super) const MAX_BODY: usize = 1 << 20;
/// The largest status line and headers taken.
const MAX_HEAD: usize = 16 * 1024;
/// The largest chunk-size line (or trailer line) of a chunked body.
const MAX_LINE: usize = 1024;

/// Why a key set could not be fetched (names no key material).
#[derive(Debug, thiserror::Error)]
pub(super) enum FetchError {
    #[error("no trusted CA certificates: {0}")]
    Roots(#[source] RootsError),
    #[error("{0:?} is not a host name TLS can verify")]
    Name(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("no answer within {}s", FETCH_DEADLINE.as_secs())]
    Timeout,
    #[error("HTTP status {0} (only 200 is taken)")]
    Status(u16),
    #[error("the body is over {} bytes", MAX_BODY)]
    TooLarge,
    #[error("malformed HTTP response: {0}")]
    Malformed(&'static str),
}

/// Why the system's CA certificates give no TLS client. Kept for the
/// process (read once), so it is `Clone`: the loader's own errors are not,
/// and are kept as their text.
#[derive(Debug, Clone, thiserror::Error)]
pub(super) enum RootsError {
    #[error("the system has none")]
    NoneFound,
    #[error("{0}")]
    Unreadable(String),
    #[error("{0}")]
    Tls(#[source] rustls::Error),
}

/// A TLS client trusting `roots`, with ring's cryptography.
pub(super) fn client_config(roots: RootCertStore) -> Result<Arc<ClientConfig>, rustls::Error> {
    let mut config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The TLS client trusting the system's CAs (`SSL_CERT_FILE` and
/// `SSL_CERT_DIR` honoured), read once per process.
pub(super) fn native_client() -> Result<Arc<ClientConfig>, FetchError> {
    static NATIVE: OnceLock<Result<Arc<ClientConfig>, RootsError>> = OnceLock::new();
    NATIVE
        .get_or_init(|| {
            let found = rustls_native_certs::load_native_certs();
            let mut roots = RootCertStore::empty();
            let (added, _ignored) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                let why = found.errors.first().map(|e| e.to_string());
                return Err(why.map_or(RootsError::NoneFound, RootsError::Unreadable));
            }
            client_config(roots).map_err(RootsError::Tls)
        })
        .clone()
        .map_err(FetchError::Roots)
}

/// GETs `url` over TLS with `tls`; the body of a 200 answer.
pub(super) async fn fetch(url: &HttpsUrl, tls: Arc<ClientConfig>) -> Result<Vec<u8>, FetchError> {
    tokio::time::timeout(FETCH_DEADLINE, get(url, tls))
        .await
        .map_err(|_| FetchError::Timeout)?
}

async fn get(url: &HttpsUrl, tls: Arc<ClientConfig>) -> Result<Vec<u8>, FetchError> {
    let name =
        ServerName::try_from(url.host.clone()).map_err(|_| FetchError::Name(url.host.clone()))?;
    let tcp = TcpStream::connect((url.host.as_str(), url.port)).await?;
    let mut stream = TlsConnector::from(tls).connect(name, tcp).await?;
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nAccept: application/jwk-set+json, application/json\r\nUser-Agent: ahp-copilot-bridge\r\nConnection: close\r\n\r\n",
        url.path,
        url.host_header()
    );
    stream.write_all(request.as_bytes()).await?;
    stream.flush().await?;
    let mut reader = BufReader::new(stream);
    let head = read_head(&mut reader).await?;
    let (status, framing) = parse_head(&head)?;
    if status != 200 {
        return Err(FetchError::Status(status));
    }
    read_body(&mut reader, framing).await
}

/// How the body's end is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    Chunked,
    Length(usize),
    ToEof,
}

async fn read_head<R: AsyncBufRead + Unpin>(r: &mut R) -> Result<Vec<u8>, FetchError> {
    let mut head = Vec::new();
    loop {
        let room = (MAX_HEAD + 1).saturating_sub(head.len()) as u64;
        let n = (&mut *r).take(room).read_until(b'\n', &mut head).await?;
        if n == 0 {
            return Err(FetchError::Malformed(
                "the connection closed in the headers",
            ));
        }
        if head.len() > MAX_HEAD {
            return Err(FetchError::Malformed("headers over 16 KiB"));
        }
        if head.ends_with(b"\r\n\r\n") || head.ends_with(b"\n\n") {
            return Ok(head);
        }
    }
}

/// The status and the framing of a response's head.
pub(crate) fn parse_head(head: &[u8]) -> Result<(u16, Framing), FetchError> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err(FetchError::Malformed("not an HTTP/1.1 response head")),
    }
    let status = response.code.unwrap_or_default();
    let mut chunked = false;
    let mut length: Option<usize> = None;
    for h in response.headers.iter() {
        let value = std::str::from_utf8(h.value)
            .map_err(|_| FetchError::Malformed("a header that is not text"))?
            .trim();
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            let last = value.rsplit(',').next().unwrap_or_default().trim();
            if !last.eq_ignore_ascii_case("chunked") {
                return Err(FetchError::Malformed(
                    "a transfer coding other than chunked",
                ));
            }
            chunked = true;
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let n: usize = value
                .parse()
                .map_err(|_| FetchError::Malformed("a bad Content-Length"))?;
            if length.is_some_and(|l| l != n) {
                return Err(FetchError::Malformed("two different Content-Lengths"));
            }
            length = Some(n);
        }
    }
    let framing = match (chunked, length) {
        (true, _) => Framing::Chunked,
        (false, Some(n)) => Framing::Length(n),
        (false, None) => Framing::ToEof,
    };
    Ok((status, framing))
}

/// The body after the head, as `framing` says where it ends.
pub(crate) async fn read_body<R: AsyncBufRead + Unpin>(
    r: &mut R,
    framing: Framing,
) -> Result<Vec<u8>, FetchError> {
    match framing {
        Framing::Length(n) if n > MAX_BODY => Err(FetchError::TooLarge),
        Framing::Length(n) => {
            let mut body = vec![0; n];
            r.read_exact(&mut body).await?;
            Ok(body)
        }
        Framing::ToEof => {
            let mut body = Vec::new();
            (&mut *r)
                .take(MAX_BODY as u64 + 1)
                .read_to_end(&mut body)
                .await?;
            if body.len() > MAX_BODY {
                return Err(FetchError::TooLarge);
            }
            Ok(body)
        }
        Framing::Chunked => read_chunked(r).await,
    }
}

async fn read_chunked<R: AsyncBufRead + Unpin>(r: &mut R) -> Result<Vec<u8>, FetchError> {
    let mut body = Vec::new();
    loop {
        let line = read_line(r).await?;
        let size = line.split(';').next().unwrap_or_default().trim();
        if size.is_empty() || size.len() > 8 {
            return Err(FetchError::Malformed("a bad chunk size"));
        }
        let size = usize::from_str_radix(size, 16)
            .map_err(|_| FetchError::Malformed("a bad chunk size"))?;
        if size == 0 {
            // Trailers, if any, up to the empty line.
            while !read_line(r).await?.is_empty() {}
            return Ok(body);
        }
        if body.len() + size > MAX_BODY {
            return Err(FetchError::TooLarge);
        }
        let start = body.len();
        body.resize(start + size, 0);
        r.read_exact(&mut body[start..]).await?;
        if !read_line(r).await?.is_empty() {
            return Err(FetchError::Malformed("a chunk longer than its size"));
        }
    }
}

/// One line without its line ending; a line over [`MAX_LINE`] or the end
/// of the stream is malformed.
async fn read_line<R: AsyncBufRead + Unpin>(r: &mut R) -> Result<String, FetchError> {
    let mut line = Vec::new();
    (&mut *r)
        .take(MAX_LINE as u64)
        .read_until(b'\n', &mut line)
        .await?;
    if !line.ends_with(b"\n") {
        return Err(FetchError::Malformed("a chunked body cut short"));
    }
    let text = String::from_utf8(line).map_err(|_| FetchError::Malformed("a bad chunk line"))?;
    Ok(text.trim_end_matches(['\r', '\n']).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body(raw: &[u8]) -> Result<(u16, Vec<u8>), FetchError> {
        let mut r = BufReader::new(raw);
        let head = read_head(&mut r).await?;
        let (status, framing) = parse_head(&head)?;
        Ok((status, read_body(&mut r, framing).await?))
    }

    #[tokio::test]
    async fn bodies_are_framed_three_ways() {
        let (s, b) = body(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello, extra")
            .await
            .unwrap();
        assert_eq!((s, b.as_slice()), (200, &b"hello"[..]));
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nhel\r\n2\r\nlo\r\n0\r\nX-T: 1\r\n\r\n";
        assert_eq!(body(chunked).await.unwrap().1, b"hello");
        let eof = b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n\r\nnope";
        assert_eq!(body(eof).await.unwrap(), (404, b"nope".to_vec()));
    }

    #[tokio::test]
    async fn bad_or_large_bodies_are_refused() {
        let big = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
            MAX_BODY + 1
        );
        assert!(matches!(
            body(big.as_bytes()).await,
            Err(FetchError::TooLarge)
        ));
        let mut eof = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
        eof.resize(eof.len() + MAX_BODY + 1, b'x');
        assert!(matches!(body(&eof).await, Err(FetchError::TooLarge)));
        let huge_chunk = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n100001\r\n";
        assert!(matches!(body(huge_chunk).await, Err(FetchError::TooLarge)));
        for raw in [
            &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"[..],
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhello\r\n0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
            b"SSH-2.0-OpenSSH\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n",
        ] {
            assert!(body(raw).await.is_err(), "{}", String::from_utf8_lossy(raw));
        }
    }
}
