//! Text a session adds to a section of the prompt, as the runtime's own
//! AHP host takes it at `createSession` (`config.systemMessageSections`):
//! `{"<id>": {"content": "...", "action": "append" | "prepend"}}` for the
//! three ids it has a hook for, 64 KiB of content in all. Parsed here once,
//! with the host's own limits, so a bad value is refused where it arrives
//! (the bridge's `createSession`) in the words the host would use.

use serde_json::Value;

use ahp_bridge_base::config::AHP_HOST_SECTIONS;

/// The most content, in bytes over all sections, the host takes.
pub const MAX_ADDED_BYTES: usize = 64 * 1024;

/// Where the text goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddAction {
    Append,
    Prepend,
}

impl AddAction {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Append => "append",
            Self::Prepend => "prepend",
        }
    }
}

/// One section's added text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionAddition {
    pub id: String,
    pub action: AddAction,
    pub content: String,
}

/// Why a `systemMessageSections` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("config.systemMessageSections: {0}")]
pub struct BadAdditions(pub String);

/// The additions of a `systemMessageSections` value, in id order.
pub fn parse_additions(value: &Value) -> Result<Vec<SectionAddition>, BadAdditions> {
    let bad = |m: String| Err(BadAdditions(m));
    let Some(map) = value.as_object() else {
        return bad("must be an object of section ids".into());
    };
    let mut out = Vec::new();
    let mut total = 0usize;
    for (id, entry) in map {
        if !AHP_HOST_SECTIONS.contains(&id.as_str()) {
            return bad(format!(
                "{id:?} is not a section this runtime adds text to (accepted: {})",
                AHP_HOST_SECTIONS.join(", ")
            ));
        }
        let content = entry.get("content").and_then(Value::as_str);
        let action = match entry.get("action").and_then(Value::as_str) {
            Some("append") => AddAction::Append,
            Some("prepend") => AddAction::Prepend,
            _ => {
                return bad(format!(
                "{id}.action must be \"append\" or \"prepend\" (this runtime replaces no section)"
            ))
            }
        };
        let Some(content) = content else {
            return bad(format!("{id}.content must be a string"));
        };
        if let Some(other) = entry.as_object().and_then(|o| {
            o.keys()
                .find(|k| !matches!(k.as_str(), "content" | "action"))
        }) {
            return bad(format!("{id}.{other} is not a field of a section"));
        }
        total += content.len();
        out.push(SectionAddition {
            id: id.clone(),
            action,
            content: content.to_owned(),
        });
    }
    if total > MAX_ADDED_BYTES {
        return bad(format!(
            "carries {total} bytes of content, more than {MAX_ADDED_BYTES} across its sections"
        ));
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_hosts_shape_and_limits() {
        let ok = parse_additions(&json!({
            "runtime_instructions": {"content": "b", "action": "prepend"},
            "custom_instructions": {"content": "a", "action": "append"}
        }))
        .unwrap();
        assert_eq!(ok[0].id, "custom_instructions");
        assert_eq!(ok[1].action, AddAction::Prepend);
        for (bad, says) in [
            (json!([]), "must be an object"),
            (
                json!({"tone": {"content": "x", "action": "append"}}),
                "accepted: environment_context",
            ),
            (
                json!({"custom_instructions": {"content": "x", "action": "replace"}}),
                "replaces no section",
            ),
            (
                json!({"custom_instructions": {"action": "append"}}),
                "content must be a string",
            ),
            (
                json!({"custom_instructions": {"content": "x", "action": "append", "x": 1}}),
                "x is not a field",
            ),
            (
                json!({"custom_instructions": {"content": "a".repeat(MAX_ADDED_BYTES + 1), "action": "append"}}),
                "65537 bytes",
            ),
        ] {
            let e = parse_additions(&bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let at_limit = json!({"custom_instructions": {"content": "a".repeat(MAX_ADDED_BYTES), "action": "append"}});
        assert!(parse_additions(&at_limit).is_ok());
    }
}
