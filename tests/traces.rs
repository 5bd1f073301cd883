//! Traces end to end: the REAL runtime runs a turn with a transform and a
//! tool call that needs permission; the bridge exports its spans over
//! OTLP/HTTP to a collector here, which decodes them with the official
//! OpenTelemetry proto definitions (`opentelemetry-proto`). One test in this
//! file: the trace layer is process-global.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;

use ahp_bridge_join::config::{Config, LogConfig, TelemetryConfig};
use ahp_bridge_join::telemetry::{build_traces, init_logs};
use ahp_types::actions::StateAction;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, Span};
use prost::Message;
use serde_json::{json, Value};
use support::e2e::*;
use support::*;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";
/// Never to appear in a span: the prompt's text.
const PROMPT: &str = "run it PROMPT-NEVER-EXPORTED";

/// A collector on loopback: every `POST /v1/traces` decoded, then answered 200.
struct Collector {
    url: String,
    received: mpsc::Receiver<ResourceSpans>,
}

impl Collector {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, received) = mpsc::channel();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                receive(conn, &tx);
            }
        });
        Self { url, received }
    }

    /// Every span received so far, with its resource's `service.name`.
    fn spans(&self) -> Vec<(String, Span)> {
        self.received
            .try_iter()
            .flat_map(|rs| {
                let service = rs
                    .resource
                    .iter()
                    .flat_map(|r| &r.attributes)
                    .find(|a| a.key == "service.name")
                    .and_then(|a| string(a.value.as_ref()?.value.as_ref()?))
                    .unwrap_or_default();
                rs.scope_spans
                    .into_iter()
                    .flat_map(|ss| ss.spans)
                    .map(move |s| (service.clone(), s))
            })
            .collect()
    }
}

/// One export request: checked to be OTLP/HTTP protobuf, decoded, handed
/// to the test, then answered: the exporter's flush returns on the answer,
/// so the spans must be in the channel before it (answering first let the
/// test read an empty channel).
fn receive(conn: TcpStream, tx: &mpsc::Sender<ResourceSpans>) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if line == "\r\n" {
            break;
        }
        head.push(line.trim_end().to_lowercase());
    }
    assert_eq!(head[0], "post /v1/traces http/1.1", "{head:?}");
    assert!(
        head.contains(&"content-type: application/x-protobuf".to_string()),
        "{head:?}"
    );
    let length: usize = head
        .iter()
        .find_map(|h| h.strip_prefix("content-length: "))
        .expect("a Content-Length")
        .parse()
        .unwrap();
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let request = ExportTraceServiceRequest::decode(&body[..]).expect("OTLP protobuf");
    for rs in request.resource_spans {
        let _ = tx.send(rs);
    }
    let mut conn = conn;
    let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
}

fn string(v: &Any) -> Option<String> {
    match v {
        Any::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a Any> {
    span.attributes
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| a.value.as_ref()?.value.as_ref())
}

fn text(span: &Span, key: &str) -> String {
    attr(span, key)
        .and_then(string)
        .unwrap_or_else(|| panic!("{}: no string {key}: {:?}", span.name, span.attributes))
}

fn int(span: &Span, key: &str) -> i64 {
    match attr(span, key) {
        Some(Any::IntValue(i)) => *i,
        other => panic!("{}: no int {key}: {other:?}", span.name),
    }
}

/// The one span `pick` accepts.
fn only<'a>(spans: &'a [Span], what: &str, pick: impl Fn(&Span) -> bool) -> &'a Span {
    let found: Vec<&Span> = spans.iter().filter(|s| pick(s)).collect();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(found.len(), 1, "exactly one {what} span among {names:?}");
    found[0]
}

fn answer_transforms(c: &ahp::Client) {
    c.set_server_request_handler(|method, params: Value| async move {
        assert_eq!(method, "systemMessageTransform");
        Ok(append_to_each(&params, |_| "REWRITTEN".to_owned()))
    });
}

/// Runs a turn started with the client's `traceparent` whose shell call
/// the client approves, to its end.
async fn traced_turn(st: &Stack) {
    let c = initialized(&st.bridge, "ide").await;
    answer_transforms(&c);
    let opt_in =
        json!({"clientId": "ide", "tools": [], "systemMessageTransform": {"sections": ["tone"]}});
    ready_session(&c, "ahp-session:/traced", Some(opt_in)).await;
    fixtures::script(&st.model, "shell-permission");
    let chat = chat_of("ahp-session:/traced");
    let (_, mut sub) = c.subscribe(chat.clone()).await.unwrap();
    let started = json!({"type": "chat/turnStarted", "turnId": "t1", "startedAt": jiff::Timestamp::now().to_string(),
        "message": {"text": PROMPT, "origin": {"kind": "user"}}});
    let traceparent = format!("00-{TRACE_ID}-{PARENT_ID}-01");
    dispatch_raw_with_meta(&c, &chat, 1, started, json!({"traceparent": traceparent})).await;
    let call = wait_action(&mut sub, |a| match a {
        StateAction::ChatToolCallReady(r) if r.confirmed.is_none() => Some(r.tool_call_id.clone()),
        _ => None,
    })
    .await;
    let approve = json!({"type": "chat/toolCallConfirmed", "turnId": "t1", "toolCallId": call, "approved": true});
    dispatch_raw(&c, &chat, 2, approve).await;
    let end = wait_turn_end(&mut sub, "t1").await;
    assert_eq!(end.kind, "complete", "{end:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_is_one_span_under_the_clients_traceparent_with_its_transform_and_tool_call() {
    let collector = Collector::start();
    let telemetry = TelemetryConfig {
        otlp_endpoint: Some(collector.url.clone()),
        // Only a sampled parent gets a turn traced: the client's decision holds.
        sample_ratio: 0.0,
        ..TelemetryConfig::default()
    };
    let (layer, exporter) = build_traces(&telemetry).unwrap().expect("an exporter");
    let log = LogConfig {
        level: "off".into(),
        ..LogConfig::default()
    };
    init_logs(&log, Some(layer));
    let st = start_stack(|_| {}).await;
    traced_turn(&st).await;
    // The turn's spans ended before its end reached the client; send them now.
    assert!(tokio::task::block_in_place(|| exporter.force_flush()));
    let received = collector.spans();
    assert!(received
        .iter()
        .all(|(service, _)| service == "ahp-copilot-bridge"));
    let spans: Vec<Span> = received.into_iter().map(|(_, s)| s).collect();
    for s in &spans {
        let mut keys: Vec<&str> = s.attributes.iter().map(|a| a.key.as_str()).collect();
        keys.sort_unstable();
        let all = keys.len();
        keys.dedup();
        assert_eq!(keys.len(), all, "{}: an attribute twice: {keys:?}", s.name);
        let shown = format!("{s:?}");
        assert!(
            !shown.contains("PROMPT-NEVER"),
            "the prompt in a span: {shown}"
        );
        assert!(!shown.contains("40+2"), "a tool's input in a span: {shown}");
    }

    let turn = only(&spans, "turn", |s| {
        attr(s, "gen_ai.operation.name").and_then(string).as_deref() == Some("chat")
    });
    assert_eq!(hex::encode(&turn.trace_id), TRACE_ID, "the client's trace");
    assert_eq!(
        hex::encode(&turn.parent_span_id),
        PARENT_ID,
        "the client's span is its parent"
    );
    let model = Config::default().runtime.model;
    assert_eq!(turn.name, format!("chat {model}"));
    assert_eq!(text(turn, "gen_ai.request.model"), model);
    // The scripted model counts 100 in and 10 out per call; the turn made two.
    assert_eq!(int(turn, "gen_ai.usage.input_tokens"), 200);
    assert_eq!(int(turn, "gen_ai.usage.output_tokens"), 20);
    assert_eq!(text(turn, "gen_ai.response.model"), model);
    assert_eq!(text(turn, "ahp.session"), "ahp-session:/traced");
    assert_eq!(text(turn, "ahp.principal"), "local");
    assert_eq!(text(turn, "ahp.turn.outcome"), "completed");

    let child_of_turn = |s: &Span| s.trace_id == turn.trace_id && s.parent_span_id == turn.span_id;
    let transform = only(&spans, "transform", |s| s.name == "systemMessageTransform");
    assert!(
        child_of_turn(transform),
        "the transform is the turn's child"
    );
    assert_eq!(text(transform, "ahp.transform.owner"), "ide");
    assert_eq!(text(transform, "ahp.transform.sections"), "tone");
    assert_eq!(text(transform, "ahp.transform.outcome"), "transformed");

    let tool = only(&spans, "tool call", |s| {
        attr(s, "gen_ai.operation.name").and_then(string).as_deref() == Some("execute_tool")
    });
    assert!(child_of_turn(tool), "the tool call is the turn's child");
    assert_eq!(text(tool, "gen_ai.tool.name"), "bash");
    assert_eq!(text(tool, "ahp.tool.outcome"), "success");

    let permission = only(&spans, "permission", |s| s.name == "permission");
    assert!(
        child_of_turn(permission),
        "the permission is the turn's child"
    );
    assert_eq!(text(permission, "ahp.permission.outcome"), "approved");
    assert_eq!(
        text(permission, "gen_ai.tool.call.id"),
        text(tool, "gen_ai.tool.call.id")
    );
    tokio::task::block_in_place(|| exporter.shutdown());
}
