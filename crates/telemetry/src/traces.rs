//! Traces: the bridge's spans (every crate of it), exported over OTLP/HTTP (protobuf) to
//! `[telemetry] otlp_endpoint`'s `/v1/traces`. Nothing is built while the key
//! is unset. Export never blocks a turn: a span that ends goes into a
//! bounded queue ([`QUEUE`] spans), exported in batches from the SDK's own
//! thread; a span that finds the queue full is dropped and counted in
//! `ahp_bridge_trace_spans_dropped_total`. The spans themselves are made
//! where their things happen (`bridge/turn_trace.rs`, the router); this file
//! only carries them out of the process.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry::Context;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracerProvider, Span, SpanData,
    SpanExporter, SpanProcessor,
};
use opentelemetry_sdk::Resource;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::Layer;

use super::logs::ExtraLayer;
use ahp_bridge_base::config::TelemetryConfig;

/// Spans waiting for export, at most.
pub(crate) const QUEUE: usize = 2048;
/// Spans per export request, at most.
const BATCH: usize = 512;
/// How long a span waits for its batch to fill before it is sent anyway.
const DELAY: Duration = Duration::from_secs(5);
/// One export request: connect, send, answer.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of a collector's answer that is read.
const MAX_ANSWER: u64 = 64 * 1024;

/// The exporter of a running process: flush it before the process ends.
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Traces {
    /// Exports every span ended so far (blocking; not from an async worker).
    pub fn force_flush(&self) -> bool {
        self.provider.force_flush().is_ok()
    }

    /// Exports what is queued and stops the exporter (blocking).
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!("trace export at shutdown: {e}");
        }
    }
}

/// The layer that turns the bridge's spans (every crate of it) into OpenTelemetry spans, and
/// the exporter behind it; `None` when `otlp_endpoint` is unset.
pub fn build_traces(
    cfg: &TelemetryConfig,
) -> Result<Option<(ExtraLayer, Traces)>, opentelemetry_otlp::ExporterBuildError> {
    let Some(url) = cfg.traces_url() else {
        return Ok(None);
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(OtlpPost {
            timeout: EXPORT_TIMEOUT,
        })
        .with_endpoint(url)
        .with_protocol(Protocol::HttpBinary)
        .with_timeout(EXPORT_TIMEOUT)
        .build()?;
    let provider = SdkTracerProvider::builder()
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            cfg.sample_ratio,
        ))))
        .with_span_processor(gated(exporter, QUEUE, DELAY))
        .with_resource(
            Resource::builder()
                .with_service_name(cfg.service_name.clone())
                .build(),
        )
        .build();
    let layer = layer(&provider);
    Ok(Some((layer, Traces { provider })))
}

/// The bridge's own spans only (never a dependency's, never a log event):
/// those of its crates, the binary's (`ahp_copilot_bridge`) and the
/// workspace's layers (`ahp_bridge_*`).
fn layer(provider: &SdkTracerProvider) -> ExtraLayer {
    let tracer = provider.tracer("ahp-copilot-bridge");
    tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false)
        .with_filter(filter_fn(|m| {
            m.is_span()
                && (m.target().starts_with("ahp_copilot_bridge")
                    || m.target().starts_with("ahp_bridge_"))
        }))
        .boxed()
}

/// The batch processor behind the gate that bounds its queue at `max`.
fn gated<E: SpanExporter + 'static>(exporter: E, max: usize, delay: Duration) -> Gate {
    let queued = Arc::new(AtomicUsize::new(0));
    let exporter = Dequeue {
        inner: exporter,
        queued: queued.clone(),
    };
    let config = BatchConfigBuilder::default()
        .with_max_queue_size(max)
        .with_max_export_batch_size(BATCH.min(max))
        .with_scheduled_delay(delay)
        .build();
    let inner = BatchSpanProcessor::builder(exporter)
        .with_batch_config(config)
        .build();
    Gate { inner, queued, max }
}

/// Makes `span` (not yet started) the child of a client's W3C
/// `traceparent`; false when it is not a valid one, or no trace layer is
/// installed.
pub fn set_remote_parent(span: &tracing::Span, traceparent: &str) -> bool {
    let carrier = HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
    let cx: Context = TraceContextPropagator::new().extract(&carrier);
    if !cx.span().span_context().is_valid() {
        return false;
    }
    span.set_parent(cx).is_ok()
}

/// Counts the spans between the gate and the exporter: one more for each
/// span let through, fewer by a batch when it is handed to the exporter.
/// Never above `max`, so the batch processor's own queue (of `max`) never
/// fills and every drop happens, and is counted, here.
#[derive(Debug)]
struct Gate {
    inner: BatchSpanProcessor,
    queued: Arc<AtomicUsize>,
    max: usize,
}

impl SpanProcessor for Gate {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        let room = |q: usize| (q < self.max).then_some(q + 1);
        if self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, room)
            .is_err()
        {
            super::metrics().trace_spans_dropped(1);
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The exporter, telling the gate when spans leave the queue.
#[derive(Debug)]
struct Dequeue<E> {
    inner: E,
    queued: Arc<AtomicUsize>,
}

impl<E: SpanExporter> SpanExporter for Dequeue<E> {
    fn export(
        &self,
        batch: Vec<SpanData>,
    ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        self.queued.fetch_sub(batch.len(), Ordering::AcqRel);
        self.inner.export(batch)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// A plain HTTP/1.1 POST, one connection per request, blocking: it runs on
/// the batch processor's own thread, never on an async worker.
#[derive(Debug)]
struct OtlpPost {
    timeout: Duration,
}

#[async_trait::async_trait]
impl HttpClient for OtlpPost {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        post(&request, self.timeout)
    }
}

fn post(request: &Request<Bytes>, timeout: Duration) -> Result<Response<Bytes>, HttpError> {
    let uri = request.uri();
    if uri.scheme_str() != Some("http") {
        return Err(format!("not an http:// URL: {uri}").into());
    }
    let host = uri.host().ok_or("no host")?;
    let port = uri.port_u16().unwrap_or(80);
    let mut stream = connect(host.trim_matches(['[', ']']), port, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let authority = uri.authority().map_or(host, |a| a.as_str());
    let mut head = format!("POST {path} HTTP/1.1\r\nHost: {authority}\r\n");
    for (name, value) in request.headers() {
        if let Ok(v) = value.to_str() {
            head.push_str(&format!("{name}: {v}\r\n"));
        }
    }
    let body = request.body();
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()?;
    let mut answer = Vec::new();
    stream.take(MAX_ANSWER).read_to_end(&mut answer)?;
    parse_answer(&answer)
}

fn connect(host: &str, port: u16, timeout: Duration) -> std::io::Result<TcpStream> {
    let mut last = None;
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other(format!("{host} has no address"))))
}

/// The collector's status and body (up to its `Content-Length`).
fn parse_answer(answer: &[u8]) -> Result<Response<Bytes>, HttpError> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut parsed = httparse::Response::new(&mut headers);
    let httparse::Status::Complete(at) = parsed.parse(answer)? else {
        return Err("the collector's answer ended early".into());
    };
    let code = parsed.code.ok_or("no status")?;
    let length = parsed
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse().ok());
    let body = &answer[at..];
    let body = &body[..length.unwrap_or(body.len()).min(body.len())];
    Ok(Response::builder()
        .status(code)
        .body(Bytes::copy_from_slice(body))?)
}

#[cfg(test)]
#[path = "traces_tests.rs"]
mod tests;
