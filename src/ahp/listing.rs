//! Paged reads: `listSessions` (most recently modified first, `limit` and an
//! opaque `cursor`, see [`super::cursor`]) and `fetchTurns`.

use serde_json::{json, Value};

use super::auth::Principal;
use super::errors::AhpError;
use super::host::Host;
use super::methods::str_field;
use super::state::summary_json;
use crate::jsonrpc::{ErrorCode, RpcError};

/// The most sessions one `listSessions` page holds, whatever `limit` asks
/// (the spec lets a server cap pages). Also the page size without `limit`.
pub const MAX_PAGE: usize = 500;

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
fn page_limit(params: &Value) -> Result<usize, RpcError> {
    match params.get("limit") {
        None | Some(Value::Null) => Ok(MAX_PAGE),
        Some(v) => match v.as_u64() {
            Some(n) if n > 0 => Ok((n as usize).min(MAX_PAGE)),
            _ => Err(invalid("field `limit` must be a positive integer")),
        },
    }
}

impl Host {
    /// One page of the sessions `principal` sees, newest first. A cursor
    /// this host did not hand to this principal is InvalidParams.
    pub(super) fn list_sessions(
        &self,
        principal: &Principal,
        params: &Value,
    ) -> Result<Value, RpcError> {
        let limit = page_limit(params)?;
        let after = match params.get("cursor") {
            None | Some(Value::Null) => None,
            Some(Value::String(c)) => Some(self.cursors.open(&principal.name, c).ok_or_else(
                || invalid("unrecognised `cursor`: pass back a `nextCursor` this host gave this connection's principal"),
            )?),
            Some(_) => return Err(invalid("field `cursor` must be a string")),
        };
        let st = self.lock();
        let mut rows: Vec<_> = st
            .sessions
            .iter()
            .filter(|(_, e)| principal.sees(&e.owner))
            .map(|(uri, e)| {
                let pos = self.cursors.position(modified_ns(&e.modified_at), uri);
                (pos, uri, e)
            })
            .filter(|(pos, _, _)| after.map_or(true, |a| *pos > a))
            .collect();
        rows.sort_unstable_by_key(|(pos, _, _)| *pos);
        let more = rows.len() > limit;
        rows.truncate(limit);
        let items: Vec<Value> = rows.iter().map(|(_, u, e)| summary_json(u, e)).collect();
        let mut page = json!({"items": items});
        if let (true, Some((last, _, _))) = (more, rows.last()) {
            page["nextCursor"] = json!(self.cursors.seal(&principal.name, *last));
        }
        Ok(page)
    }

    /// Every turn stays in the chat state (snapshots carry them all and no
    /// `turnsNextCursor` is ever set), so there is nothing older to load:
    /// without a cursor the answer is `{}`, and any cursor is one this host
    /// never issued, which the spec says MUST be InvalidParams.
    pub(super) fn fetch_turns(
        &self,
        principal: &Principal,
        params: &Value,
    ) -> Result<Value, RpcError> {
        let chat = str_field(params, "channel")?;
        let visible = {
            let st = self.lock();
            st.chats.contains_key(chat) && st.visible(principal, chat)
        };
        if !visible {
            return Err(RpcError::new(
                AhpError::SessionNotFound,
                format!("no chat {chat:?}"),
            ));
        }
        match params.get("cursor") {
            None | Some(Value::Null) => Ok(json!({})),
            Some(Value::String(_)) => Err(invalid(
                "unrecognised `cursor`: this host keeps every turn in the chat state and never sets `turnsNextCursor`",
            )),
            Some(_) => Err(invalid("field `cursor` must be a string")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_times() {
        assert_eq!(page_limit(&json!({})).unwrap(), MAX_PAGE);
        assert_eq!(page_limit(&json!({"limit": 10})).unwrap(), 10);
        assert_eq!(page_limit(&json!({"limit": 100000})).unwrap(), MAX_PAGE);
        for bad in [json!(0), json!(-1), json!("10"), json!(1.5)] {
            assert!(page_limit(&json!({ "limit": bad })).is_err(), "{bad}");
        }
        // Fractions of different lengths still order by time, not by text.
        assert!(modified_ns("2026-01-01T00:00:00.1Z") > modified_ns("2026-01-01T00:00:00.09Z"));
        assert_eq!(modified_ns("yesterday"), 0);
    }
}
