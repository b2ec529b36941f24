#!/usr/bin/env bash
# Everything a fresh machine needs: a virtualenv with the package, a Docker engine, the base image.
# Idempotent and quiet when there is nothing to do.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv" >&2
  "$PYTHON" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi
echo "setup: installing the package and its dependencies" >&2
.venv/bin/pip install -q --disable-pip-version-check -e ".[dev]"

./scripts/ensure-docker.sh
.venv/bin/endless setup
