//! A loopback fake of the parts of GitHub's API the runtime's AHP host
//! asks while it authenticates the bridge and opens sessions: `/user`
//! (who the token is), `/copilot_internal/user` (where Copilot's API is:
//! the scripted model) and `/copilot_internal/managed_settings`. A token it
//! does not know gets 401, as GitHub answers. It records the tokens it was
//! shown, so a test can check which identity reached GitHub.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::BufReader;
use tokio::net::{TcpListener, TcpStream};
use tracing::debug;

use super::fake_http::{read_request, respond, DemoRequest};

/// The login the fake answers for its token.
pub(crate) const LOGIN: &str = "octo-bridge";

#[derive(Clone)]
pub struct GitHubFake {
    pub addr: SocketAddr,
    token: Arc<str>,
    /// Where `endpoints.api` points: Copilot's API (the scripted model).
    copilot_api: Arc<str>,
    seen: Arc<Mutex<Vec<String>>>,
}

impl GitHubFake {
    /// Serves on a free loopback port, knowing one `token`.
    pub async fn start(token: &str, copilot_api: &str) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let fake = Self {
            addr: listener.local_addr()?,
            token: token.into(),
            copilot_api: copilot_api.into(),
            seen: Arc::default(),
        };
        let me = fake.clone();
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                let me = me.clone();
                tokio::spawn(async move {
                    if let Err(e) = me.serve(s).await {
                        debug!("github fake connection: {e}");
                    }
                });
            }
        });
        Ok(fake)
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every `Authorization` value it was sent, in order.
    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    async fn serve(&self, s: TcpStream) -> std::io::Result<()> {
        let mut r = BufReader::new(s);
        let DemoRequest {
            method,
            path,
            authorization,
            ..
        } = read_request(&mut r).await?;
        let mut s = r.into_inner();
        let given = authorization.unwrap_or_default();
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(given.clone());
        let token = given.split_once(' ').map_or(given.as_str(), |(_, t)| t);
        let (code, body) = if token != &*self.token {
            (401, json!({"message": "Bad credentials"}))
        } else {
            match self.answer(&method, path.split('?').next().unwrap_or_default()) {
                Some(body) => (200, body),
                None => (404, json!({"message": "Not Found"})),
            }
        };
        debug!(%method, %path, code, "github fake");
        respond(
            &mut s,
            code,
            "application/json",
            body.to_string().as_bytes(),
        )
        .await
    }

    fn answer(&self, method: &str, path: &str) -> Option<Value> {
        let api = &*self.copilot_api;
        Some(match (method, path) {
            ("GET", "/user") => json!({"login": LOGIN, "id": 1, "type": "User"}),
            ("GET", "/copilot_internal/user") => json!({
                "login": LOGIN, "copilot_plan": "individual", "chat_enabled": true,
                "endpoints": {"api": api, "proxy": api, "telemetry": api}}),
            ("GET", "/copilot_internal/managed_settings") => json!({}),
            _ => return None,
        })
    }
}
