//! Who a request is, before it is let in: its `Origin` checked (the
//! console's own origins allowed unasked), then a ticket, a token or JWT
//! (`Authorization: Bearer`, `?token=`, `?tkn=`), a client certificate, in
//! that order. Used by the upgrade and by `POST /ticket`.

use std::net::SocketAddr;

use tokio_tungstenite::tungstenite::http::StatusCode;

use super::head::Presented;
use crate::auth::jwt::looks_like_jwt;
use crate::auth::tickets::Tickets;
use crate::auth::{Authenticated, Principals, Standing};
use ahp_bridge_base::config::{CertIdentity, ServerConfig};
use ahp_bridge_telemetry::Refusal;

/// The token a client presents: `Authorization: Bearer TOKEN` (the scheme
/// in any case), or `?token=` / `?tkn=` in the query (the keys browser
/// clients use, since they cannot set headers on a WebSocket).
pub(crate) fn presented_token<'a>(
    auth_header: Option<&'a str>,
    query: Option<&'a str>,
) -> Option<&'a str> {
    let from_header = auth_header.and_then(|h| {
        let (scheme, token) = h.trim().split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
    });
    let from_query = query.and_then(|q| {
        q.split('&').find_map(|kv| match kv.split_once('=') {
            Some(("token" | "tkn", v)) if !v.is_empty() => Some(v),
            _ => None,
        })
    });
    from_header.or(from_query)
}

/// Whether a browser at `origin` may connect: it equals an entry of
/// `allowed`, or an entry ends in `:*` (`http://localhost:*`) and the origin
/// is that scheme and host on any port (or none). Nothing else matches: not
/// `http://localhost.evil.example`, not another scheme.
pub(crate) fn origin_allowed(allowed: &[String], origin: &str) -> bool {
    allowed.iter().any(|a| match a.strip_suffix(":*") {
        Some(base) => {
            origin == base
                || origin
                    .strip_prefix(base)
                    .and_then(|rest| rest.strip_prefix(':'))
                    .is_some_and(|port| {
                        (1..=5).contains(&port.len()) && port.bytes().all(|b| b.is_ascii_digit())
                    })
        }
        None => a == origin,
    })
}

/// The origins the console served on this socket has: the address the
/// client reached, as an IP literal (a name could be rebound to loopback by
/// another site), and `localhost` on that port when it is loopback; `https`
/// with TLS.
pub(crate) fn own_origins(local: SocketAddr, tls: bool) -> Vec<String> {
    let scheme = if tls { "https" } else { "http" };
    let mut own = vec![format!("{scheme}://{local}")];
    if local.ip().is_loopback() {
        own.push(format!("{scheme}://localhost:{}", local.port()));
    }
    own
}

/// The one-use ticket in a query (`?ticket=`), as the console sends it.
fn presented_ticket(query: Option<&str>) -> Option<&str> {
    query?.split('&').find_map(|kv| match kv.split_once('=') {
        Some(("ticket", v)) if !v.is_empty() => Some(v),
        _ => None,
    })
}

/// Why a request was not let in: the HTTP status and a body that says why
/// (never the credential).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeptOut {
    pub status: StatusCode,
    pub why: String,
}

impl KeptOut {
    fn unauthorized(why: impl Into<String>) -> Self {
        Self {
            status: StatusCode::UNAUTHORIZED,
            why: why.into(),
        }
    }

    /// The counter's reason.
    pub(crate) fn refusal(&self) -> Refusal {
        match self.status {
            StatusCode::FORBIDDEN => Refusal::Origin,
            _ => Refusal::Unauthorized,
        }
    }
}

/// What a request presents and how it reached the listener.
pub(crate) struct Asking<'a> {
    pub presented: &'a Presented,
    /// The identities of its verified client certificate.
    pub certs: &'a [CertIdentity],
    /// The console's origins on this socket ([`own_origins`]), allowed unasked.
    pub own: &'a [String],
    /// Whether a `?ticket=` may stand for the credential (the upgrade), or
    /// not (`POST /ticket`: a ticket does not make tickets).
    pub tickets: Option<&'a Tickets>,
}

/// The principal a request authenticates as, and with what: its Origin
/// checked first, then a ticket, a token (`Authorization: Bearer`,
/// `?token=`, `?tkn=`), a client certificate, in that order; or why not.
pub(crate) async fn authenticate(
    cfg: &ServerConfig,
    principals: &Principals,
    asking: &Asking<'_>,
) -> Result<Authenticated, KeptOut> {
    let p = asking.presented;
    if let Some(origin) = &p.origin {
        if !asking.own.iter().any(|o| o == origin) && !origin_allowed(&cfg.allowed_origins, origin)
        {
            return Err(KeptOut {
                status: StatusCode::FORBIDDEN,
                why: "origin not allowed; add it to [server] allowed_origins".into(),
            });
        }
    }
    if let (Some(ticket), Some(tickets)) = (presented_ticket(p.query.as_deref()), asking.tickets) {
        // The credential behind it must still stand: a reload may have
        // revoked it since the ticket was made.
        return tickets
            .redeem(ticket)
            .filter(|a| principals.standing(a) == Standing::Valid)
            .ok_or_else(|| {
                KeptOut::unauthorized(
                    "ticket unknown, used or expired: ask POST /ticket for another",
                )
            });
    }
    if let Some(token) = presented_token(p.authorization.as_deref(), p.query.as_deref()) {
        if !principals.issuers().is_empty() && looks_like_jwt(token) {
            return principals
                .authenticate_jwt(token)
                .await
                .map_err(|e| KeptOut::unauthorized(format!("token refused: {e}")));
        }
        return principals.authenticate(Some(token)).ok_or_else(|| {
            KeptOut::unauthorized("wrong token: send Authorization: Bearer TOKEN or ?token=TOKEN")
        });
    }
    if let Some(a) = principals.authenticate_cert(asking.certs) {
        return Ok(a);
    }
    principals.authenticate(None).ok_or_else(|| {
        KeptOut::unauthorized(
            "missing token: send Authorization: Bearer TOKEN or ?token=TOKEN, or a client certificate",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_bridge_base::config::Config;

    fn cfg(token: Option<&str>, origins: &[&str]) -> Config {
        let mut c = Config::default();
        c.server.token = token.map(String::from);
        c.server.allowed_origins = origins.iter().map(|s| s.to_string()).collect();
        c
    }

    fn check(
        c: &Config,
        auth: Option<&str>,
        query: Option<&str>,
        origin: Option<&str>,
    ) -> Result<String, StatusCode> {
        let own = own_origins("127.0.0.1:8421".parse().unwrap(), false);
        let presented = Presented {
            authorization: auth.map(String::from),
            query: query.map(String::from),
            origin: origin.map(String::from),
        };
        let tickets = Tickets::default();
        let asking = Asking {
            presented: &presented,
            certs: &[],
            own: &own,
            tickets: Some(&tickets),
        };
        let principals = Principals::from_config(c.reloadable());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(authenticate(&c.server, &principals, &asking))
            .map(|a| a.principal.name.clone())
            .map_err(|e| e.status)
    }

    /// The upgrade with `?ticket=TICKET`, from the console's own origin.
    async fn redeem(
        c: &Config,
        principals: &Principals,
        tickets: &Tickets,
        ticket: &str,
    ) -> Result<Authenticated, KeptOut> {
        let own = own_origins("127.0.0.1:8421".parse().unwrap(), true);
        let presented = Presented {
            query: Some(format!("ticket={ticket}")),
            origin: Some("https://127.0.0.1:8421".into()),
            ..Default::default()
        };
        let asking = Asking {
            presented: &presented,
            certs: &[],
            own: &own,
            tickets: Some(tickets),
        };
        authenticate(&c.server, principals, &asking).await
    }

    #[tokio::test]
    async fn a_ticket_stands_for_its_credential_once() {
        let c = cfg(Some("0123456789abcdef"), &[]);
        let principals = Principals::from_config(c.reloadable());
        let tickets = Tickets::default();
        let auth = principals.authenticate(Some("0123456789abcdef")).unwrap();
        let (ticket, _) = tickets.issue(auth).unwrap();
        let a = redeem(&c, &principals, &tickets, &ticket).await.unwrap();
        assert_eq!(a.principal.name, "default");
        let again = redeem(&c, &principals, &tickets, &ticket)
            .await
            .unwrap_err();
        assert_eq!(again.status, StatusCode::UNAUTHORIZED);
        // A ticket whose token a reload revoked meanwhile is refused.
        let auth = principals.authenticate(Some("0123456789abcdef")).unwrap();
        let (ticket, _) = tickets.issue(auth).unwrap();
        let rotated = Principals::from_config(cfg(Some("0123456789abcdef-new"), &[]).reloadable());
        assert!(redeem(&c, &rotated, &tickets, &ticket).await.is_err());
    }

    #[test]
    fn token_by_header_or_query() {
        let c = cfg(Some("0123456789abcdef"), &[]);
        let ok = Ok("default".to_string());
        assert_eq!(check(&c, Some("Bearer 0123456789abcdef"), None, None), ok);
        assert_eq!(check(&c, Some("bearer 0123456789abcdef"), None, None), ok);
        assert_eq!(check(&c, Some("BEARER  0123456789abcdef "), None, None), ok);
        assert_eq!(
            check(&c, None, Some("a=1&token=0123456789abcdef"), None),
            ok
        );
        assert_eq!(check(&c, None, Some("tkn=0123456789abcdef&b=2"), None), ok);
        assert_eq!(
            check(&c, Some("Bearer nope"), None, None),
            Err(StatusCode::UNAUTHORIZED)
        );
        assert_eq!(
            check(&c, Some("Basic 0123456789abcdef"), None, None),
            Err(StatusCode::UNAUTHORIZED)
        );
        assert_eq!(
            check(&c, None, Some("xtoken=0123456789abcdef"), None),
            Err(StatusCode::UNAUTHORIZED)
        );
        assert_eq!(check(&c, None, None, None), Err(StatusCode::UNAUTHORIZED));
        assert_eq!(
            check(&cfg(None, &[]), None, None, None),
            Ok("local".to_string())
        );
    }

    #[test]
    fn origin_must_be_allowed() {
        let c = cfg(None, &["https://ok.example"]);
        assert!(check(&c, None, None, Some("https://ok.example")).is_ok());
        assert_eq!(
            check(&c, None, None, Some("https://evil.example")),
            Err(StatusCode::FORBIDDEN)
        );
    }

    #[test]
    fn any_port_patterns_match_only_that_host() {
        let allowed = vec![
            "http://localhost:*".to_string(),
            "https://ide.example".into(),
        ];
        for ok in [
            "http://localhost:5173",
            "http://localhost",
            "https://ide.example",
        ] {
            assert!(origin_allowed(&allowed, ok), "{ok}");
        }
        for bad in [
            "http://localhost.evil.example:5173",
            "http://localhost:5173.evil.example",
            "http://localhost:",
            "http://localhost:123456",
            "https://localhost:5173",
            "http://evil.example",
            "https://ide.example:8443",
        ] {
            assert!(!origin_allowed(&allowed, bad), "{bad}");
        }
        // `serve` without allowed_origins refuses every browser, loopback
        // included, but for the console it serves itself on that address.
        let c = cfg(None, &[]);
        assert_eq!(
            check(&c, None, None, Some("http://localhost:5173")),
            Err(StatusCode::FORBIDDEN)
        );
        for own in ["http://127.0.0.1:8421", "http://localhost:8421"] {
            assert!(check(&c, None, None, Some(own)).is_ok(), "{own}");
        }
        assert_eq!(
            check(&c, None, None, Some("http://rebound.example:8421")),
            Err(StatusCode::FORBIDDEN)
        );
    }
}
