//! Generates the runtime's wire types from its vendored schema (see
//! scripts/vendor-runtime-schema.py), the way `ahp-types` carries AHP's:
//! `$OUT_DIR/runtime_wire.rs`, included by `crates/runtime/src/schema.rs`.

use std::fmt::Write as _;
use std::path::Path;

/// At the workspace's root, beside the other vendored schemas and the
/// script that vendors it.
const SCHEMA: &str = "../../schemas/runtime/wire.schema.json";

fn main() {
    println!("cargo:rerun-if-changed={SCHEMA}");
    let text = std::fs::read_to_string(SCHEMA).expect("the vendored runtime schema");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("the schema is JSON");
    let root: schemars::schema::RootSchema =
        serde_json::from_value(doc.clone()).expect("the schema is a JSON schema");
    let mut settings = typify::TypeSpaceSettings::default();
    settings.with_struct_builder(false);
    let mut types = typify::TypeSpace::new(&settings);
    types
        .add_root_schema(root)
        .expect("typify takes the schema");
    let file: syn::File = syn::parse2(types.to_stream()).expect("typify's output parses");
    let mut out = prettyplease::unparse(&file);
    let source = &doc["x-source"];
    writeln!(
        out,
        "\n// The runtime release these types were generated from: {:?}.",
        source["version"].as_str().unwrap_or("unknown")
    )
    .unwrap();
    let known: Vec<&str> = doc["x-eventTypes"]
        .as_array()
        .map(|a| a.iter().filter_map(|t| t.as_str()).collect())
        .unwrap_or_default();
    writeln!(
        out,
        "\n/// Every event type the runtime's schema names (sorted).\npub const EVENT_TYPES: &[&str] = &{known:?};"
    )
    .unwrap();
    let prefixes: Vec<&str> = doc["x-observedEventPrefixes"]
        .as_array()
        .map(|a| a.iter().filter_map(|t| t.as_str()).collect())
        .unwrap_or_default();
    writeln!(
        out,
        "\n/// Prefixes of event types the runtime sends that no schema names (observed).\npub const OBSERVED_EVENT_PREFIXES: &[&str] = &{prefixes:?};"
    )
    .unwrap();
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("runtime_wire.rs");
    std::fs::write(dest, out).unwrap();
}
