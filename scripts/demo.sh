#!/usr/bin/env bash
# The demo: installs the runtime, then runs everything offline on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-runtime.sh
exec cargo run --release --locked -- demo "$@"
