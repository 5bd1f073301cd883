use std::sync::mpsc;
use std::sync::Mutex;

use opentelemetry::trace::{Span as _, Tracer as _};

use super::*;

#[test]
fn nothing_is_built_without_an_endpoint() {
    let off = TelemetryConfig::default();
    assert!(build_traces(&off).unwrap().is_none());
}

#[test]
fn a_collector_answer_is_read_up_to_its_length() {
    let r = parse_answer(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokjunk").unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(&r.body()[..], b"ok");
    let r = parse_answer(b"HTTP/1.1 503 Busy\r\n\r\n").unwrap();
    assert_eq!(r.status(), 503);
    assert!(parse_answer(b"HTTP/1.1 200 OK\r\nContent-").is_err());
}

#[test]
fn a_remote_parent_must_be_a_valid_traceparent() {
    // Without a trace layer nothing can be parented, valid or not.
    let span = tracing::info_span!("t");
    assert!(!set_remote_parent(&span, "not-a-traceparent"));
    assert!(!set_remote_parent(
        &span,
        "00-00000000000000000000000000000000-0000000000000000-01"
    ));
}

/// An exporter that takes its first batch and holds it until released.
#[derive(Debug)]
struct Held {
    entered: Mutex<mpsc::Sender<()>>,
    release: Mutex<mpsc::Receiver<()>>,
    exported: Arc<AtomicUsize>,
}

impl SpanExporter for Held {
    fn export(
        &self,
        batch: Vec<SpanData>,
    ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        let _ = self.entered.lock().unwrap().send(());
        // Blocks until the sender is dropped (then never again).
        let _ = self.release.lock().unwrap().recv();
        self.exported.fetch_add(batch.len(), Ordering::SeqCst);
        async { Ok(()) }
    }
}

fn dropped_so_far() -> u64 {
    let text = crate::metrics().encode(false);
    text.lines()
        .find_map(|l| l.strip_prefix("ahp_bridge_trace_spans_dropped_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(0.0) as u64
}

#[test]
fn a_full_queue_drops_spans_and_counts_each() {
    let (entered_tx, entered) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let exported = Arc::new(AtomicUsize::new(0));
    let exporter = Held {
        entered: Mutex::new(entered_tx),
        release: Mutex::new(release_rx),
        exported: exported.clone(),
    };
    let provider = SdkTracerProvider::builder()
        .with_span_processor(gated(exporter, 4, Duration::from_secs(3600)))
        .build();
    let tracer = provider.tracer("test");
    let end_spans = |n: usize| (0..n).for_each(|_| tracer.start("s").end());
    let before = dropped_so_far();
    // A full batch goes to the exporter, which holds it: the queue is empty again.
    end_spans(4);
    entered
        .recv_timeout(Duration::from_secs(20))
        .expect("the exporter took the first batch");
    // Four fit in the queue; the other twelve are dropped, each counted.
    end_spans(16);
    assert_eq!(dropped_so_far() - before, 12);
    drop(release);
    provider.shutdown().unwrap();
    assert_eq!(
        exported.load(Ordering::SeqCst),
        8,
        "every span let in is exported"
    );
}
