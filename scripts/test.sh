#!/usr/bin/env bash
# The test command: installs the runtime, then format, lint and every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-runtime.sh
cargo fmt --check
cargo clippy --all-targets --locked -- -D warnings
cargo test --locked "$@"
