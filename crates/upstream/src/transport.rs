//! The WebSocket under the AHP client: a plain `ws://` connection to a host
//! on loopback, with Nagle off (an action is one small frame and must leave
//! at once: a turn's later deltas would otherwise wait on delayed ACKs) and
//! a bound on every inbound message.

use ahp::{Transport, TransportError, TransportMessage};
use ahp_bridge_base::config::Secret;
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::error::UpstreamError;

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
                Some(Ok(Message::Text(s))) => {
                    return Ok(Some(TransportMessage::Text(s.to_string())))
                }
                Some(Ok(Message::Binary(b))) => {
                    return Ok(Some(TransportMessage::Binary(b.into())))
                }
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

#[cfg(test)]
mod tests {
    #[test]
    fn an_error_quoting_the_url_loses_its_token() {
        let e = super::without_query("HTTP error: 401 for ws://127.0.0.1:1/?tkn=secret");
        assert!(!e.contains("secret"), "{e}");
        assert!(e.contains("[query removed]"), "{e}");
    }
}
