//! The error codes AHP adds to JSON-RPC's own.

/// AHP's error codes (the specification's `AhpErrorCodes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AhpError {
    SessionNotFound,
    ProviderNotFound,
    SessionAlreadyExists,
    UnsupportedProtocolVersion,
    NotFound,
    PermissionDenied,
    Conflict,
}

impl From<AhpError> for i32 {
    fn from(c: AhpError) -> i32 {
        match c {
            AhpError::SessionNotFound => -32001,
            AhpError::ProviderNotFound => -32002,
            AhpError::SessionAlreadyExists => -32003,
            AhpError::UnsupportedProtocolVersion => -32005,
            AhpError::NotFound => -32008,
            AhpError::PermissionDenied => -32009,
            AhpError::Conflict => -32011,
        }
    }
}
