#!/usr/bin/env bash
# What scripts/test.sh's tests need, installed in order, each step saying its
# time: the Debian packages (scripts/install-test-packages.sh), the pinned
# Copilot CLI, the console's dev tools, the official SDKs, and with
# --image-root (as root) the image's Debian root. Idempotent: what is there
# is not fetched again. scripts/test.sh runs it in the background while the
# build takes both cores: all of it waits on the network.
set -euo pipefail
cd "$(dirname "$0")/.."
step() {
  local name=$1 t0=$SECONDS
  shift
  "$@"
  echo "install-for-tests: $name: $((SECONDS - t0)) s" >&2
}
step packages scripts/install-test-packages.sh
step runtime scripts/install-runtime.sh
step console-tools scripts/install-console-tools.sh
step sdks scripts/install-sdks.sh
if [[ "${1:-}" == "--image-root" && "$(id -u)" -eq 0 ]]; then
  # (Not root: the image test says why it cannot build the image.)
  step image-root scripts/build-image.sh --root-only
fi
