#!/usr/bin/env bash
# Installs the official Copilot SDKs the SDK-app tests drive, unmodified,
# from their registries into .sdk-tools/ (project-local): the Node SDK
# @github/copilot-sdk from npm (its optional packages too: its FFI module
# builds from them; an app that connects to a URI starts no CLI of its own)
# and the Python SDK github-copilot-sdk from PyPI into a virtual
# environment. Idempotent.
set -euo pipefail
NODE_SDK="${SDK_NODE_VERSION:-1.0.14}"
PY_SDK="${SDK_PYTHON_VERSION:-1.0.27}"
cd "$(dirname "$0")/.."
DIR=.sdk-tools
mkdir -p "$DIR"
if ! grep -q "\"version\": \"$NODE_SDK\"" "$DIR/node/node_modules/@github/copilot-sdk/package.json" 2>/dev/null; then
  command -v npm >/dev/null || { echo "install-sdks: npm is needed (Node.js 20+)" >&2; exit 1; }
  echo "installing @github/copilot-sdk@$NODE_SDK into $DIR/node/ ..." >&2
  mkdir -p "$DIR/node"
  npm install --prefix "$DIR/node" --no-audit --no-fund --loglevel=error \
    "@github/copilot-sdk@$NODE_SDK" >&2
fi
if ! "$DIR/venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('github-copilot-sdk') != '$PY_SDK')" 2>/dev/null; then
  echo "installing github-copilot-sdk==$PY_SDK into $DIR/venv/ ..." >&2
  python3 -m venv "$DIR/venv"
  "$DIR/venv/bin/pip" install --quiet --disable-pip-version-check "github-copilot-sdk==$PY_SDK" >&2
fi
