//! `[policy.sections.ID]`: the operator's rules for one section (who may see
//! it, how a client may rewrite it) and the checks each rule makes of
//! itself; the checks against the rest of `[policy]`, and the effective
//! policy of every section, are `PolicyConfig`'s (policy.rs).
//!
//! The rules are kept as written (strings); the transform core compiles them
//! (`transform/rules.rs`) with [`compile_pattern`], the same function that
//! validates them here, so a file that passes `config check` always compiles.

use regex::Regex;
use serde::Deserialize;

use super::{bad, ConfigError, OverrideAction};

/// Who may see a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Sent to its owner, who may rewrite it within the section's rules.
    Transform,
    /// Sent to its owner for inspection; any rewrite is refused.
    ReadOnly,
    /// Never registered, never sent (what `[policy] restricted` lists).
    Hidden,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Transform => "transform",
            Self::ReadOnly => "read-only",
            Self::Hidden => "hidden",
        }
    }
}

/// How much of the original a rewrite must keep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    #[default]
    Any,
    /// The original survives byte for byte as the rewrite's prefix.
    AppendOnly,
    /// The original survives byte for byte as the rewrite's suffix.
    PrependOnly,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Any => "any",
            Self::AppendOnly => "append-only",
            Self::PrependOnly => "prepend-only",
        }
    }
}

/// One `[policy.sections.ID]` table, as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SectionRuleConfig {
    /// Unset: `hidden` when `[policy] restricted` lists the section, else `transform`.
    pub access: Option<Access>,
    pub mode: Mode,
    /// The rewrite may be at most this many bytes longer than the original.
    pub max_growth_bytes: Option<usize>,
    /// The rewrite may be at most this many bytes shorter than the original.
    pub max_shrink_bytes: Option<usize>,
    /// Literals that must still be in the rewrite when they were in the original.
    pub must_keep: Vec<String>,
    /// Regexes refused when they match the text the client added.
    pub deny: Vec<String>,
    /// Regexes whose matches the client sees as numbered placeholders.
    pub redact: Vec<String>,
}

impl SectionRuleConfig {
    /// The keys set besides `access`, by name: every one of them is a rule on a rewrite.
    pub(super) fn rewrite_rules(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.mode != Mode::Any {
            out.push("mode");
        }
        if self.max_growth_bytes.is_some() {
            out.push("max_growth_bytes");
        }
        if self.max_shrink_bytes.is_some() {
            out.push("max_shrink_bytes");
        }
        if !self.must_keep.is_empty() {
            out.push("must_keep");
        }
        if !self.deny.is_empty() {
            out.push("deny");
        }
        out
    }
}

/// Entries in one `must_keep`, `deny` or `redact` list, at most.
pub(super) const MAX_RULE_ENTRIES: usize = 64;
/// Bytes of one literal or pattern, at most.
pub(super) const MAX_RULE_BYTES: usize = 4096;
/// Compiled size of one pattern, at most (the regex crate's own bound).
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// A `deny` or `redact` pattern that cannot be used; says why in one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadPattern(pub String);

/// Compiles a `deny` or `redact` pattern.
pub fn compile_pattern(pattern: &str) -> Result<Regex, BadPattern> {
    let re = regex::RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| {
            let text = e.to_string();
            BadPattern(text.split_whitespace().collect::<Vec<_>>().join(" "))
        })?;
    if re.is_match("") {
        return Err(BadPattern(format!(
            "{pattern:?} matches the empty string, so it would match everywhere"
        )));
    }
    Ok(re)
}

/// The policy of one catalogued section, all shorthands resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectiveSection {
    pub id: &'static str,
    pub access: Access,
    /// An operator override fixes the section: no client ever gets it.
    pub fixed: Option<OverrideAction>,
    pub rules: SectionRuleConfig,
}

impl SectionRuleConfig {
    /// A mode that keeps the whole original cannot shrink, nor grow by 0.
    pub(super) fn validate_mode(&self, key: impl Fn(&str) -> String) -> Result<(), ConfigError> {
        if self.mode != Mode::Any && self.max_shrink_bytes.is_some_and(|n| n > 0) {
            return Err(bad(
                &key(".max_shrink_bytes"),
                format!(
                    "{} keeps the whole original, so a rewrite can never shrink",
                    self.mode.as_str()
                ),
            ));
        }
        if self.mode != Mode::Any && self.max_growth_bytes == Some(0) {
            return Err(bad(
                &key(".max_growth_bytes"),
                format!(
                    "0 with {} allows no change at all; use access = \"read-only\"",
                    self.mode.as_str()
                ),
            ));
        }
        Ok(())
    }

    /// `must_keep`, `deny` and `redact`: bounded, none empty, every pattern compiles.
    pub(super) fn validate_lists(&self, key: impl Fn(&str) -> String) -> Result<(), ConfigError> {
        for (list, entries) in [
            ("must_keep", &self.must_keep),
            ("deny", &self.deny),
            ("redact", &self.redact),
        ] {
            if entries.len() > MAX_RULE_ENTRIES {
                return Err(bad(
                    &key(list),
                    format!("at most {MAX_RULE_ENTRIES} entries"),
                ));
            }
            for (i, e) in entries.iter().enumerate() {
                let k = key(&format!("{list}[{i}]"));
                if e.is_empty() {
                    return Err(bad(&k, "must not be empty"));
                }
                if e.len() > MAX_RULE_BYTES {
                    return Err(bad(&k, format!("at most {MAX_RULE_BYTES} bytes")));
                }
                if list != "must_keep" {
                    compile_pattern(e).map_err(|reason| bad(&k, reason.0))?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::sections::SECTION_CATALOGUE;

    fn check(text: &str) -> Result<Config, ConfigError> {
        let c = Config::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        c.validate().map(|_| c)
    }

    #[test]
    fn good_rules_pass_and_resolve() {
        let c = check(
            "[policy]\nrestricted = [\"safety\"]\n\
             [policy.sections.tone]\nmode = \"append-only\"\nmax_growth_bytes = 200\ndeny = ['(?i)ignore (all )?previous']\n\
             [policy.sections.custom_instructions]\nredact = ['ghp_[A-Za-z0-9]{36}']\nmust_keep = [\"Be kind\"]\n\
             [policy.sections.guidelines]\naccess = \"read-only\"\nredact = ['secret']\n\
             [policy.sections.last_instructions]\naccess = \"hidden\"\n",
        )
        .unwrap();
        let eff = c.policy.effective_sections();
        let get = |id: &str| eff.iter().find(|s| s.id == id).unwrap();
        assert_eq!(
            get("safety").access,
            Access::Hidden,
            "restricted is shorthand for hidden"
        );
        assert_eq!(get("last_instructions").access, Access::Hidden);
        assert_eq!(get("guidelines").access, Access::ReadOnly);
        assert_eq!(get("tone").rules.mode, Mode::AppendOnly);
        assert_eq!(get("identity").access, Access::Transform);
        assert_eq!(c.policy.hidden_sections(), ["safety", "last_instructions"]);
        // The safety default can be lifted explicitly, and then given rules.
        check("[policy]\nrestricted = []\n[policy.sections.safety]\nmode = \"append-only\"")
            .unwrap();
    }

    #[test]
    fn bad_rules_name_the_key() {
        let cases = [
            ("[policy.sections.bogus]\nmode = \"any\"", "policy.sections.bogus"),
            ("[policy.sections.tone]\ndeny = ['ok', '(unclosed']", "policy.sections.tone.deny[1]"),
            ("[policy.sections.tone]\nredact = ['a*']", "policy.sections.tone.redact[0]"),
            ("[policy.sections.tone]\nmust_keep = ['']", "policy.sections.tone.must_keep[0]"),
            ("[policy.sections.tone]\naccess = \"hidden\"\ndeny = ['x']", "policy.sections.tone.deny"),
            ("[policy.sections.tone]\naccess = \"hidden\"\nredact = ['x']", "policy.sections.tone.redact"),
            ("[policy.sections.safety]\ndeny = ['x']", "policy.sections.safety.deny"),
            ("[policy.sections.safety]\naccess = \"transform\"", "policy.sections.safety.access"),
            ("[policy.sections.tone]\naccess = \"read-only\"\nmode = \"append-only\"", "policy.sections.tone.mode"),
            ("[policy.sections.tone]\naccess = \"read-only\"\nmax_growth_bytes = 3", "policy.sections.tone.max_growth_bytes"),
            ("[policy.sections.tone]\nmode = \"append-only\"\nmax_shrink_bytes = 1", "policy.sections.tone.max_shrink_bytes"),
            ("[policy.sections.tone]\nmode = \"prepend-only\"\nmax_shrink_bytes = 1", "policy.sections.tone.max_shrink_bytes"),
            ("[policy.sections.tone]\nmode = \"append-only\"\nmax_growth_bytes = 0", "policy.sections.tone.max_growth_bytes"),
            ("[policy.overrides.tone]\naction = \"remove\"\n[policy.sections.tone]\nmode = \"append-only\"", "policy.sections.tone"),
        ];
        for (text, key) in cases {
            let e = check(text)
                .err()
                .unwrap_or_else(|| panic!("accepted: {text}"));
            assert_eq!(e.key, key, "{text}: {e}");
        }
        let many = format!(
            "[policy.sections.tone]\ndeny = [{}]",
            vec!["'x'"; 65].join(",")
        );
        assert_eq!(check(&many).unwrap_err().key, "policy.sections.tone.deny");
        // What TOML or serde refuse names the key too.
        for (text, needle) in [
            (
                "[policy.sections.tone]\nmode = \"append-only\"\nmode = \"prepend-only\"",
                "mode",
            ),
            (
                "[policy.sections.tone]\nmode = \"append-and-prepend\"",
                "append-only",
            ),
            ("[policy.sections.tone]\naccess = \"secret\"", "read-only"),
            ("[policy.sections.tone]\ndenny = []", "denny"),
        ] {
            let e = Config::parse(text).unwrap_err();
            assert!(e.0.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn the_table_has_a_row_per_section_with_its_principals() {
        let sha = "a".repeat(64);
        let c = check(&format!(
            "[[principals]]\nname = \"ide\"\ntoken_sha256 = \"{sha}\"\nroles = [\"participate\", \"transform\"]\n\
             [[principals]]\nname = \"policy\"\ntoken_sha256 = \"{sha}\"\nroles = [\"transform\"]\nsections = [\"tone\"]\n\
             [policy.sections.tone]\nmode = \"append-only\"\nmax_growth_bytes = 200\ndeny = ['a', 'b']\n\
             [policy.overrides.guidelines]\naction = \"append\"\ncontent = \"x\"\n"
        ))
        .unwrap();
        let table = c.policy_table();
        assert_eq!(
            table.lines().count(),
            SECTION_CATALOGUE.len() + 1,
            "{table}"
        );
        let row = |id: &str| {
            table
                .lines()
                .find(|l| l.starts_with(&format!("{id} ")))
                .unwrap()
                .to_owned()
        };
        let tone = row("tone");
        let tone: Vec<&str> = tone.split_whitespace().collect();
        assert_eq!(
            tone,
            [
                "tone",
                "transform",
                "append-only",
                "200",
                "-",
                "0",
                "2",
                "0",
                "ide,",
                "policy"
            ]
        );
        assert!(row("identity").ends_with("  ide"), "{table}");
        assert!(row("safety").contains("hidden"), "{table}");
        assert!(row("guidelines").contains("override:append"), "{table}");
    }
}
