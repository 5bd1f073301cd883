#!/usr/bin/env bash
# The test command: installs the Debian packages the tests need, the runtime
# and the console's dev tools, then type check, format, lint and every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-packages.sh
scripts/install-runtime.sh
scripts/install-console-tools.sh
# The web console's modules, type-checked as they are served (no build step).
.console-tools/node_modules/.bin/tsc -p console/tsconfig.json
cargo fmt --check
cargo clippy --all-targets --locked -- -D warnings
cargo test --locked "$@"
