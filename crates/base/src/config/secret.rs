//! A credential the bridge carries (a GitHub token, an upstream host's
//! connection token, a sealed token): `Debug` never shows it, so a
//! `{:?}` in a log or an error cannot leak one.

/// A credential: carried to where it is due, never shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::Secret;

    #[test]
    fn debug_never_shows_the_value() {
        let shown = format!("{:?}", Secret("ghp_value".into()));
        assert_eq!(shown, "Secret(..)");
    }
}
