//! The admin listener (`[admin] listen`): `/healthz`, `/readyz` and
//! `/metrics` over HTTP, or HTTPS with `[admin.tls]`. It serves nothing
//! that names a session, client, principal or prompt, so it asks for no
//! token; it binds loopback unless `[admin] expose` says otherwise.

pub(crate) mod http;
pub(crate) mod on_disk;
mod pinned;
pub(crate) mod probe;
pub(crate) mod ready;

pub use probe::readyz;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use self::http::{read_request, respond, AdminRequest};
use self::ready::Readiness;
use crate::ahp::tls::Tls;
use crate::ahp::transport::Transport;
use crate::telemetry::metrics;
use crate::telemetry::{wants_openmetrics, OPENMETRICS, TEXT_004};

/// Why the admin listener is not served.
#[derive(Debug, thiserror::Error)]
pub enum AdminListenError {
    #[error("[admin] listen {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the admin listener's address")]
    LocalAddr(#[source] std::io::Error),
}

/// Binds the admin listener; serves until `shutdown` is cancelled.
pub(crate) async fn start(
    addr: SocketAddr,
    readiness: Readiness,
    tls: Option<Arc<Tls>>,
    shutdown: CancellationToken,
) -> Result<SocketAddr, AdminListenError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| AdminListenError::Bind { addr, source })?;
    let bound = listener.local_addr().map_err(AdminListenError::LocalAddr)?;
    tokio::spawn(serve(listener, Arc::new(readiness), tls, shutdown));
    Ok(bound)
}

/// How long a scraper has for its TLS handshake.
const TLS_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

async fn serve(
    listener: TcpListener,
    readiness: Arc<Readiness>,
    tls: Option<Arc<Tls>>,
    shutdown: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => return,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, _)) => {
                let readiness = readiness.clone();
                let acceptor = tls.as_ref().map(|t| t.acceptor());
                tokio::spawn(async move {
                    let stream = match acceptor {
                        None => Transport::Plain(stream),
                        Some(a) => match tokio::time::timeout(TLS_DEADLINE, a.accept(stream)).await
                        {
                            Ok(Ok(s)) => Transport::Tls(Box::new(s)),
                            Ok(Err(e)) => return debug!("admin TLS handshake failed: {e}"),
                            Err(_) => return debug!("admin TLS handshake timed out"),
                        },
                    };
                    answer(stream, readiness).await
                });
            }
            Err(e) => {
                warn!("admin accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

async fn answer(mut stream: Transport, readiness: Arc<Readiness>) {
    let req = match read_request(&mut stream).await {
        Ok(req) => req,
        Err(e) => {
            debug!("admin request not read: {e}");
            if let Some(status) = e.status() {
                respond(&mut stream, status, "text/plain", &format!("{e}\n"), false).await;
            }
            return;
        }
    };
    let head_only = req.method == "HEAD";
    let (status, content_type, body) = route(&req, &readiness).await;
    respond(&mut stream, status, content_type, &body, head_only).await;
}

async fn route(req: &AdminRequest, readiness: &Readiness) -> (u16, &'static str, String) {
    if req.method != "GET" && req.method != "HEAD" {
        return (405, "text/plain", "only GET and HEAD\n".into());
    }
    match req.path.as_str() {
        // Alive whatever the file says; a refused file is said, not failed.
        "/healthz" => match readiness.on_disk.refused() {
            None => (200, "text/plain", "ok\n".into()),
            Some(why) => (200, "text/plain", format!("ok\nconfig: {why}\n")),
        },
        "/readyz" => {
            let report = readiness.check().await;
            let status = if report.ready() { 200 } else { 503 };
            (
                status,
                "application/json",
                format!("{}\n", report.to_json()),
            )
        }
        "/metrics" => {
            let om = wants_openmetrics(req.accept.as_deref());
            let body = metrics().encode(om);
            (200, if om { OPENMETRICS } else { TEXT_004 }, body)
        }
        _ => (404, "text/plain", "/healthz, /readyz, /metrics\n".into()),
    }
}
