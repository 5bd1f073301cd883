//! A runtime message that is not as the runtime's schema says: counted in
//! `ahp_bridge_runtime_protocol_mismatches_total{kind}` and logged at warn
//! once per kind and place (a release that renamed a field would otherwise
//! fill the log at every delta). Never turned into a default value: what does
//! not parse is not passed on.

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex};

use tracing::warn;

use ahp_bridge_telemetry::{metrics, Escaped};

/// What was wrong, as the metric's `kind` label names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MismatchKind {
    /// An event type the runtime's schema does not name.
    UnknownEvent,
    /// A request of the runtime's that the bridge does not know.
    UnknownRequest,
    /// A field the schema requires is absent.
    MissingField,
    /// A field of the wrong type (or an unknown enum value).
    WrongType,
    /// Our call was refused as unknown (-32601): the runtime dropped a method.
    UnknownMethod,
    /// An event whose id came before: dropped, not shown twice.
    RepeatedEvent,
}

impl MismatchKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UnknownEvent => "unknown_event",
            Self::UnknownRequest => "unknown_request",
            Self::MissingField => "missing_field",
            Self::WrongType => "wrong_type",
            Self::UnknownMethod => "unknown_method",
            Self::RepeatedEvent => "repeated_event",
        }
    }

    /// The kind of a serde error: a missing field, or anything else wrong
    /// with a value's type or content.
    pub fn of(e: &serde_json::Error) -> Self {
        if e.to_string().starts_with("missing field") {
            Self::MissingField
        } else {
            Self::WrongType
        }
    }
}

/// One mismatch: `place` is the event type or method (the runtime's string,
/// logged escaped), `detail` says what (a field path and serde's words, no
/// content: serde names the expected type, never the value's text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub kind: MismatchKind,
    pub place: String,
    pub detail: String,
}

impl Mismatch {
    pub fn new(kind: MismatchKind, place: &str, detail: impl Into<String>) -> Self {
        Self {
            kind,
            place: place.to_owned(),
            detail: detail.into(),
        }
    }

    /// An event that came again (its id seen before in its session).
    pub fn repeated(place: &str, id: Option<&str>) -> Self {
        let id = id.unwrap_or("");
        let detail = format!("event {id} came again; dropped");
        Self::new(MismatchKind::RepeatedEvent, place, detail)
    }

    /// From a typed parse's error, with the field's path.
    pub fn parse(place: &str, e: serde_path_to_error::Error<serde_json::Error>) -> Self {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let kind = MismatchKind::of(&inner);
        // serde's text for a wrong value quotes the value (prompt text, it
        // may be): keep only what was expected.
        let text = inner.to_string();
        let what = match (kind, text.split_once(", expected ")) {
            (MismatchKind::MissingField, _) => {
                text.split(" at line").next().unwrap_or("").to_owned()
            }
            (_, Some((_, expected))) => format!(
                "expected {}",
                expected.split(" at line").next().unwrap_or("")
            ),
            _ => "a value of the wrong type".to_owned(),
        };
        Self::new(kind, place, format!("{path}: {what}"))
    }

    /// Counts it, and logs it the first time this kind is seen at this place.
    pub fn report(&self) {
        metrics().runtime_mismatch(self.kind.as_str());
        static SEEN: LazyLock<Mutex<HashSet<(MismatchKind, String)>>> =
            LazyLock::new(Default::default);
        let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
        // Bounded: past 256 places only the count goes on.
        if seen.len() < 256 && seen.insert((self.kind, self.place.clone())) {
            warn!(
                kind = self.kind.as_str(),
                at = %Escaped(&self.place),
                detail = %Escaped(&self.detail),
                "the runtime's message is not as its schema says (counted; logged once)"
            );
        }
    }
}
