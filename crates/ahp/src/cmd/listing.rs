//! Paged reads: `listSessions` (most recently modified first, `limit` and an
//! opaque `cursor`, see [`super::cursor`]) and `fetchTurns`.

use ahp_types::commands::{
    FetchTurnsParams, FetchTurnsResult, ListSessionsParams, ListSessionsResult,
};

use super::cursor::CursorKey;
use crate::auth::Principal;
use crate::host::Host;
use crate::protocol::errors::AhpError;
use crate::protocol::versions::Version;
use ahp_bridge_jsonrpc::{ErrorCode, RpcError};

/// The most sessions one `listSessions` page holds, whatever `limit` asks
/// (the spec lets a server cap pages). Also the page size without `limit`.
pub(crate) const MAX_PAGE: usize = 500;

/// `modifiedAt` as nanoseconds since 1970; a time that does not parse sorts
/// as the oldest.
fn modified_ns(modified_at: &str) -> i128 {
    modified_at
        .parse::<jiff::Timestamp>()
        .map_or(0, |t| t.as_nanosecond())
}

fn invalid(msg: impl Into<String>) -> RpcError {
    RpcError::new(ErrorCode::InvalidParams, msg)
}

/// The page size `limit` asks for, capped at [`MAX_PAGE`].
fn page_limit(limit: Option<i64>) -> Result<usize, RpcError> {
    match limit {
        None => Ok(MAX_PAGE),
        Some(n) if n > 0 => Ok((n as usize).min(MAX_PAGE)),
        Some(_) => Err(invalid("field `limit` must be a positive integer")),
    }
}

/// One page of the sessions `principal` sees, newest first. A cursor
/// this host did not hand to this principal is InvalidParams.
pub(crate) fn list_sessions(
    host: &Host,
    cursors: &CursorKey,
    principal: &Principal,
    version: Version,
    p: ListSessionsParams,
) -> Result<ListSessionsResult, RpcError> {
    let limit = page_limit(p.limit)?;
    let after = match &p.cursor {
        None => None,
        Some(c) => Some(cursors.open(&principal.name, c).ok_or_else(|| {
            invalid("unrecognised `cursor`: pass back a `nextCursor` this host gave this connection's principal")
        })?),
    };
    let mut rows: Vec<_> = host
        .session_list()
        .visible_sessions(principal)
        .into_iter()
        .map(|(uri, modified, mut summary)| {
            version.summary(&mut summary);
            (cursors.position(modified_ns(&modified), &uri), summary)
        })
        .filter(|(pos, _)| after.is_none_or(|a| *pos > a))
        .collect();
    rows.sort_unstable_by_key(|(pos, _)| *pos);
    let more = rows.len() > limit;
    rows.truncate(limit);
    let next_cursor = match (more, rows.last()) {
        (true, Some((last, _))) => Some(cursors.seal(&principal.name, *last)),
        _ => None,
    };
    Ok(ListSessionsResult {
        next_cursor,
        items: rows.into_iter().map(|(_, s)| s).collect(),
    })
}

/// `fetchTurns`: the host dispatches the page before `cursor` (before the
/// chat state's window without one) as `chat/turnsLoaded`, then answers
/// `{}`. A cursor this host did not issue is InvalidParams, as the spec says.
pub(crate) fn fetch_turns(
    host: &Host,
    principal: &Principal,
    p: FetchTurnsParams,
) -> Result<FetchTurnsResult, RpcError> {
    if !host.session_list().chat_visible(principal, &p.channel) {
        return Err(RpcError::new(
            AhpError::SessionNotFound,
            format!("no chat {:?}", p.channel),
        ));
    }
    host.session_list()
        .load_turns(&p.channel, p.cursor.as_deref())?;
    Ok(FetchTurnsResult {})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_times() {
        assert_eq!(page_limit(None).unwrap(), MAX_PAGE);
        assert_eq!(page_limit(Some(10)).unwrap(), 10);
        assert_eq!(page_limit(Some(100000)).unwrap(), MAX_PAGE);
        for bad in [0, -1] {
            assert!(page_limit(Some(bad)).is_err(), "{bad}");
        }
        // Fractions of different lengths still order by time, not by text.
        assert!(modified_ns("2026-01-01T00:00:00.1Z") > modified_ns("2026-01-01T00:00:00.09Z"));
        assert_eq!(modified_ns("yesterday"), 0);
    }
}
