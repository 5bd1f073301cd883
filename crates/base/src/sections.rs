//! The system-prompt section catalogue: the ids the runtime renders and a
//! client may name in an opt-in. At the bottom of the crate so that config
//! validation, the AHP host (which advertises it) and the transform core
//! (which enforces it) all read the same list without depending on each other.

pub struct SectionInfo {
    pub id: &'static str,
    pub label: &'static str,
    pub description: &'static str,
}

/// The runtime's section ids (Copilot CLI protocol 3), with labels for UIs.
pub const SECTION_CATALOGUE: &[SectionInfo] = &[
    SectionInfo {
        id: "preamble",
        label: "Preamble",
        description: "The first line of the identity: who the agent is.",
    },
    SectionInfo {
        id: "identity",
        label: "Identity",
        description:
            "Group: the agent's identity, version and model information (contains the preamble).",
    },
    SectionInfo {
        id: "tone",
        label: "Tone",
        description: "How the agent phrases its answers.",
    },
    SectionInfo {
        id: "tool_efficiency",
        label: "Tool efficiency",
        description: "Guidance on using tools economically.",
    },
    SectionInfo {
        id: "environment_context",
        label: "Environment context",
        description: "Working directory, operating system and other facts about the environment.",
    },
    SectionInfo {
        id: "code_change_rules",
        label: "Code change rules",
        description: "Rules the agent follows when it edits code.",
    },
    SectionInfo {
        id: "guidelines",
        label: "Guidelines",
        description: "General working guidelines.",
    },
    SectionInfo {
        id: "safety",
        label: "Safety",
        description: "Safety rules the agent must follow.",
    },
    SectionInfo {
        id: "tool_instructions",
        label: "Tool instructions",
        description: "Group: instructions for each available tool.",
    },
    SectionInfo {
        id: "custom_instructions",
        label: "Custom instructions",
        description: "Repository and user custom instructions.",
    },
    SectionInfo {
        id: "runtime_instructions",
        label: "Runtime instructions",
        description: "Instructions the runtime adds for the current mode.",
    },
    SectionInfo {
        id: "last_instructions",
        label: "Last instructions",
        description: "Closing instructions at the end of the prompt.",
    },
];

pub fn is_catalogued(id: &str) -> bool {
    SECTION_CATALOGUE.iter().any(|s| s.id == id)
}
