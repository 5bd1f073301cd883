//! The runtime's wire types, generated at build time from the vendored
//! projection of its official schemas (`schemas/runtime/wire.schema.json`,
//! written by `scripts/vendor-runtime-schema.py`; `build.rs` runs typify).
//! Only the fields the bridge reads or sends are in it, each typed and
//! required as the runtime's schema says.

#![allow(clippy::all, missing_docs, unreachable_pub)]

include!(concat!(env!("OUT_DIR"), "/runtime_wire.rs"));
