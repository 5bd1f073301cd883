#!/usr/bin/env bash
# Installs the pinned Copilot CLI from the npm registry into .runtime/ (project-local).
# Idempotent: does nothing when the pinned version is already there.
# COPILOT_CLI_VERSION and RUNTIME_DIR install another version elsewhere (the
# compatibility runs put each beside the pinned one, never over it).
set -euo pipefail
VERSION="${COPILOT_CLI_VERSION:-1.0.102}"
cd "$(dirname "$0")/.."
DIR="${RUNTIME_DIR:-.runtime}"
BIN="$DIR/node_modules/.bin/copilot"
if [[ -x "$BIN" ]] && grep -q "\"version\": \"$VERSION\"" "$DIR/node_modules/@github/copilot/package.json" 2>/dev/null; then
  exit 0
fi
command -v npm >/dev/null || { echo "install-runtime: npm is needed (Node.js 20+)" >&2; exit 1; }
mkdir -p "$DIR"
echo "installing @github/copilot@$VERSION into $DIR/ ..." >&2
npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error "@github/copilot@$VERSION" >&2
"$BIN" --version >&2
