//! Protocol version negotiation.

/// The protocol versions this host implements, most preferred first.
pub const IMPLEMENTED_VERSIONS: &[&str] = ahp_types::SUPPORTED_PROTOCOL_VERSIONS;

/// The version to speak: the highest offered one this host implements
/// exactly; failing that, the highest offered one the spec makes compatible
/// with one it implements (same major, `>= 1`, or same `0.minor`), which the
/// answer must then name as offered. `None`: nothing in common.
pub fn negotiate(offered: &[String]) -> Option<String> {
    let exact = offered
        .iter()
        .filter(|v| IMPLEMENTED_VERSIONS.contains(&v.as_str()))
        .max_by_key(|v| semver(v));
    match exact {
        Some(v) => Some(v.clone()),
        // The official selection: malformed entries make it give up.
        None => ahp_types::negotiate_protocol_version(offered)
            .ok()
            .flatten()
            .map(String::from),
    }
}

fn semver(v: &str) -> Option<(u64, u64, u64)> {
    let mut parts = v.split('.').map(|p| p.parse::<u64>().ok());
    let out = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(offered: &[&str]) -> Option<String> {
        negotiate(&offered.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn the_highest_implemented_offer_wins() {
        assert_eq!(pick(&["1.1.0", "1.0.0"]).as_deref(), Some("1.0.0"));
        assert_eq!(pick(&["0.9.0", "1.0.0"]).as_deref(), Some("1.0.0"));
        assert_eq!(pick(&["0.9.0"]).as_deref(), Some("0.9.0"));
        // Nothing implemented offered: a compatible version still connects.
        assert_eq!(pick(&["1.2.0"]).as_deref(), Some("1.2.0"));
        assert_eq!(pick(&["2.0.0"]), None);
        assert_eq!(pick(&["0.8.0"]), None);
        assert_eq!(pick(&["banana"]), None);
        assert_eq!(pick(&[]), None);
    }
}
