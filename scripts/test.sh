#!/usr/bin/env bash
# The test command: installs the Debian packages the tests need, the runtime
# and the console's dev tools, then type check, format, lint and every test;
# then the transform e2e test against other CLI releases (scripts/compat-runtimes.sh).
# Each phase prints its time. `scripts/test.sh --quick` runs only the unit
# tests and the in-process integration tests (no Copilot CLI, browser, image
# or package install): the loop while changing code.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
# Runs a phase, then says how long it took.
phase() {
  local name=$1 t0=$SECONDS
  shift
  "$@"
  echo "test.sh: phase $name: $((SECONDS - t0)) s (total $((SECONDS - started)) s)" >&2
}

if [[ "${1:-}" == "--quick" ]]; then
  shift
  # The unit tests and the tier that needs no Copilot CLI, browser, Node app
  # or Debian package (tests/tiers/in_process.rs; checked by running it with
  # .runtime/ moved away).
  phase quick cargo test --locked --lib --test in_process "$@"
  exit 0
fi

# The disk the build has: a fresh test build takes about 4 GB (target/).
df -h . | sed 's/^/test.sh: disk: /'
phase install-packages scripts/install-test-packages.sh
phase install-runtime scripts/install-runtime.sh
phase install-console-tools scripts/install-console-tools.sh
phase install-sdks scripts/install-sdks.sh
# The web console's modules, type-checked as they are served (no build step).
phase console-types .console-tools/node_modules/.bin/tsc -p console/tsconfig.json
phase fmt cargo fmt --check
phase clippy cargo clippy --all-targets --locked -- -D warnings
# The example Rego policies' own tests (docs/policy.md), as an operator runs them.
policy_examples() {
  for example in examples/policy/*/; do
    cargo run --locked --quiet -- policy test "$example"
  done
}
phase policy-examples policy_examples
# Built apart from the run so that the phase times tell building from testing.
phase build-tests cargo test --locked --no-run "$@"
phase tests cargo test --locked "$@"
# The whole suite ran against the pinned CLI; the transform e2e test runs
# also against the oldest supported and the newest published releases.
if [[ $# -eq 0 ]]; then
  phase compat-runtimes scripts/compat-runtimes.sh
fi
