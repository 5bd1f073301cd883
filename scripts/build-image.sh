#!/usr/bin/env bash
# Builds the bridge's image without a registry: a Debian bookworm root made by
# debootstrap (what debian:bookworm-slim holds, plus the CLI's libstdc++6 and
# ca-certificates), the bridge's binary and the pinned Copilot CLI added, the
# user, entrypoint and command of deploy/Containerfile set with buildah (no
# RUN step, so no OCI runtime is needed), written to
# target/image/ahp-copilot-bridge.oci.tar. Run as root:
#   bash scripts/build-image.sh
# Load it with: podman load -i target/image/ahp-copilot-bridge.oci.tar
# With --root-only it makes the Debian root and stops (scripts/test.sh makes
# it while other things build). The binary is built with the `dist` profile
# (fat LTO, what ships); `--profile release` packs the faster build instead,
# and `--binary PATH` packs a binary already built (tests/image.rs packs the
# one it tests: it tests the packing, and CI builds one profile, once).
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE=dist
BIN=
case "${1:-}" in
  "" | --root-only) ;;
  --profile)
    case "${2:-}" in
      dist | release) PROFILE=$2 ;;
      *) echo "build-image: --profile takes dist or release, not '${2:-}'" >&2; exit 2 ;;
    esac ;;
  --binary)
    [ -x "${2:-}" ] || { echo "build-image: --binary takes an executable, not '${2:-}'" >&2; exit 2; }
    BIN=$2 ;;
  *) echo "build-image: unknown argument $1 (none, --root-only, --profile dist|release, or --binary PATH)" >&2; exit 2 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "build-image: run as root (debootstrap and buildah mount need it)" >&2; exit 1; }
for c in debootstrap buildah; do
  command -v "$c" >/dev/null || { echo "build-image: $c is missing (apt-get install -y debootstrap buildah)" >&2; exit 1; }
done
TAG=ahp-copilot-bridge:0.1.0
OUT=target/image
ROOT=$OUT/rootfs
mkdir -p "$OUT"
if [ ! -x "$ROOT/bin/sh" ]; then
  # Made aside and moved in whole: a debootstrap stopped halfway must not
  # pass for a root next time.
  rm -rf "$ROOT" "$ROOT.part"
  debootstrap --variant=minbase --include=ca-certificates,libstdc++6 bookworm "$ROOT.part" http://deb.debian.org/debian >&2
  rm -rf "$ROOT.part"/var/lib/apt/lists/* "$ROOT.part"/var/cache/apt/*.bin
  mv "$ROOT.part" "$ROOT"
fi
[ "${1:-}" = "--root-only" ] && exit 0
if [ -z "$BIN" ]; then
  cargo build --profile "$PROFILE" --locked
  # Where cargo put it (CARGO_TARGET_DIR, when set, moves every build).
  BIN=${CARGO_TARGET_DIR:-target}/$PROFILE/ahp-copilot-bridge
fi
scripts/install-runtime.sh
export STORAGE_DRIVER=vfs
ctr=$(buildah --storage-driver vfs from scratch)
trap 'buildah --storage-driver vfs rm "$ctr" >/dev/null 2>&1 || true' EXIT
mnt=$(buildah --storage-driver vfs mount "$ctr")
cp -a "$ROOT"/. "$mnt"/
# The user, as the Containerfile's useradd makes it.
grep -q '^ahp-bridge:' "$mnt/etc/group" || echo 'ahp-bridge:x:10001:' >> "$mnt/etc/group"
grep -q '^ahp-bridge:' "$mnt/etc/passwd" \
  || echo 'ahp-bridge:x:10001:10001::/var/lib/ahp-copilot-bridge-home:/usr/sbin/nologin' >> "$mnt/etc/passwd"
install -d -o 10001 -g 10001 "$mnt/var/lib/ahp-copilot-bridge" "$mnt/var/lib/ahp-copilot-bridge-home"
install -d "$mnt/etc/ahp-copilot-bridge" "$mnt/opt/ahp-copilot-bridge/.runtime/node_modules/.bin"
install -m 0755 "$BIN" "$mnt/opt/ahp-copilot-bridge/ahp-copilot-bridge"
# The pinned Copilot CLI: its native binary (no Node.js needed at run time).
install -d "$mnt/opt/ahp-copilot-bridge/.runtime/node_modules/@github"
cp -a .runtime/node_modules/@github/copilot-linux-x64 "$mnt/opt/ahp-copilot-bridge/.runtime/node_modules/@github/"
ln -sf ../@github/copilot-linux-x64/copilot "$mnt/opt/ahp-copilot-bridge/.runtime/node_modules/.bin/copilot-linux-x64"
buildah --storage-driver vfs umount "$ctr" >/dev/null
buildah --storage-driver vfs config \
  --user 10001:10001 \
  --workingdir /opt/ahp-copilot-bridge \
  --env HOME=/var/lib/ahp-copilot-bridge-home \
  --env COPILOT_HOME=/var/lib/ahp-copilot-bridge-home \
  --port 8421 --port 8422 \
  --entrypoint '["/opt/ahp-copilot-bridge/ahp-copilot-bridge"]' \
  --cmd '["serve", "--config", "/etc/ahp-copilot-bridge/bridge.toml"]' \
  "$ctr"
rm -f "$OUT/ahp-copilot-bridge.oci.tar"
buildah --storage-driver vfs commit --format oci "$ctr" "oci-archive:$OUT/ahp-copilot-bridge.oci.tar:$TAG" >&2
echo "$OUT/ahp-copilot-bridge.oci.tar ($TAG)"
