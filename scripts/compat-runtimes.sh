#!/usr/bin/env bash
# The e2e transform test against the Copilot CLI releases beside the pinned
# one: the oldest the bridge supports (docs/compatibility.md) and the newest
# published, when it differs from the pinned one. Each is installed into its
# own folder (.runtime-VERSION) and used through AHP_BRIDGE_RUNTIME_DIR; the
# pinned install in .runtime/ is never touched. Called by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
OLDEST=1.0.92
PINNED=$(sed -n 's/^VERSION="\${COPILOT_CLI_VERSION:-\([^}]*\)}"$/\1/p' scripts/install-runtime.sh)
NEWEST=$(npm view @github/copilot version 2>/dev/null || true)
versions=("$OLDEST")
if [[ -z "$NEWEST" ]]; then
  echo "compat-runtimes: the npm registry did not say the newest @github/copilot; checking $OLDEST only" >&2
elif [[ "$NEWEST" != "$PINNED" && "$NEWEST" != "$OLDEST" ]]; then
  versions+=("$NEWEST")
fi
for v in "${versions[@]}"; do
  COPILOT_CLI_VERSION="$v" RUNTIME_DIR=".runtime-$v" scripts/install-runtime.sh
  echo "compat-runtimes: the e2e transform test against @github/copilot@$v (pinned: $PINNED)" >&2
  # Another release may send event types the pinned schema does not name:
  # the bridge counts them and acts on none, so they are reported, not
  # failed. A field missing, a wrong type or a method gone fails the run:
  # those would break users.
  AHP_BRIDGE_RUNTIME_DIR="$PWD/.runtime-$v" AHP_BRIDGE_WIRE_ALLOW=unknown_event \
    cargo test --locked --test system e2e_transform::
done
