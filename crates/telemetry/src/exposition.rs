//! The two text formats a scraper may ask for: OpenMetrics (what the
//! metrics crate writes) and the Prometheus text format 0.0.4, which has no
//! `# UNIT` or `# EOF` and names a counter's family with its `_total`.

/// The media type of the Prometheus text format 0.0.4.
pub const TEXT_004: &str = "text/plain; version=0.0.4; charset=utf-8";
/// The media type of OpenMetrics text 1.0.0.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Whether an `Accept` header asks for OpenMetrics (listed, and not q=0).
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| {
        a.split(',').any(|media| {
            let mut parts = media.split(';').map(str::trim);
            let ty = parts.next().unwrap_or_default();
            let refused = parts.any(|p| matches!(p.split_once('='), Some(("q", q)) if q.trim().parse::<f32>().ok() == Some(0.0)));
            ty.eq_ignore_ascii_case("application/openmetrics-text") && !refused
        })
    })
}

/// OpenMetrics text rewritten as text format 0.0.4.
pub(crate) fn to_text_004(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut counters: Vec<&str> = Vec::new();
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let Some(name) = rest.strip_suffix(" counter") {
                counters.push(name);
                out.push_str(&format!("# TYPE {name}_total counter\n"));
                continue;
            }
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap_or_default();
            if is_counter_help(openmetrics, name) {
                out.push_str(&format!("# HELP {name}_total{}\n", &rest[name.len()..]));
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Whether `name`'s family is a counter (its `# TYPE` line says so).
fn is_counter_help(text: &str, name: &str) -> bool {
    text.lines()
        .any(|l| l.strip_prefix("# TYPE ") == Some(&format!("{name} counter")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_is_asked_for_by_media_type() {
        assert!(wants_openmetrics(Some(
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
        )));
        assert!(!wants_openmetrics(Some("text/plain")));
        assert!(!wants_openmetrics(Some("application/openmetrics-text;q=0")));
        assert!(!wants_openmetrics(None));
    }

    #[test]
    fn counters_get_their_total_and_openmetrics_lines_go() {
        let om = "# HELP a_turns Turns.\n# TYPE a_turns counter\na_turns_total{outcome=\"completed\"} 2\n\
                  # HELP a_up Up.\n# TYPE a_up gauge\n# UNIT a_up seconds\na_up 1\n# EOF\n";
        let text = to_text_004(om);
        assert_eq!(
            text,
            "# HELP a_turns_total Turns.\n# TYPE a_turns_total counter\na_turns_total{outcome=\"completed\"} 2\n\
             # HELP a_up Up.\n# TYPE a_up gauge\na_up 1\n"
        );
    }
}
