//! South side: the Copilot CLI in server mode, over stdio or TCP. Speaks only
//! the runtime's wire, typed from its schema ([`schema`], generated) and, for
//! what the schema leaves out, by hand ([`requests`], [`session_config`]);
//! knows nothing of AHP. JSON exists only in [`runtime_conn`]'s frames.
pub mod ahp_host;
pub mod app_wire;
pub mod calls;
pub mod codec;
pub mod events;
pub mod mismatch;
pub mod process;
pub mod repeats;
pub mod requests;
pub mod runtime_conn;
mod runtime_error;
pub mod schema;
pub mod session_config;
pub mod session_customizations;
pub mod stderr_tail;

pub use runtime_error::RuntimeError;
