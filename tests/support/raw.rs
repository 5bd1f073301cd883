//! A raw WebSocket client for frames the official client never sends.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub(crate) struct Raw {
    pub ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

/// What the server did next.
#[derive(Debug)]
pub(crate) enum Next {
    Json(Value),
    Closed(Option<(u16, String)>),
}

impl Raw {
    pub(crate) async fn connect(url: &str) -> Raw {
        let (ws, _) = tokio_tungstenite::connect_async(url)
            .await
            .expect("raw connect");
        Raw { ws }
    }
    /// Over `wss`, trusting what `tls` trusts.
    pub(crate) async fn connect_tls(url: &str, tls: std::sync::Arc<rustls::ClientConfig>) -> Raw {
        let connector = tokio_tungstenite::Connector::Rustls(tls);
        let (ws, _) =
            tokio_tungstenite::connect_async_tls_with_config(url, None, true, Some(connector))
                .await
                .expect("raw wss connect");
        Raw { ws }
    }
    pub(crate) async fn send_text(&mut self, text: impl Into<String>) {
        self.ws
            .send(Message::text(text.into()))
            .await
            .expect("send");
    }
    pub(crate) async fn send_binary(&mut self, data: Vec<u8>) {
        self.ws.send(Message::binary(data)).await.expect("send");
    }
    pub(crate) async fn next(&mut self) -> Next {
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match self.ws.next().await {
                    None | Some(Err(_)) => return Next::Closed(None),
                    Some(Ok(Message::Text(t))) => {
                        return Next::Json(
                            serde_json::from_str(t.as_str()).expect("json from server"),
                        )
                    }
                    Some(Ok(Message::Close(f))) => {
                        return Next::Closed(f.map(|f| (u16::from(f.code), f.reason.to_string())))
                    }
                    Some(Ok(_)) => continue,
                }
            }
        })
        .await
        .expect("server answered within 10s")
    }
    /// The answer to request `id`, skipping notifications.
    pub(crate) async fn answer(&mut self, id: Value) -> Value {
        loop {
            match self.next().await {
                Next::Json(v) if v.get("id") == Some(&id) => return v,
                Next::Json(_) => continue,
                Next::Closed(c) => panic!("closed while waiting for answer {id}: {c:?}"),
            }
        }
    }
    pub(crate) async fn call(&mut self, id: Value, method: &str, params: Value) -> Value {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_text(msg.to_string()).await;
        self.answer(id).await
    }
    /// `createSession` of `channel` with the Copilot provider, as request
    /// `id`; it must succeed.
    pub(crate) async fn create_session(&mut self, id: Value, channel: &str) {
        let params = json!({"channel": channel, "provider": "copilot"});
        let created = self.call(id, "createSession", params).await;
        assert!(created.get("result").is_some(), "{created}");
    }
    pub(crate) async fn ping_ok(&mut self) -> bool {
        let a = self
            .call(
                json!("ping-check"),
                "ping",
                json!({"channel": "ahp-root://"}),
            )
            .await;
        a.get("result").is_some()
    }
}

/// The HTTP status of a WebSocket upgrade to `addr` carrying `Origin: origin`.
pub(crate) async fn upgrade_status(addr: std::net::SocketAddr, origin: &str) -> u16 {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut req = format!("ws://{addr}").into_client_request().unwrap();
    req.headers_mut().insert("origin", origin.parse().unwrap());
    match tokio_tungstenite::connect_async(req).await {
        Ok((_, resp)) => resp.status().as_u16(),
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => resp.status().as_u16(),
        Err(e) => panic!("upgrade failed: {e}"),
    }
}

/// The HTTP status of a WebSocket upgrade to `addr` carrying `?tkn=token`
/// (101 when it is let in).
pub(crate) async fn token_status(addr: std::net::SocketAddr, token: &str) -> u16 {
    match tokio_tungstenite::connect_async(format!("ws://{addr}/?tkn={token}")).await {
        Ok((_, resp)) => resp.status().as_u16(),
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => resp.status().as_u16(),
        Err(e) => panic!("upgrade failed: {e}"),
    }
}
