//! `POST /ticket`: the web console trades its token (or its client
//! certificate) for a one-use ticket, and connects with `?ticket=`, so no
//! token rides in a URL. The answer names the principal and its roles, so
//! the page knows what it may do before it tries.

use serde_json::json;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tracing::{info, warn};

use super::console::SECURITY_HEADERS;
use super::gate::KeptOut;
use crate::auth::tickets::Tickets;
use crate::auth::Authenticated;
use ahp_bridge_base::config::Role;
use ahp_bridge_telemetry::{metrics, Escaped};

/// The JSON answer to a `POST /ticket`, by whether the request authenticated.
pub(crate) fn body(answer: Result<Authenticated, KeptOut>, tickets: &Tickets) -> (u16, String) {
    let auth = match answer {
        Ok(a) => a,
        Err(r) => {
            metrics().connection_refused(r.refusal());
            info!(status = r.status.as_u16(), "ticket refused: {}", r.why);
            return (r.status.as_u16(), json!({ "error": r.why }).to_string());
        }
    };
    let principal = auth.principal.clone();
    match tickets.issue(auth) {
        Ok((ticket, lasts)) => {
            let roles: Vec<&str> = Role::ALL
                .into_iter()
                .filter(|r| principal.has(*r))
                .map(Role::as_str)
                .collect();
            info!(principal = %Escaped(&principal.name), "ticket issued");
            let answer = json!({
                "ticket": ticket,
                "expiresIn": lasts.as_secs(),
                "principal": principal.name,
                "roles": roles,
            });
            (200, answer.to_string())
        }
        Err(e) => {
            warn!("ticket refused: {e}");
            (503, json!({ "error": e.to_string() }).to_string())
        }
    }
}

/// Answers one `POST /ticket` and closes.
pub(crate) async fn answer(
    stream: &mut (impl AsyncWrite + Unpin),
    answer: Result<Authenticated, KeptOut>,
    tickets: &Tickets,
) {
    let (status, body) = body(answer, tickets);
    let reason = tokio_tungstenite::tungstenite::http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\n{SECURITY_HEADERS}Connection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body.as_bytes()).await;
    let _ = stream.shutdown().await;
}
