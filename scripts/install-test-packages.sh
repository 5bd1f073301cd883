#!/usr/bin/env bash
# Installs the Debian packages the tests need, each only when its command is
# missing: npm (the runtime and the console's tools come from the npm
# registry), rsyslogd (tests/audit_syslog.rs ships to a real one), prlimit
# (tests/audit_write_failure.rs), prometheus and promtool (tests/operations.rs
# scrapes /metrics and checks deploy/alerts.yml), chromium (the console's
# tests drive a real one), haproxy (tests/deploy.rs checks
# deploy/haproxy/haproxy.cfg; tests/fleet.rs runs it in front of three
# bridges), debootstrap, buildah, podman and runc (tests/image.rs builds the
# image and runs it); and kubernetes-validate from PyPI (tests/deploy.rs
# validates deploy/kubernetes/). Needs root (or sudo) only when a package is missing.
set -euo pipefail
apt_updated=
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}
need() { # need COMMAND PACKAGE...
  local cmd=$1; shift
  if command -v "$cmd" >/dev/null || [ -x "/usr/sbin/$cmd" ] || [ -x "/sbin/$cmd" ]; then
    return
  fi
  command -v apt-get >/dev/null || {
    echo "install-test-packages: $cmd is missing and this is not a Debian system: install $*" >&2
    exit 1
  }
  echo "installing $* (for $cmd) ..." >&2
  [ -n "$apt_updated" ] || { as_root apt-get update -qq >&2; apt_updated=1; }
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}
need npm nodejs npm
need rsyslogd rsyslog
need prlimit util-linux
need prometheus prometheus
need chromium chromium
need haproxy haproxy
# tests/image.rs: scripts/build-image.sh (debootstrap, buildah), then podman
# runs the image with runc.
need debootstrap debootstrap
need buildah buildah
need podman podman
need runc runc
if ! python3 -m kubernetes_validate --version >/dev/null 2>&1; then
  command -v python3 >/dev/null || need python3 python3
  python3 -m pip --version >/dev/null 2>&1 || need pip3 python3-pip
  echo "installing kubernetes-validate (PyPI) ..." >&2
  python3 -m pip install --quiet kubernetes-validate >&2 \
    || python3 -m pip install --quiet --break-system-packages kubernetes-validate >&2
fi
