#!/usr/bin/env bash
# The demo: installs the runtime, then runs everything offline on loopback.
# It builds the dev profile: a fresh clone's first demo is about four minutes
# here, where an optimized build is ten (docs/testing.md, "Where CI's time
# goes").
# AHP_BRIDGE_DEMO_BINARY runs a binary already built instead (CI's demo
# check runs the one its tests built: the same profile, built once).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-runtime.sh
if [[ -n "${AHP_BRIDGE_DEMO_BINARY:-}" ]]; then
  exec "$AHP_BRIDGE_DEMO_BINARY" demo "$@"
fi
exec cargo run --locked -- demo "$@"
