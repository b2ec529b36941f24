#!/usr/bin/env bash
# Make sure a Docker engine answers. On a fresh machine of this kind only the client is
# installed: install the engine (and debootstrap, which builds our base image) from Debian's
# packages and start dockerd in the background. Idempotent: does nothing where `docker info` works.
set -euo pipefail

if docker info >/dev/null 2>&1; then
  exit 0
fi

if [ -n "${DOCKER_HOST:-}" ]; then
  echo "ensure-docker: DOCKER_HOST=$DOCKER_HOST is set but does not answer 'docker info'" >&2
  exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

if ! command -v dockerd >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
  echo "ensure-docker: installing docker.io and debootstrap" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq docker.io debootstrap >/dev/null
fi

echo "ensure-docker: starting dockerd" >&2
LOG=/var/log/endless-dockerd.log
$SUDO sh -c "nohup dockerd --iptables=false --ip6tables=false >$LOG 2>&1 &"

for _ in $(seq 1 120); do
  if docker info >/dev/null 2>&1; then
    echo "ensure-docker: engine is up" >&2
    exit 0
  fi
  sleep 0.5
done
echo "ensure-docker: dockerd did not answer within 60 s; see $LOG" >&2
tail -n 30 "$LOG" >&2 || true
exit 1
