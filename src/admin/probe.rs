//! `ahp-copilot-bridge health`: asks a running bridge's `/readyz`, for a
//! container HEALTHCHECK or a systemd `ExecStartPost`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// How long the probe waits for the bridge, in all.
const PROBE_DEADLINE: Duration = Duration::from_secs(10);

/// Why the bridge could not be asked.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unreachable(String);

/// What `/readyz` said: ready or not, and the checks (its JSON body), or
/// why it could not be asked.
pub fn readyz(admin: SocketAddr) -> Result<(bool, String), Unreachable> {
    let mut stream = TcpStream::connect_timeout(&admin, PROBE_DEADLINE)
        .map_err(|e| Unreachable(format!("cannot reach the admin listener at {admin}: {e}")))?;
    let io = |e: std::io::Error| Unreachable(format!("{admin}: {e}"));
    stream.set_read_timeout(Some(PROBE_DEADLINE)).map_err(io)?;
    stream.set_write_timeout(Some(PROBE_DEADLINE)).map_err(io)?;
    let request = format!("GET /readyz HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).map_err(io)?;
    let mut answer = String::new();
    stream
        .take(1024 * 1024)
        .read_to_string(&mut answer)
        .map_err(io)?;
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| Unreachable(format!("{admin}: not an HTTP answer")))?;
    let status = head.split(' ').nth(1).unwrap_or_default();
    Ok((status == "200", body.trim().to_owned()))
}
