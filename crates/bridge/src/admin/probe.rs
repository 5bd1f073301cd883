//! `ahp-copilot-bridge health`: asks a running bridge's `/readyz` (over
//! https when its config has `[admin.tls]`), for a container HEALTHCHECK or
//! a systemd `ExecStartPost`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConnection, StreamOwned};

/// How long the probe waits for the bridge, in all.
const PROBE_DEADLINE: Duration = Duration::from_secs(10);

/// Why the bridge could not be asked.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unreachable(String);

/// What `/readyz` said: ready or not, and the checks (its JSON body), or
/// why it could not be asked. With `tls_cert` (`[admin.tls] cert`) it asks
/// over https, trusting that certificate only.
pub fn readyz(admin: SocketAddr, tls_cert: Option<&Path>) -> Result<(bool, String), Unreachable> {
    let stream = TcpStream::connect_timeout(&admin, PROBE_DEADLINE)
        .map_err(|e| Unreachable(format!("cannot reach the admin listener at {admin}: {e}")))?;
    let io = |e: std::io::Error| Unreachable(format!("{admin}: {e}"));
    stream.set_read_timeout(Some(PROBE_DEADLINE)).map_err(io)?;
    stream.set_write_timeout(Some(PROBE_DEADLINE)).map_err(io)?;
    let request = format!("GET /readyz HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n");
    let answer = match tls_cert {
        None => ask(stream, &request).map_err(io)?,
        Some(cert) => {
            let config = super::pinned::client_config(cert)
                .map_err(|e| Unreachable(format!("[admin.tls] cert {e}")))?;
            // The name is not checked (the certificate is pinned); rustls
            // needs one to start, and the address is what was dialled.
            let name = ServerName::IpAddress(admin.ip().into());
            let conn = ClientConnection::new(Arc::new(config), name)
                .map_err(|e| Unreachable(format!("{admin}: {e}")))?;
            ask(StreamOwned::new(conn, stream), &request).map_err(io)?
        }
    };
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| Unreachable(format!("{admin}: not an HTTP answer")))?;
    let status = head.split(' ').nth(1).unwrap_or_default();
    Ok((status == "200", body.trim().to_owned()))
}

/// `request` on `stream`; its whole answer (bounded), up to the close.
fn ask(mut stream: impl Read + Write, request: &str) -> std::io::Result<String> {
    stream.write_all(request.as_bytes())?;
    let mut answer = Vec::new();
    match stream.take(1024 * 1024).read_to_end(&mut answer) {
        Ok(_) => {}
        // A listener that closes without TLS's close_notify after a whole
        // answer: the answer stands (a cut one fails the parse below).
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !answer.is_empty() => {}
        Err(e) => return Err(e),
    }
    Ok(String::from_utf8_lossy(&answer).into_owned())
}
