#!/usr/bin/env bash
# CI's check of the README's first command: scripts/demo.sh builds (or, with
# AHP_BRIDGE_DEMO_BINARY, runs the binary CI's tests built), starts the whole
# offline stack and says where it listens, then stops cleanly on Ctrl-C.
# (tests/cli.rs holds a whole conversation with the demo binary.)
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
setsid scripts/demo.sh --listen 127.0.0.1:0 2>"$log" &
pid=$!
for _ in $(seq 1 900); do
  if grep -q "listening on ws://" "$log"; then break; fi
  if ! kill -0 "$pid" 2>/dev/null; then cat "$log" >&2; echo "demo-smoke: the demo exited early" >&2; exit 1; fi
  sleep 1
done
if ! grep -q "listening on ws://" "$log"; then
  cat "$log" >&2; kill -KILL -- "-$pid" 2>/dev/null || true
  echo "demo-smoke: the demo did not start within 900 s" >&2; exit 1
fi
grep "listening on ws://" "$log" >&2
kill -INT -- "-$pid"
if wait "$pid"; then
  echo "demo-smoke: ok" >&2
else
  cat "$log" >&2; echo "demo-smoke: the demo did not exit cleanly on Ctrl-C" >&2; exit 1
fi
