#!/usr/bin/env bash
# The test command: installs the Debian packages the tests need, the runtime
# and the console's dev tools, then type check, format, lint and every test;
# then the transform e2e test against other CLI releases (scripts/compat-runtimes.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# The disk the build has: a fresh test build takes about 4 GB (target/).
df -h . | sed 's/^/test.sh: disk: /'
scripts/install-test-packages.sh
scripts/install-runtime.sh
scripts/install-console-tools.sh
scripts/install-sdks.sh
# The web console's modules, type-checked as they are served (no build step).
.console-tools/node_modules/.bin/tsc -p console/tsconfig.json
cargo fmt --check
cargo clippy --all-targets --locked -- -D warnings
# The example Rego policies' own tests (docs/policy.md), as an operator runs them.
for example in examples/policy/*/; do
  cargo run --locked --quiet -- policy test "$example"
done
cargo test --locked "$@"
# The whole suite ran against the pinned CLI; the transform e2e test runs
# also against the oldest supported and the newest published releases.
if [[ $# -eq 0 ]]; then
  scripts/compat-runtimes.sh
fi
