#!/usr/bin/env bash
# Harbor's own harness, to check exported tasks (`endless export --format harbor`) with it.
#
# Harbor 0.25 needs Python >= 3.12 and Docker Compose v2; this machine kind (Debian bookworm)
# has neither. So Harbor runs in a container built here once: a Debian trixie root filesystem
# (debootstrap, no Docker Hub) with Python 3.13, Debian's docker CLI and compose plugin, and
# harbor from PyPI in a virtualenv. It is a checking tool, never a dependency of endless.
#
# Usage: scripts/harbor-runner.sh WORKDIR harbor ARGS...
#   WORKDIR is mounted at the same path inside the runner, because Harbor hands host paths
#   (build contexts, log directories) to the Docker engine. The runner has no network of its
#   own; it reaches the local engine through /var/run/docker.sock.
#   scripts/harbor-runner.sh --build   only builds the runner image and prints its tag.
set -euo pipefail
cd "$(dirname "$0")/.."

HARBOR_VERSION="${HARBOR_VERSION:-0.25.0}"
SUITE=trixie
RECIPE="harbor==$HARBOR_VERSION $SUITE python3 python3-venv ca-certificates docker-cli docker-compose v1"
TAG_HASH=$(printf '%s' "$RECIPE" | sha256sum | cut -c1-12)
ROOTFS="endless-harbor-rootfs:$SUITE"
RUNNER="endless-harbor-runner:$TAG_HASH"
SCRATCH=""  # removed on exit, whatever happens
trap 'if [ -n "$SCRATCH" ]; then rm -rf "$SCRATCH"; fi' EXIT

build_rootfs() {
  if docker image inspect "$ROOTFS" >/dev/null 2>&1; then return; fi
  command -v debootstrap >/dev/null || { echo "harbor-runner: debootstrap is missing (scripts/ensure-docker.sh installs it)" >&2; exit 1; }
  local tmp
  tmp=$(mktemp -d /tmp/endless-harbor-rootfs.XXXXXX)
  SCRATCH="$tmp"
  echo "harbor-runner: debootstrap $SUITE (about a minute, once)" >&2
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    "$SUITE" "$tmp/root" ${ENDLESS_DEBIAN_MIRROR:-} >"$tmp/debootstrap.log" 2>&1 \
    || { tail -n 30 "$tmp/debootstrap.log" >&2; exit 1; }
  rm -f "$tmp"/root/var/cache/apt/archives/*.deb
  tar -C "$tmp/root" -c . | docker import - "$ROOTFS" >/dev/null
  rm -rf "$tmp"
  SCRATCH=""
}

build_runner() {
  if docker image inspect "$RUNNER" >/dev/null 2>&1; then return; fi
  build_rootfs
  local ctx
  ctx=$(mktemp -d /tmp/endless-harbor-runner.XXXXXX)
  SCRATCH="$ctx"
  # pip inside the build trusts what this machine trusts (its CA bundle).
  cp /etc/ssl/certs/ca-certificates.crt "$ctx/host-ca.crt"
  cat >"$ctx/Dockerfile" <<EOF
FROM $ROOTFS
RUN apt-get update && apt-get install -y --no-install-recommends docker-cli docker-compose \
 && rm -rf /var/lib/apt/lists/*
COPY host-ca.crt /etc/ssl/certs/host-ca.crt
RUN python3 -m venv /opt/harbor \
 && PIP_CERT=/etc/ssl/certs/host-ca.crt /opt/harbor/bin/pip install --no-cache-dir "harbor==$HARBOR_VERSION"
ENV PATH=/opt/harbor/bin:\$PATH LITELLM_LOCAL_MODEL_COST_MAP=True
LABEL endless.project=endless endless.kind=harbor-runner
EOF
  echo "harbor-runner: building $RUNNER (harbor $HARBOR_VERSION; a few minutes, once)" >&2
  docker build --network host -q -t "$RUNNER" "$ctx" >/dev/null
  rm -rf "$ctx"
  SCRATCH=""
}

if [ "${1:-}" = "--build" ]; then
  build_runner
  echo "$RUNNER"
  exit 0
fi
if [ $# -lt 2 ]; then
  echo "usage: $0 WORKDIR harbor ARGS...   |   $0 --build" >&2
  exit 2
fi
WORKDIR=$(realpath "$1")
shift
build_runner
exec docker run --rm --network none \
  -v /var/run/docker.sock:/var/run/docker.sock \
  -v "$WORKDIR:$WORKDIR" -w "$WORKDIR" \
  --label endless.kind=harbor-runner \
  "$RUNNER" "$@"
