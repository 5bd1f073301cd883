#!/usr/bin/env bash
# Installs the web console's pinned dev tools from the npm registry into
# .console-tools/ (project-local): typescript for `tsc --checkJs`, axe-core for
# the accessibility test. Idempotent: does nothing when they are there.
set -euo pipefail
TYPESCRIPT="${CONSOLE_TYPESCRIPT_VERSION:-5.9.3}"
AXE="${CONSOLE_AXE_VERSION:-4.11.4}"
cd "$(dirname "$0")/.."
DIR=.console-tools
have() { grep -q "\"version\": \"$2\"" "$DIR/node_modules/$1/package.json" 2>/dev/null; }
if have typescript "$TYPESCRIPT" && have axe-core "$AXE"; then
  exit 0
fi
command -v npm >/dev/null || { echo "install-console-tools: npm is needed (Node.js 20+)" >&2; exit 1; }
mkdir -p "$DIR"
echo "installing typescript@$TYPESCRIPT axe-core@$AXE into $DIR/ ..." >&2
npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error \
  "typescript@$TYPESCRIPT" "axe-core@$AXE" >&2
