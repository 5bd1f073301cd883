//! The transform core: opt-ins to registrations, and each runtime
//! `systemMessage.transform` request to the owning clients and back.
pub mod overrides;
pub mod policy;
pub mod router;
