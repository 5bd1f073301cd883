//! The transform core, pure: opt-ins to registrations ([`policy`],
//! [`overrides`]), the per-section rules every answer is checked against
//! ([`rules`]), and each runtime `systemMessage.transform` request to the
//! owning clients and back ([`router`]). It knows neither AHP nor the runtime:
//! clients are reached through [`router::TransformClients`].
pub mod overrides;
pub mod policy;
pub mod router;
pub mod rules;
