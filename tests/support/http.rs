//! A plain HTTP/1.1 GET (the admin listener, Prometheus's API) or POST
//! (the console's `POST /ticket`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// An answer: status, headers (lowercase names), body.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// GET `path` (with its query) from `addr`; `Err` when it cannot be asked.
pub(crate) fn get(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<Answer> {
    request("GET", addr, path, headers)
}

/// POST to `path` with no body.
pub(crate) fn post(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<Answer> {
    request(
        "POST",
        addr,
        path,
        &[headers, &[("Content-Length", "0")]].concat(),
    )
}

fn request(
    method: &str,
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<Answer> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Ok(Answer {
        status,
        headers,
        body,
    })
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

/// A port free on loopback now (for a server the test starts).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Asks the admin listener's `/readyz` until `want` holds of its status and
/// body (JSON; null when it is not), within `deadline`; gives that body back.
/// An admin listener not up yet is asked again.
pub(crate) async fn readyz_until(
    admin: SocketAddr,
    deadline: Duration,
    what: &str,
    want: impl Fn(u16, &serde_json::Value) -> bool,
) -> serde_json::Value {
    let started = std::time::Instant::now();
    let mut last = None;
    loop {
        let answer = tokio::task::spawn_blocking(move || get(admin, "/readyz", &[]))
            .await
            .unwrap()
            .ok();
        if let Some(a) = answer {
            let body = serde_json::from_str(&a.body).unwrap_or(serde_json::Value::Null);
            if want(a.status, &body) {
                return body;
            }
            last = Some((a.status, body));
        }
        assert!(
            started.elapsed() < deadline,
            "{admin}: /readyz never {what} within {deadline:?}; last: {last:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
