//! What the fuzzer sends: valid client actions on a session or its chat,
//! mutated variants of them (a field deleted or given another type, a
//! string made oversized, an unknown type, deep nesting, the envelope
//! itself bent), odd requests, frames that are no JSON-RPC at all, and the
//! answers its clients give to the bridge's transform requests. Drawn from
//! a small seeded generator, so a run can be repeated.

use serde_json::{json, Value};

/// xorshift64*: enough randomness for a fuzzer, and no dependency.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    pub(crate) fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

/// The sections a fuzz client opts in to transform.
pub(crate) const SECTIONS: [&str; 2] = ["tone", "guidelines"];

/// An active-client entry for `client_id`, opted in to [`SECTIONS`].
pub(crate) fn active_client(client_id: &str) -> Value {
    json!({"clientId": client_id, "tools": [], "systemMessageTransform": {"sections": SECTIONS}})
}

fn message(text: String) -> Value {
    json!({"text": text, "origin": {"kind": "user"}})
}

fn prompt(n: u64) -> String {
    format!(
        "Fuzz {n}: {}",
        "remember the quiet harbour at dawn. ".repeat(5)
    )
}

/// A valid action, the `n`th of client `who`: (for the chat rather than
/// the session, the action).
pub(crate) fn valid(rng: &mut Rng, who: &str, n: u64) -> (bool, Value) {
    let now = jiff::Timestamp::now().to_string();
    let queued = |i: u64| format!("q{}", i % 4);
    match rng.below(13) {
        0 => (
            true,
            json!({"type": "chat/turnStarted", "turnId": format!("{who}-{n}"),
                   "startedAt": now, "message": message(prompt(n))}),
        ),
        1 => (
            true,
            json!({"type": "chat/draftChanged", "draft": message(format!("draft {n}"))}),
        ),
        2 => (
            false,
            json!({"type": "session/workingDirectorySet",
                   "directory": format!("file:///tmp/fuzz/{}", rng.below(1 << 20))}),
        ),
        3 => {
            let model = rng.pick(&["gpt-5", "claude-sonnet-4.5", "bench-model"]);
            (
                false,
                json!({"type": "session/configChanged", "config": {"model": model}}),
            )
        }
        4 => (
            true,
            json!({"type": "chat/pendingMessageSet", "kind": "queued", "id": queued(n),
                   "message": message(format!("later {n}"))}),
        ),
        5 => (
            true,
            json!({"type": "chat/pendingMessageSet", "kind": "steering", "id": format!("s{}", n % 2),
                   "message": message(format!("steer {n}"))}),
        ),
        6 => (
            true,
            json!({"type": "chat/pendingMessageRemoved", "kind": "queued", "id": queued(n)}),
        ),
        7 => (
            true,
            json!({"type": "chat/queuedMessagesReordered", "order": ["q3", "q1", "q0", "q2"]}),
        ),
        8 if rng.chance(50) => (true, json!({"type": "chat/truncated"})),
        8 => (
            true,
            json!({"type": "chat/truncated", "turnId": format!("{who}-{}", n / 2)}),
        ),
        9 => (
            false,
            json!({"type": "session/activeClientSet", "activeClient": active_client(who)}),
        ),
        10 => (
            false,
            json!({"type": "session/activeClientRemoved", "clientId": who}),
        ),
        11 => (
            false,
            json!({"type": "session/titleChanged", "title": format!("fuzz {n}")}),
        ),
        _ => (
            true,
            json!({"type": "chat/isReadChanged", "isRead": rng.chance(50)}),
        ),
    }
}

/// Every JSON pointer into `v` (not `v` itself).
fn pointers(v: &Value, at: &str, out: &mut Vec<String>) {
    let children: Vec<(String, &Value)> = match v {
        Value::Object(o) => o
            .iter()
            .map(|(k, c)| (k.replace('~', "~0").replace('/', "~1"), c))
            .collect(),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, c)| (i.to_string(), c))
            .collect(),
        _ => return,
    };
    for (k, c) in children {
        let p = format!("{at}/{k}");
        out.push(p.clone());
        pointers(c, &p, out);
    }
}

/// A value of another type than most fields have.
fn odd_value(rng: &mut Rng) -> Value {
    rng.pick(&[
        json!(42),
        json!(-1.5e308),
        json!(u64::MAX),
        json!("x"),
        json!(""),
        json!(null),
        json!(true),
        json!([]),
        json!({}),
        json!([{"type": "chat/turnStarted"}]),
        json!({"text": 7, "origin": "user"}),
    ])
    .clone()
}

/// Arrays nested `depth` deep (the bridge allows 128 levels; built, as
/// serde_json's parser stops at 128).
fn nested(depth: usize) -> Value {
    (0..depth).fold(json!([]), |v, _| json!([v]))
}

/// `v` mutated once, anywhere in it.
pub(crate) fn mutate(rng: &mut Rng, mut v: Value, n: u64) -> Value {
    let mut ptrs = Vec::new();
    pointers(&v, "", &mut ptrs);
    let at = if ptrs.is_empty() {
        String::new()
    } else {
        rng.pick(&ptrs).clone()
    };
    match rng.below(8) {
        // A field deleted.
        0 if !at.is_empty() => {
            let (parent, key) = at.rsplit_once('/').unwrap();
            match v.pointer_mut(parent) {
                Some(Value::Object(o)) => {
                    o.remove(&key.replace("~1", "/").replace("~0", "~"));
                }
                Some(Value::Array(a)) => {
                    if let Ok(i) = key.parse::<usize>() {
                        if i < a.len() {
                            a.remove(i);
                        }
                    }
                }
                _ => {}
            }
        }
        // A field of another type.
        1 | 2 => {
            if let Some(slot) = v.pointer_mut(&at) {
                *slot = odd_value(rng);
            }
        }
        // An oversized string: under the action limit (256 KiB), over it,
        // or over the frame limit (4 MiB), rarely.
        3 => {
            let len = match rng.below(20) {
                0 => 5 << 20,
                1..=9 => 200 << 10,
                _ => 300 << 10,
            };
            if let Some(slot) = v.pointer_mut(&at) {
                *slot = json!("x".repeat(len));
            }
        }
        // An unknown type, or one only the host may send.
        4 => {
            let ty = rng.pick(&[
                "chat/noSuchAction",
                "session/noSuchAction",
                "x-fuzz/thing",
                "",
                "chat/turnComplete",
                "chat/delta",
                "session/ready",
                "root/agentsChanged",
            ]);
            if let Some(o) = v.as_object_mut() {
                o.insert("type".into(), json!(ty));
            }
        }
        // Deep nesting, just under the bridge's limit or (rarely: the
        // bridge closes the connection) past it.
        5 => {
            let depth = if rng.chance(10) { 200 } else { 120 };
            if let Some(slot) = v.pointer_mut(&at) {
                *slot = nested(depth);
            }
        }
        // Unknown fields, a fresh name each time.
        6 => {
            if let Some(o) = v.as_object_mut() {
                o.insert(format!("zz{n}"), json!("x".repeat(rng.below(4096))));
                o.insert("_meta".into(), json!({format!("k{n}"): n}));
            }
        }
        // Not an object at all.
        _ => {
            v = rng
                .pick(&[
                    json!("chat/turnStarted"),
                    json!([v.clone()]),
                    json!(null),
                    json!(7),
                ])
                .clone()
        }
    }
    v
}

/// The session a mutated `createSession` of [`request`]'s may have made:
/// the fuzzer counts it as held, so it is disposed in its turn.
pub(crate) fn odd_session(n: u64) -> String {
    format!("ahp-session:/odd-{n}")
}

/// A request: valid, refused, or odd (method, params).
pub(crate) fn request(rng: &mut Rng, chat: &str, n: u64) -> (String, Value) {
    let (m, p) = match rng.below(10) {
        0 => ("listSessions", json!({})),
        1 => ("fetchTurns", json!({"channel": chat})),
        2 => (
            "fetchTurns",
            json!({"channel": chat, "cursor": format!("bogus-{n}")}),
        ),
        3 => (
            "subscribe",
            json!({"channel": format!("ahp-session:/no-such-{n}")}),
        ),
        4 => (
            "disposeSession",
            json!({"channel": format!("ahp-session:/no-such-{n}")}),
        ),
        5 => (
            "initialize",
            json!({"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": "again"}),
        ),
        6 => ("ping", json!({"channel": "ahp-root://"})),
        7 => (
            "createSession",
            mutate(
                rng,
                json!({"channel": odd_session(n), "provider": "copilot"}),
                n,
            ),
        ),
        8 => ("subscribe", mutate(rng, json!({"channel": chat}), n)),
        _ => return (format!("noSuchMethod{}", n % 7), json!({"channel": chat})),
    };
    (m.to_owned(), p)
}

/// A frame that is no JSON-RPC request: text, or binary when `.1`.
pub(crate) fn garbage(rng: &mut Rng, n: u64) -> (Vec<u8>, bool) {
    let text = match rng.below(11) {
        0 => "{\"jsonrpc\": \"2.0\", \"method\": \"dispatchAction\", \"params\": {".to_owned(),
        1 => format!("not json at all {n}"),
        2 => "[]".to_owned(),
        3 => "[1, 2, {\"jsonrpc\": \"2.0\", \"method\": \"ping\", \"id\": 1}]".to_owned(),
        4 => json!({"jsonrpc": "1.0", "id": n, "method": "ping"}).to_string(),
        5 => json!({"jsonrpc": "2.0", "id": n, "result": {}}).to_string(),
        6 => format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)),
        7 => "null".to_owned(),
        8 => json!({"jsonrpc": "2.0", "method": 7, "params": []}).to_string(),
        9 => {
            let bytes: Vec<u8> = (0..rng.below(512)).map(|_| rng.next() as u8).collect();
            return (bytes, true);
        }
        _ => {
            let bytes: Vec<u8> = (0..rng.below(512)).map(|_| rng.next() as u8).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        }
    };
    (text.into_bytes(), false)
}

/// The answer to a transform request, the `k`th: mostly every section
/// asked with a line added; now and then an error, or an answer mutated.
pub(crate) fn transform_answer(
    params: &Value,
    k: u64,
) -> Result<Value, ahp_types::messages::JsonRpcError> {
    let mut out = serde_json::Map::new();
    if let Some(sections) = params["sections"].as_object() {
        for (id, s) in sections {
            let text = s["content"].as_str().unwrap_or_default();
            out.insert(
                id.clone(),
                json!({"content": format!("{text}\n(fuzz {k})")}),
            );
        }
    }
    let answer = json!({"sections": out});
    let mut rng = Rng::new(k.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    match k % 10 {
        0 => Err(ahp_types::messages::JsonRpcError {
            code: -32000,
            message: format!("fuzz refuses {k}"),
            data: None,
        }),
        1 => Ok(mutate(&mut rng, answer, k)),
        _ => Ok(answer),
    }
}
