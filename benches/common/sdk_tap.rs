//! A tap between the SDK app and what it connects to: bytes forwarded both
//! ways as they come (Nagle off), frames read on the side to time each
//! `systemMessage.transform` from the request passing toward the app to
//! its answer passing back: the app's leg of a callback, as seen just
//! outside the app.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ahp_bridge_join::runtime::ContentLengthCodec;
use bytes::BytesMut;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::Decoder;

/// The app's legs measured so far.
pub(crate) type Legs = Arc<Mutex<Vec<Duration>>>;

/// Listens on loopback and taps each connection to `to`; its address and
/// the legs it measures.
pub(crate) async fn start(to: String) -> (String, Legs) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = listener.local_addr().unwrap().to_string();
    let legs: Legs = Arc::default();
    let l = legs.clone();
    tokio::spawn(async move {
        while let Ok((app, _)) = listener.accept().await {
            let up = TcpStream::connect(&to).await.unwrap();
            let _ = (app.set_nodelay(true), up.set_nodelay(true));
            let asked: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
            let (ar, aw) = app.into_split();
            let (ur, uw) = up.into_split();
            tokio::spawn(pump(ur, aw, asked.clone(), l.clone(), true));
            tokio::spawn(pump(ar, uw, asked, l.clone(), false));
        }
    });
    (at, legs)
}

/// Forwards one direction; `toward_app`: notes the transform requests,
/// else times their answers.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    asked: Arc<Mutex<HashMap<String, Instant>>>,
    legs: Legs,
    toward_app: bool,
) {
    let mut buf = vec![0u8; 64 * 1024];
    // The bridge's own framing: frames as the runtime and the apps send them.
    let mut frames = ContentLengthCodec::new(usize::MAX);
    let mut pending = BytesMut::new();
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let now = Instant::now();
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
        pending.extend_from_slice(&buf[..n]);
        while let Ok(Some(frame)) = frames.decode(&mut pending) {
            let Ok(v) = serde_json::from_slice::<Value>(&frame) else {
                continue;
            };
            let id = v["id"].to_string();
            if toward_app && v["method"] == "systemMessage.transform" {
                asked.lock().unwrap().insert(id, now);
            } else if !toward_app && v.get("method").is_none() {
                if let Some(t0) = asked.lock().unwrap().remove(&id) {
                    legs.lock().unwrap().push(now - t0);
                }
            }
        }
    }
}
