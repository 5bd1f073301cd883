//! The decision points, and which of its two sets (`deny`, `warn`) a
//! point's package declares. Their own file because the compiler
//! (`compile.rs`), the input documents (`input.rs`) and the evaluator
//! (`mod.rs`) all name them, and the evaluator imports the other two.

use std::fmt;

/// A decision point: where the bridge asks, and the package it asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Point {
    OptIn,
    Session,
    Transform,
    Permission,
    Customization,
}

impl Point {
    pub const ALL: [Point; 5] = [
        Self::OptIn,
        Self::Session,
        Self::Transform,
        Self::Permission,
        Self::Customization,
    ];

    /// The name in records, metrics and `input.point`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OptIn => "opt_in",
            Self::Session => "session",
            Self::Transform => "transform",
            Self::Permission => "permission",
            Self::Customization => "customization",
        }
    }

    /// The package a policy declares for it.
    pub fn package(self) -> &'static str {
        match self {
            Self::OptIn => "data.ahp.opt_in",
            Self::Session => "data.ahp.session",
            Self::Transform => "data.ahp.transform",
            Self::Permission => "data.ahp.permission",
            Self::Customization => "data.ahp.customization",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which of a point's two sets its package declares.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Sets {
    pub(super) deny: bool,
    pub(super) warn: bool,
}
