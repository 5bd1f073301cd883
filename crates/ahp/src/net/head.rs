//! The first request on the AHP listener, read whole before anything else:
//! a WebSocket upgrade goes on to the AHP handshake with the bytes replayed
//! ([`Replayed`]); any other request is a page of the console.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

use super::transport::Transport;

/// The most a request head may hold; a browser's is well under it.
pub(crate) const MAX_HEAD: usize = 16 * 1024;

/// What a request presents to be let in: its `Authorization` header, its
/// query (`?token=`, `?tkn=`, `?ticket=`) and its `Origin`. Secrets: never
/// printed (its `Debug` says only what is there).
#[derive(Default, PartialEq, Eq)]
pub(crate) struct Presented {
    pub authorization: Option<String>,
    pub query: Option<String>,
    pub origin: Option<String>,
}

impl std::fmt::Debug for Presented {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Presented")
            .field("authorization", &self.authorization.as_ref().map(|_| ".."))
            .field("query", &self.query.as_ref().map(|_| ".."))
            .field("origin", &self.origin)
            .finish()
    }
}

/// What the first request asks for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Asked {
    /// `Upgrade: websocket`: the AHP handshake.
    Upgrade(Presented),
    /// Any other request: a page (or `POST /ticket`), by method and path
    /// (query dropped), with the validator the browser already holds.
    Page {
        method: String,
        path: String,
        if_none_match: Option<String>,
        presented: Presented,
    },
}

/// Why the head was not read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BadHead {
    #[error("request head over {MAX_HEAD} bytes")]
    TooLarge,
    #[error("not an HTTP/1.x request")]
    Malformed,
    #[error("the connection closed before a whole request head")]
    Closed,
}

/// Classifies a whole head; `Ok(None)`: more bytes are needed.
pub(crate) fn classify(buf: &[u8]) -> Result<Option<Asked>, BadHead> {
    let mut headers = [httparse::EMPTY_HEADER; 48];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(buf) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => return Err(BadHead::TooLarge),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(BadHead::TooLarge),
        Err(_) => return Err(BadHead::Malformed),
    }
    let header = |name: &str| {
        req.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .and_then(|h| std::str::from_utf8(h.value).ok())
    };
    let path = req.path.unwrap_or("/");
    let presented = Presented {
        authorization: header("authorization").map(String::from),
        query: path
            .split_once('?')
            .map(|(_, q)| q.split('#').next().unwrap_or_default().to_owned()),
        origin: header("origin").map(String::from),
    };
    if header("upgrade").is_some_and(|u| u.trim().eq_ignore_ascii_case("websocket")) {
        return Ok(Some(Asked::Upgrade(presented)));
    }
    Ok(Some(Asked::Page {
        method: req.method.unwrap_or_default().to_owned(),
        path: path.split(['?', '#']).next().unwrap_or("/").to_owned(),
        if_none_match: header("if-none-match").map(String::from),
        presented,
    }))
}

/// Reads until the head is whole; returns what it asks and every byte read
/// (the head and whatever followed it). The caller bounds the time.
pub(crate) async fn read_head(
    stream: &mut (impl AsyncRead + Unpin),
) -> Result<(Asked, Vec<u8>), BadHead> {
    let mut buf = Vec::with_capacity(2048);
    loop {
        let mut chunk = [0u8; 2048];
        let n = stream.read(&mut chunk).await.map_err(|_| BadHead::Closed)?;
        if n == 0 {
            return Err(BadHead::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(asked) = classify(&buf)? {
            return Ok((asked, buf));
        }
    }
}

/// A socket whose first bytes were already read: they are read again first,
/// so the WebSocket handshake sees the request whole.
pub(crate) struct Replayed {
    ahead: Vec<u8>,
    at: usize,
    stream: Transport,
}

impl Replayed {
    pub(crate) fn new(ahead: Vec<u8>, stream: Transport) -> Self {
        Self {
            ahead,
            at: 0,
            stream,
        }
    }
}

impl AsyncRead for Replayed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.at < this.ahead.len() {
            let n = buf.remaining().min(this.ahead.len() - this.at);
            buf.put_slice(&this.ahead[this.at..this.at + n]);
            this.at += n;
            if this.at == this.ahead.len() {
                this.ahead = Vec::new();
                this.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Replayed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upgrade_and_a_page_are_told_apart() {
        let up = b"GET /?token=x HTTP/1.1\r\nHost: a\r\nUpgrade: WebSocket\r\nConnection: Upgrade\r\n\r\n";
        let presented = Presented {
            query: Some("token=x".into()),
            ..Default::default()
        };
        assert_eq!(classify(up), Ok(Some(Asked::Upgrade(presented))));
        let ticket =
            b"POST /ticket HTTP/1.1\r\nAuthorization: Bearer t\r\nOrigin: https://h\r\n\r\n";
        let Ok(Some(Asked::Page {
            method, presented, ..
        })) = classify(ticket)
        else {
            panic!("a page");
        };
        assert_eq!(method, "POST");
        assert_eq!(presented.authorization.as_deref(), Some("Bearer t"));
        assert_eq!(presented.origin.as_deref(), Some("https://h"));
        assert!(
            !format!("{presented:?}").contains("Bearer"),
            "no secret in Debug"
        );
        let page = b"GET /app.js?v=1 HTTP/1.1\r\nHost: a\r\nIf-None-Match: \"x\"\r\n\r\n";
        assert_eq!(
            classify(page),
            Ok(Some(Asked::Page {
                method: "GET".into(),
                path: "/app.js".into(),
                if_none_match: Some("\"x\"".into()),
                presented: Presented {
                    query: Some("v=1".into()),
                    ..Default::default()
                },
            }))
        );
        assert_eq!(classify(b"GET / HTTP/1.1\r\nHo"), Ok(None));
        assert_eq!(
            classify(b"\x16\x03\x01 TLS\r\n\r\n"),
            Err(BadHead::Malformed)
        );
        let huge = [b"GET / HTTP/1.1\r\nX: ".as_slice(), &[b'a'; MAX_HEAD]].concat();
        assert_eq!(classify(&huge), Err(BadHead::TooLarge));
    }
}
