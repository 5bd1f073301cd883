//! Which names may be used: as a file name read from a source, as a path
//! component of what is materialized, and as a plugin's name by the spec.

/// A file name a source may give: one component, never `.`/`..`, no
/// separator, no control character (a remote source could send any string).
pub(crate) fn is_safe_file_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name.len() <= 255
        && !name
            .chars()
            .any(|c| c == '/' || c == '\\' || c.is_control())
}

/// A customization's name as materialized (a folder or file name) and as
/// the runtime accepts it: 1 to 64 ASCII letters, digits, `-`, `_`, `.` and
/// spaces, starting with a letter or digit, not ending with a space, no
/// `..`. So it is never a path of its own, nor hidden, nor `..`.
pub fn is_safe_name(name: &str) -> bool {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ' ');
    name.len() <= 64
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name.chars().all(allowed)
        && !name.ends_with(' ')
        && !name.contains("..")
}

/// A plugin name by Agent Plugins 1.0.0: 1 to 64 of `a-z`, `0-9`, `.`,
/// `-`, first and last a letter or digit, no `--` and no `..`.
pub fn is_plugin_name(name: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    name.len() <= 64
        && edge(name.chars().next())
        && edge(name.chars().last())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-')
        && !name.contains("--")
        && !name.contains("..")
}

/// Why `name` is refused, for a message: the rule it breaks.
pub(crate) fn unsafe_name_reason(name: &str) -> String {
    format!(
        "the name {name:?} is not usable: 1 to 64 ASCII letters, digits, '-', '_', '.' or spaces, \
         starting with a letter or digit"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_from_a_source_are_one_component() {
        for good in ["SKILL.md", ".mcp.json", "a b", "ünï"] {
            assert!(is_safe_file_name(good), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a\\b",
            "nul\0",
            "bell\u{7}",
            "new\nline",
        ] {
            assert!(!is_safe_file_name(bad), "{bad:?}");
        }
        assert!(!is_safe_file_name(&"x".repeat(256)));
    }

    #[test]
    fn names_are_safe_as_path_components() {
        for good in ["alpha", "code-review", "My Agent", "v1.2_x", "a"] {
            assert!(is_safe_name(good), "{good}");
        }
        let long = "x".repeat(65);
        for bad in [
            "",
            "..",
            "../x",
            "a/b",
            ".hidden",
            "-x",
            "a\tb",
            "Bad Name!",
            "a..b",
            "x ",
            "é",
            &long,
        ] {
            assert!(!is_safe_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn plugin_names_follow_the_spec() {
        for good in ["plug-a", "a", "a.b", "x9", "0-0"] {
            assert!(is_plugin_name(good), "{good}");
        }
        let long = "a".repeat(65);
        for bad in [
            "", "Plug", "-a", "a-", "a--b", "a..b", ".a", "a_b", "a b", &long,
        ] {
            assert!(!is_plugin_name(bad), "{bad:?}");
        }
    }
}
