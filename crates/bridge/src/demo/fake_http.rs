//! The little HTTP/1.1 the loopback fakes speak (one request per
//! connection, `Connection: close`): their only clients are the runtime
//! and the runtime's AHP host.

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// One request as the fakes read it.
pub(crate) struct DemoRequest {
    pub method: String,
    pub path: String,
    pub body: Vec<u8>,
    /// The `Authorization` header's value.
    pub authorization: Option<String>,
}

/// Reads one request (a body up to 64 MiB).
pub(crate) async fn read_request(r: &mut BufReader<TcpStream>) -> std::io::Result<DemoRequest> {
    let mut line = String::new();
    r.read_line(&mut line).await?;
    let mut parts = line.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or("").to_owned(),
        parts.next().unwrap_or("").to_owned(),
    );
    let mut len = 0usize;
    let mut authorization = None;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).await? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.trim().eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap_or(0);
            } else if k.trim().eq_ignore_ascii_case("authorization") {
                authorization = Some(v.trim().to_owned());
            }
        }
    }
    let mut body = vec![0u8; len.min(64 * 1024 * 1024)];
    r.read_exact(&mut body).await?;
    Ok(DemoRequest {
        method,
        path,
        body,
        authorization,
    })
}

/// Writes a whole answer and closes.
pub(crate) async fn respond(
    s: &mut TcpStream,
    code: u16,
    ctype: &str,
    body: &[u8],
) -> std::io::Result<()> {
    let head = format!("HTTP/1.1 {code} X\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len());
    s.write_all(head.as_bytes()).await?;
    s.write_all(body).await?;
    s.shutdown().await
}
