//! The web console's files, embedded in the binary, and how the listener
//! answers a request that is not a WebSocket upgrade: `GET /` and the
//! files beside it, each with its `ETag` and the same strict headers.

use std::sync::OnceLock;

use sha2::{Digest, Sha256};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::head::Asked;

/// Every page response carries these: no inline script or style, nothing
/// from elsewhere, never framed, no type sniffing, no referrer.
pub(crate) const SECURITY_HEADERS: &str = "Content-Security-Policy: default-src 'self'; \
script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; \
object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'\r\n\
X-Content-Type-Options: nosniff\r\n\
Referrer-Policy: no-referrer\r\n\
Cross-Origin-Opener-Policy: same-origin\r\n";

/// One embedded file.
pub(crate) struct Asset {
    pub path: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $type:expr) => {
        Asset {
            path: concat!("/", $name),
            content_type: $type,
            body: include_bytes!(concat!("../../../../console/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// The console, as the binary serves it; `/` is `index.html`.
pub(crate) const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("console.css", "text/css; charset=utf-8"),
    asset!("app.js", JS),
    asset!("ahp.js", JS),
    asset!("dom.js", JS),
    asset!("token.js", JS),
    asset!("notice.js", JS),
    asset!("chat.js", JS),
    asset!("questions.js", JS),
    asset!("md.js", JS),
    asset!("transform.js", JS),
    asset!("audit.js", JS),
    asset!("diff.js", JS),
    asset!("policy.js", JS),
    asset!("host.js", JS),
];

/// The bytes the console adds to the binary.
#[cfg(test)]
pub(crate) fn embedded_bytes() -> usize {
    ASSETS.iter().map(|a| a.body.len()).sum()
}

fn find(path: &str) -> Option<(usize, &'static Asset)> {
    let path = if path == "/" { "/index.html" } else { path };
    ASSETS.iter().enumerate().find(|(_, a)| a.path == path)
}

/// The asset's strong validator: a hash of its bytes, computed once.
fn etag(index: usize) -> &'static str {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| format!("\"{}\"", hex::encode(&Sha256::digest(a.body)[..12])))
            .collect()
    });
    &tags[index]
}

/// A whole response: status line and headers, and the body to send.
#[derive(Debug)]
pub(crate) struct HttpResponse {
    /// The status the head's first line holds, for the tests to read.
    #[cfg_attr(not(test), allow(dead_code))]
    pub status: u16,
    pub head: String,
    pub body: &'static [u8],
}

/// The answer to a page request (never an upgrade).
pub(crate) fn answer(method: &str, path: &str, if_none_match: Option<&str>) -> HttpResponse {
    if method != "GET" && method != "HEAD" {
        return plain(405, "Method Not Allowed", "only GET and HEAD\n");
    }
    let Some((i, asset)) = find(path) else {
        return plain(404, "Not Found", "not found; the console is at /\n");
    };
    let tag = etag(i);
    if if_none_match.is_some_and(|v| v.split(',').any(|t| t.trim() == tag || t.trim() == "*")) {
        return HttpResponse {
            status: 304,
            head: format!("HTTP/1.1 304 Not Modified\r\nETag: {tag}\r\n{SECURITY_HEADERS}Connection: close\r\n\r\n"),
            body: b"",
        };
    }
    let body = if method == "HEAD" {
        &b""[..]
    } else {
        asset.body
    };
    HttpResponse {
        status: 200,
        head: format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nContent-Length: {}\r\nETag: {tag}\r\n\
             Cache-Control: no-cache\r\n{SECURITY_HEADERS}Connection: close\r\n\r\n",
            asset.content_type,
            asset.body.len()
        ),
        body,
    }
}

/// A short plain-text answer (a refusal), with the same headers as a page.
pub(crate) fn plain(status: u16, reason: &str, text: &'static str) -> HttpResponse {
    HttpResponse {
        status,
        head: format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Content-Length: {}\r\nCache-Control: no-store\r\n{SECURITY_HEADERS}Connection: close\r\n\r\n",
            text.len()
        ),
        body: text.as_bytes(),
    }
}

/// Answers one page request on `stream` and closes it.
pub(crate) async fn serve(stream: &mut (impl AsyncWrite + Unpin), asked: &Asked) {
    let a = match asked {
        Asked::Page {
            method,
            path,
            if_none_match,
            ..
        } => answer(method, path, if_none_match.as_deref()),
        Asked::Upgrade(_) => return,
    };
    let _ = stream.write_all(a.head.as_bytes()).await;
    let _ = stream.write_all(a.body).await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_answer_is_strict_and_validated() {
        let a = answer("GET", "/", None);
        assert_eq!(a.status, 200);
        assert!(a.head.contains("frame-ancestors 'none'"), "{}", a.head);
        assert!(a.head.contains("text/html"));
        let tag = a
            .head
            .lines()
            .find_map(|l| l.strip_prefix("ETag: "))
            .unwrap();
        assert_eq!(answer("GET", "/index.html", Some(tag)).status, 304);
        assert_eq!(answer("GET", "/index.html", Some("\"other\"")).status, 200);
        for other in [answer("GET", "/nope", None), answer("POST", "/", None)] {
            assert!(other.head.contains("nosniff"), "{}", other.head);
            assert!(other.status >= 400);
        }
        assert!(answer("HEAD", "/app.js", None).body.is_empty());
    }

    #[test]
    fn every_file_of_the_console_is_served() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../console");
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if name == "tsconfig.json" {
                continue;
            }
            let path = format!("/{name}");
            assert!(
                ASSETS.iter().any(|a| a.path == path),
                "{name} is in console/ but not embedded"
            );
        }
    }

    #[test]
    fn the_console_stays_small() {
        assert!(embedded_bytes() < 300 * 1024, "{} bytes", embedded_bytes());
    }
}
