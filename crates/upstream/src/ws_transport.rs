//! The WebSocket under the AHP client: a plain `ws://` connection to a host
//! on loopback, with Nagle off (an action is one small frame and must leave
//! at once: a turn's later deltas would otherwise wait on delayed ACKs) and
//! a bound on every inbound message.

use ahp::{Transport, TransportError, TransportMessage};
use ahp_bridge_base::config::Secret;
use ahp_bridge_telemetry::metrics;
use ahp_types::actions::ActionOrigin;
use ahp_types::messages::JsonRpcMessage;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tracing::warn;

use crate::upstream_error::UpstreamError;

/// What the socket reads at a time. The library zeroes this much before
/// every read, a wake that finds nothing included; its 128 KiB default was a
/// third of the bridge's instructions over a turn. A longer frame still
/// arrives whole: the buffer grows to the length its header announces.
const READ_BUFFER_BYTES: usize = 8 * 1024;

/// One connection to the host.
pub(crate) struct Socket {
    inner: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl Socket {
    /// Opens `url` (`ws://ip:port/`), giving `token` as the host wants it:
    /// in the query, the one place it reads it. The URL with the token is
    /// never logged nor put in an error.
    pub(crate) async fn open(
        url: &str,
        token: Option<&Secret>,
        max_frame_bytes: usize,
    ) -> Result<Self, UpstreamError> {
        let full = match token {
            Some(t) => format!("{}?tkn={}", url, t.0),
            None => url.to_owned(),
        };
        let config = WebSocketConfig::default()
            .max_message_size(Some(max_frame_bytes))
            .max_frame_size(Some(max_frame_bytes))
            .read_buffer_size(READ_BUFFER_BYTES);
        let (inner, _) =
            tokio_tungstenite::connect_async_with_config(full.as_str(), Some(config), true)
                .await
                .map_err(|e| UpstreamError::Connect {
                    url: url.to_owned(),
                    reason: without_query(&e.to_string()),
                })?;
        Ok(Self { inner })
    }
}

/// An error text with any `?...` query cut off, should the library quote
/// the URL it was given.
fn without_query(text: &str) -> String {
    match text.find("?tkn=") {
        Some(i) => format!("{} [query removed]", &text[..i]),
        None => text.to_owned(),
    }
}

impl Transport for Socket {
    async fn send(&mut self, msg: TransportMessage) -> Result<(), TransportError> {
        let frame = match msg {
            TransportMessage::Parsed(m) => Message::Text(
                serde_json::to_string(&m)
                    .map_err(|e| TransportError::Protocol(e.to_string()))?
                    .into(),
            ),
            TransportMessage::Text(s) => Message::Text(s.into()),
            TransportMessage::Binary(b) => Message::Binary(b.into()),
        };
        self.inner
            .send(frame)
            .await
            .map_err(|e| TransportError::Io(e.to_string()))
    }

    async fn recv(&mut self) -> Result<Option<TransportMessage>, TransportError> {
        loop {
            match self.inner.next().await {
                None | Some(Ok(Message::Close(_))) => return Ok(None),
                Some(Err(e)) => return Err(TransportError::Io(e.to_string())),
                Some(Ok(Message::Text(s))) => return Ok(Some(read(s.as_bytes()))),
                Some(Ok(Message::Binary(b))) => return Ok(Some(read(&b))),
                // Pings are answered by tungstenite itself.
                Some(Ok(_)) => continue,
            }
        }
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        self.inner
            .close(None)
            .await
            .map_err(|e| TransportError::Io(e.to_string()))
    }
}

/// A frame decoded here, as the client would decode it, so that one the
/// client would drop without a word is counted and logged: a frame that is
/// not JSON-RPC, and an `action` whose envelope does not read. The client
/// takes the decoded message and does not parse the frame again. The log
/// names the kind of error only: serde's text may quote the frame, prompt
/// text included.
fn read(frame: &[u8]) -> TransportMessage {
    let msg: JsonRpcMessage = match serde_json::from_slice(frame) {
        Ok(m) => m,
        Err(e) => {
            unread("agent_host_frame", "not JSON-RPC", &e);
            return TransportMessage::Binary(frame.to_vec());
        }
    };
    if let JsonRpcMessage::Notification(n) = &msg {
        if let ("action", Some(params)) = (n.method.as_str(), &n.params) {
            if let Err(e) = EnvelopeFields::deserialize(params) {
                unread(
                    "agent_host_action_unread",
                    "an action that does not read",
                    &e,
                );
            }
        }
    }
    TransportMessage::Parsed(msg)
}

/// What of an [`ActionEnvelope`](ahp_types::actions::ActionEnvelope) can fail to read, its action aside: the
/// action is the official union, whose `Unknown` takes any value, so
/// decoding it here too (every streamed delta, a second time) would only
/// cost. Fields as `ActionEnvelope` has them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)] // read for their types only
struct EnvelopeFields {
    channel: String,
    action: serde::de::IgnoredAny,
    server_seq: u64,
    #[serde(default)]
    origin: Option<ActionOrigin>,
    #[serde(default)]
    rejection_reason: Option<String>,
}

fn unread(kind: &'static str, what: &str, e: &serde_json::Error) {
    metrics().runtime_mismatch(kind);
    warn!(kind, error = ?e.classify(), "the agent host sent {what}; the client drops it");
}

#[cfg(test)]
mod tests {
    use ahp::TransportMessage;

    fn count(kind: &str) -> u64 {
        let text = super::metrics().encode(false);
        let line = format!("ahp_bridge_runtime_protocol_mismatches_total{{kind=\"{kind}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(line.as_str()))
            .map_or(0, |n| n.trim().parse().unwrap())
    }

    /// An action notification as the host frames it, typed here; the
    /// others are it with one thing changed.
    fn frame() -> String {
        use ahp_types::actions::{ActionEnvelope, ChatTurnCompleteAction, StateAction};
        use ahp_types::messages::JsonRpcNotification;
        let env = ActionEnvelope {
            channel: "c".into(),
            action: StateAction::ChatTurnComplete(ChatTurnCompleteAction {
                turn_id: "t".into(),
                duration: 1,
                meta: None,
            }),
            server_seq: 1,
            origin: None,
            rejection_reason: None,
        };
        serde_json::to_string(&JsonRpcNotification {
            jsonrpc: Default::default(),
            method: "action".into(),
            params: Some(serde_json::to_value(&env).unwrap()),
        })
        .unwrap()
    }

    #[test]
    fn a_frame_the_client_would_drop_unread_is_counted_and_still_handed_on() {
        let ok = frame();
        let unknown = ok.replace("turnComplete", "turnOfAKindNotKnown");
        assert_ne!(ok, unknown);
        let (frames, actions) = (count("agent_host_frame"), count("agent_host_action_unread"));
        assert!(matches!(
            super::read(ok.as_bytes()),
            TransportMessage::Parsed(_)
        ));
        assert!(matches!(
            super::read(unknown.as_bytes()),
            TransportMessage::Parsed(_)
        ));
        assert_eq!(
            count("agent_host_action_unread"),
            actions,
            "a known action, and an unknown one, read"
        );
        // An envelope of another shape: the client would drop it unread.
        let bad = ok.replace("\"serverSeq\":1", "\"serverSeq\":\"1\"");
        assert_ne!(ok, bad);
        assert!(matches!(
            super::read(bad.as_bytes()),
            TransportMessage::Parsed(_)
        ));
        assert_eq!(count("agent_host_action_unread"), actions + 1);
        assert!(matches!(
            super::read(b"not json"),
            TransportMessage::Binary(_)
        ));
        assert_eq!(count("agent_host_frame"), frames + 1);
    }

    #[test]
    fn an_error_quoting_the_url_loses_its_token() {
        let e = super::without_query("HTTP error: 401 for ws://127.0.0.1:1/?tkn=secret");
        assert!(!e.contains("secret"), "{e}");
        assert!(e.contains("[query removed]"), "{e}");
    }
}
