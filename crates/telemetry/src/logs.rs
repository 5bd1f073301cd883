//! The log: `[log] format` (text or JSON, one event per line, to stderr)
//! and `[log] level`, which the environment variable `AHP_BRIDGE_LOG`
//! overrides. JSON lines carry `timestamp` (RFC 3339, UTC), `level`,
//! `target`, `message` and the event's fields at the top level.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use ahp_bridge_base::config::{LogConfig, LogFormat};

/// A layer added beside the log (the trace exporter).
pub(crate) type ExtraLayer = Box<dyn Layer<Registry> + Send + Sync + 'static>;

/// The filter in force: `AHP_BRIDGE_LOG` if set and valid, else `level`.
pub(crate) fn filter(level: &str) -> EnvFilter {
    EnvFilter::try_from_env("AHP_BRIDGE_LOG")
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("info"))
}

/// Installs the process's log (once; later calls change nothing).
pub fn init_logs(cfg: &LogConfig, extra: Option<ExtraLayer>) {
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt: ExtraLayer = match cfg.format {
        LogFormat::Json => fmt
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .boxed(),
        // Colour only for a person at a terminal, never into journald or a file.
        LogFormat::Text => fmt
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .boxed(),
    };
    let mut layers = vec![fmt.with_filter(filter(&cfg.level)).boxed()];
    layers.extend(extra);
    let _ = tracing_subscriber::registry().with(layers).try_init();
}
