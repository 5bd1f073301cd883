//! A scripted OpenAI-compatible chat-completions server on loopback, for the
//! demo and the tests: it streams SSE chunks from a queue of scripted replies
//! (or, with none queued, [`unscripted_reply`]) and records every request, so
//! tests can assert what the model received.
//! Minimal HTTP/1.1 (one request per connection, `Connection: close`): the
//! runtime is its only client.
//!
//! Scripted conversations can be data: `super::conversation` parses the
//! files in `fixtures/model/`.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tracing::debug;

use super::fake_http::{read_request, respond, DemoRequest};
use super::scripted_reply::Reply;

#[derive(Default)]
struct ModelState {
    script: VecDeque<Reply>,
    requests: Vec<Value>,
    /// Streams the caller hung up on before their end (a cancelled turn).
    abandoned: usize,
}

#[derive(Clone)]
pub struct ScriptedModel {
    pub addr: SocketAddr,
    inner: Arc<Mutex<ModelState>>,
    arrived: Arc<Notify>,
}

pub const DEFAULT_REPLY: &str = "Hello from the scripted model.";

impl ScriptedModel {
    pub async fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let m = Self {
            addr: listener.local_addr()?,
            inner: Arc::default(),
            arrived: Arc::new(Notify::new()),
        };
        let me = m.clone();
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                let me = me.clone();
                tokio::spawn(async move {
                    if let Err(e) = me.serve(s).await {
                        debug!("scripted model connection: {e}");
                    }
                });
            }
        });
        Ok(m)
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ModelState> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn push(&self, r: Reply) {
        self.lock().script.push_back(r);
    }

    /// Queues `replies` in order (e.g. a conversation file's).
    pub fn push_all(&self, replies: impl IntoIterator<Item = Reply>) {
        self.lock().script.extend(replies);
    }

    /// Drops what is still scripted; returns how many replies were left.
    pub fn clear_script(&self) -> usize {
        let mut g = self.lock();
        let n = g.script.len();
        g.script.clear();
        n
    }

    /// Every chat-completions request body received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.lock().requests.clone()
    }

    /// How many streamed answers the caller stopped reading before the end.
    pub fn abandoned(&self) -> usize {
        self.lock().abandoned
    }

    /// Waits until at least `n` requests arrived, up to `deadline`.
    pub async fn wait_requests(&self, n: usize, deadline: Duration) -> Option<Vec<Value>> {
        tokio::time::timeout(deadline, async {
            loop {
                let notified = self.arrived.notified();
                let r = self.requests();
                if r.len() >= n {
                    return r;
                }
                notified.await;
            }
        })
        .await
        .ok()
    }

    /// The system prompt of a request.
    pub fn system_prompt(request: &Value) -> Option<String> {
        request["messages"]
            .as_array()?
            .iter()
            .find(|m| m["role"] == "system")
            .and_then(|m| m["content"].as_str().map(String::from))
    }

    /// One HTTP exchange: `/models`, or a chat completion answered with
    /// the next scripted reply (which is recorded with its request).
    async fn serve(&self, s: TcpStream) -> std::io::Result<()> {
        let mut r = BufReader::new(s);
        let DemoRequest {
            method, path, body, ..
        } = read_request(&mut r).await?;
        let mut s = r.into_inner();
        if let Some(answer) = copilot_route(&method, &path) {
            return respond(
                &mut s,
                200,
                "application/json",
                answer.to_string().as_bytes(),
            )
            .await;
        }
        if !(method == "POST" && path.ends_with("/chat/completions")) {
            return respond(&mut s, 404, "text/plain", b"not found").await;
        }
        let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let model = req["model"].as_str().unwrap_or("gpt-4.1").to_owned();
        let reply = {
            let mut g = self.lock();
            let reply = g
                .script
                .pop_front()
                .unwrap_or_else(|| unscripted_reply(&req));
            g.requests.push(req);
            reply
        };
        self.arrived.notify_waiters();
        debug!(?reply, "scripted model answers");
        self.answer(&mut s, &model, reply).await
    }

    /// Writes one scripted reply: an error status, or an SSE stream of
    /// text chunks (paced for `Slow`) or of one tool call.
    async fn answer(&self, s: &mut TcpStream, model: &str, reply: Reply) -> std::io::Result<()> {
        const SSE_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";
        let (chunks, delay) = match reply {
            Reply::Status(code) => {
                let body = json!({"error": {"message": format!("scripted failure {code}")}});
                return respond(s, code, "application/json", body.to_string().as_bytes()).await;
            }
            Reply::Text(t) => (split(&t), Duration::ZERO),
            Reply::Slow { chunks, delay } => (chunks, delay),
            Reply::ToolCall { name, arguments } => {
                let delta = json!({"role": "assistant", "tool_calls": [{"index": 0, "id": format!("call_{}", uuid::Uuid::new_v4().simple()), "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}]});
                s.write_all(SSE_HEAD).await?;
                sse(s, &chunk(model, delta, None)).await?;
                sse(s, &chunk(model, json!({}), Some("tool_calls"))).await?;
                return finish_stream(s, model).await;
            }
        };
        s.write_all(SSE_HEAD).await?;
        for (i, c) in chunks.iter().enumerate() {
            let mut delta = json!({"content": c});
            if i == 0 {
                delta["role"] = json!("assistant");
            }
            if let Err(e) = sse(s, &chunk(model, delta, None)).await {
                self.lock().abandoned += 1;
                return Err(e);
            }
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
        }
        sse(s, &chunk(model, json!({}), Some("stop"))).await?;
        finish_stream(s, model).await
    }
}

/// The routes other than a completion: the model list (an OpenAI
/// provider's `/v1/models`, or Copilot's `/models`, which wants each
/// model's capabilities), and the two calls with which the runtime's AHP
/// host picks its model (`/auto`: without an answer its turns hang).
fn copilot_route(method: &str, path: &str) -> Option<Value> {
    let path = path.split('?').next().unwrap_or_default();
    Some(match (method, path) {
        ("GET", p) if p.ends_with("/models") => json!({"object": "list", "data": [{
            "id": "gpt-4.1", "object": "model", "owned_by": "scripted", "name": "GPT-4.1",
            "capabilities": {"family": "gpt-4.1", "type": "chat",
                "limits": {"max_context_window_tokens": 128000, "max_output_tokens": 16384, "max_prompt_tokens": 128000},
                "supports": {"streaming": true, "tool_calls": true}}}]}),
        ("POST", "/auto") => {
            json!({"selected_model": {"id": "gpt-4.1"}, "session_token": "scripted-session"})
        }
        ("POST", "/models/session") => {
            json!({"selected_model": "gpt-4.1", "session_token": "scripted-session", "available_models": ["gpt-4.1"]})
        }
        _ => return None,
    })
}

/// The prompts the model understands when nothing is scripted (the demo).
pub(crate) const DEMO_HELP: &str = "say 'run: COMMAND' (the agent asks permission to run it), 'ask: QUESTION? A, B' (the agent asks you), or anything else (a greeting)";

/// What the model answers when nothing is scripted: a greeting, or, on
/// `run: ...` / `ask: ...`, a call of the runtime's shell or ask-user tool;
/// after a tool ran, its result, quoted.
pub(crate) fn unscripted_reply(request: &Value) -> Reply {
    let Some(last) = request["messages"].as_array().and_then(|m| m.last()) else {
        return Reply::Text(DEFAULT_REPLY.into());
    };
    if last["role"] == "tool" {
        let out: String = text_of(&last["content"]).chars().take(400).collect();
        return Reply::Text(format!("The tool said: {}", out.trim()));
    }
    // The runtime puts context (e.g. the time) before what the user typed.
    let said = text_of(&last["content"]);
    let said = said.lines().last().unwrap_or_default().trim();
    if let Some(command) = said.strip_prefix("run:") {
        return Reply::ToolCall {
            name: "bash".into(),
            arguments: json!({"command": command.trim(), "description": "Run the command the user gave"}),
        };
    }
    if let Some(ask) = said.strip_prefix("ask:") {
        let (question, choices) = match ask.split_once('?') {
            Some((q, c)) => (
                format!("{}?", q.trim()),
                c.split(',')
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .collect::<Vec<_>>(),
            ),
            None => (ask.trim().to_owned(), vec![]),
        };
        let mut arguments = json!({"question": question});
        if !choices.is_empty() {
            arguments["choices"] = json!(choices);
        }
        return Reply::ToolCall {
            name: "ask_user".into(),
            arguments,
        };
    }
    Reply::Text(DEFAULT_REPLY.into())
}

/// A message's text: a string, or the text parts of a list.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn split(t: &str) -> Vec<String> {
    let chars: Vec<char> = t.chars().collect();
    chars.chunks(8).map(|c| c.iter().collect()).collect()
}

fn chunk(model: &str, delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0, "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

async fn sse(s: &mut TcpStream, v: &Value) -> std::io::Result<()> {
    s.write_all(format!("data: {v}\n\n").as_bytes()).await?;
    s.flush().await
}

async fn finish_stream(s: &mut TcpStream, model: &str) -> std::io::Result<()> {
    let usage = json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}});
    sse(s, &usage).await?;
    s.write_all(b"data: [DONE]\n\n").await?;
    s.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Value {
        json!({"messages": [{"role": "system", "content": "sys"},
            {"role": "user", "content": format!("<current_datetime>now</current_datetime>\n\n{text}")}]})
    }

    #[test]
    fn unscripted_replies() {
        assert!(matches!(unscripted_reply(&user("hello")), Reply::Text(t) if t == DEFAULT_REPLY));
        match unscripted_reply(&user("run: ls -l")) {
            Reply::ToolCall { name, arguments } => {
                assert_eq!(name, "bash");
                assert_eq!(arguments["command"], "ls -l");
            }
            other => panic!("{other:?}"),
        }
        match unscripted_reply(&user("ask: Which colour? red, blue")) {
            Reply::ToolCall { name, arguments } => {
                assert_eq!(name, "ask_user");
                assert_eq!(
                    arguments,
                    json!({"question": "Which colour?", "choices": ["red", "blue"]})
                );
            }
            other => panic!("{other:?}"),
        }
        match unscripted_reply(&user("ask: your name")) {
            Reply::ToolCall { arguments, .. } => {
                assert_eq!(arguments, json!({"question": "your name"}))
            }
            other => panic!("{other:?}"),
        }
        let after_tool =
            json!({"messages": [{"role": "tool", "content": [{"type": "text", "text": "42\n"}]}]});
        assert!(
            matches!(unscripted_reply(&after_tool), Reply::Text(t) if t == "The tool said: 42")
        );
        assert!(matches!(unscripted_reply(&Value::Null), Reply::Text(_)));
    }
}
