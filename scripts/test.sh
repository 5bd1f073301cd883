#!/usr/bin/env bash
# The test command: installs the Debian packages the tests need, the runtime,
# the console's dev tools and the SDKs (in the background, while the one build
# runs), then format, lint, type check and every test; then the transform e2e
# test against other CLI releases (scripts/compat-runtimes.sh). Each phase
# prints its time. `scripts/test.sh --quick` runs only the unit
# tests and the in-process integration tests (no Copilot CLI, browser, image
# or package install): the loop while changing code.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
# Runs a phase, then says how long it took, and the CPU time its processes
# took: on 2 cores, a run can take no less than half the CPU time of all.
phase() {
  local name=$1 t0=$SECONDS
  shift
  local TIMEFORMAT="test.sh: phase $name: CPU %0U s user + %0S s system"
  time "$@"
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

# The installs wait on the network, the build keeps both cores: the installs
# run in the background (scripts/install-for-tests.sh, its output in
# target/installs.log, shown when it ends), in a process group of their own
# so that stopping the run stops them too.
background=()
# NAME COMMAND...: COMMAND in a process group of its own, saying its time and
# CPU time when it ends.
start_background() {
  local name=$1
  shift
  setsid bash -c 'TIMEFORMAT="test.sh: $0 (background): %0R s, CPU %0U s user + %0S s system"; time "$@"' \
    "$name" "$@" &
  background+=($!)
}
# A run that fails or is interrupted leaves no install behind it.
stop_background() {
  local pid
  for pid in "${background[@]}"; do
    kill -TERM -- "-$pid" 2>/dev/null || true
  done
}
trap stop_background EXIT
trap 'exit 130' INT TERM
# The tests wait for the installs; an install that failed fails the run.
wait_background() {
  local pid
  for pid in "${background[@]}"; do
    wait "$pid"
  done
  # Reaped: their ids may be another process's from now on.
  background=()
}
mkdir -p target
# The image's Debian root only for the whole run (the image test is in it).
image_root=()
if [[ $# -eq 0 ]]; then image_root=(--image-root); fi
start_background installs bash -c \
  'scripts/install-for-tests.sh "$@" >target/installs.log 2>&1 || { cat target/installs.log >&2; exit 1; }' \
  install-for-tests "${image_root[@]}"

phase fmt cargo fmt --check
# The lint and the test build are one build: clippy's driver compiles the
# workspace's crates (what `cargo clippy` runs, but generating code), so the
# lints and the test binaries come from one compile, not a check and then a
# build. CLIPPY_ARGS is how `cargo clippy -- -D warnings` hands its flags to
# the driver. CI builds this one profile, once: the image test packs, and
# CI's demo check runs, the binary this build makes (a release build of the
# product's features would remake tokio and every crate above it: the tests'
# tokio has test-util).
clippy_driver=$(command -v clippy-driver) \
  || { echo "test.sh: clippy-driver is missing (rustup component add clippy)" >&2; exit 1; }
export RUSTC_WORKSPACE_WRAPPER=$clippy_driver
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
# Every target (the benches too, as `cargo clippy --all-targets` checked
# them); built apart from the run so that the phase times tell building from
# testing.
if [[ $# -eq 0 ]]; then
  phase build-and-lint cargo test --locked --no-run --all-targets
else
  phase build-and-lint cargo test --locked --no-run "$@"
fi
# The example Rego policies' own tests (docs/policy.md), as an operator runs
# them. The binary is the test build's: `cargo run` would build it again,
# with the features of the package's dependencies alone (the tests' add some).
policy_examples() {
  local bin=${CARGO_TARGET_DIR:-target}/debug/ahp-copilot-bridge
  for example in examples/policy/*/; do
    "$bin" policy test "$example"
  done
}
# With arguments, a chosen part of the tests runs: the examples with the whole run.
if [[ $# -eq 0 ]]; then
  phase policy-examples policy_examples
fi
# The tests start once the installs are done (they use what was installed).
phase wait-installs wait_background
cat target/installs.log >&2
# The web console's modules, type-checked as they are served (no build step).
phase console-types .console-tools/node_modules/.bin/tsc -p console/tsconfig.json
# Three tests at a time on 2 cores: a test of the system tier waits on the
# CLI, the scripted model or a deadline much of its time (that tier took
# 102 s on 2 threads, 81 s on 3 and 75 s on 4 here; the browser tier, busy
# with chromium, 29 s on 2 or 3). A RUST_TEST_THREADS already set is kept.
export RUST_TEST_THREADS=${RUST_TEST_THREADS:-3}
phase tests cargo test --locked "$@"
# The whole suite ran against the pinned CLI; the transform e2e test runs
# also against the oldest supported and the newest published releases.
if [[ $# -eq 0 ]]; then
  phase compat-runtimes scripts/compat-runtimes.sh
fi
