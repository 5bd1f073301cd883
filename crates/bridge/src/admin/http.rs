//! Just enough HTTP/1.1 for the admin endpoints: one request per
//! connection, its head read within a deadline and a size bound, the
//! answer written with its length, the connection closed.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The most a request head may hold.
const MAX_HEAD: usize = 8 * 1024;
/// How long a client has to send its head.
pub(crate) const HEAD_DEADLINE: Duration = Duration::from_secs(5);

/// The parts of a request the admin endpoints read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct AdminRequest {
    pub method: String,
    pub path: String,
    pub accept: Option<String>,
}

/// Why a request was not read; each is answered with its status.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BadRequest {
    #[error("request head over {MAX_HEAD} bytes")]
    TooLarge,
    #[error("not an HTTP/1.x request")]
    Malformed,
    #[error("no request head within the deadline")]
    Slow,
    #[error("the connection closed before a whole request head")]
    Closed,
}

impl BadRequest {
    pub(crate) fn status(&self) -> Option<u16> {
        match self {
            Self::TooLarge => Some(431),
            Self::Malformed => Some(400),
            Self::Slow => Some(408),
            Self::Closed => None,
        }
    }
}

/// Parses a whole head; `Ok(None)`: more bytes are needed.
pub(crate) fn parse(buf: &[u8]) -> Result<Option<AdminRequest>, BadRequest> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(buf) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(BadRequest::Malformed),
    }
    let accept = req
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("accept"))
        .and_then(|h| std::str::from_utf8(h.value).ok())
        .map(String::from);
    let path = req.path.unwrap_or("/");
    Ok(Some(AdminRequest {
        method: req.method.unwrap_or_default().to_owned(),
        path: path.split('?').next().unwrap_or(path).to_owned(),
        accept,
    }))
}

/// Reads one request head from `stream`.
pub(crate) async fn read_request(
    stream: &mut (impl AsyncRead + Unpin),
) -> Result<AdminRequest, BadRequest> {
    let mut buf = Vec::with_capacity(1024);
    let read = async {
        loop {
            let mut chunk = [0u8; 1024];
            let n = stream
                .read(&mut chunk)
                .await
                .map_err(|_| BadRequest::Closed)?;
            if n == 0 {
                return Err(BadRequest::Closed);
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(req) = parse(&buf)? {
                return Ok(req);
            }
            if buf.len() > MAX_HEAD {
                return Err(BadRequest::TooLarge);
            }
        }
    };
    tokio::time::timeout(HEAD_DEADLINE, read)
        .await
        .unwrap_or(Err(BadRequest::Slow))
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// Writes a whole response; `head_only` (a HEAD request) leaves out the body.
pub(crate) async fn respond(
    stream: &mut (impl AsyncWrite + Unpin),
    status: u16,
    content_type: &str,
    body: &str,
    head_only: bool,
) {
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        reason(status),
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    if !head_only {
        let _ = stream.write_all(body.as_bytes()).await;
    }
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_is_parsed_once_whole() {
        assert_eq!(parse(b"GET /metrics HTTP/1.1\r\nAcc"), Ok(None));
        let req = parse(b"GET /metrics?x=1 HTTP/1.1\r\nAccept: text/plain\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(req.path, "/metrics");
        assert_eq!(req.accept.as_deref(), Some("text/plain"));
        assert_eq!(
            parse(b"\x16\x03\x01 TLS\r\n\r\n"),
            Err(BadRequest::Malformed)
        );
    }
}
