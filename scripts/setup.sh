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
# serve: a real model server for the tests (transformers serve on CPU; torch pinned to its CPU build)
.venv/bin/pip install -q --disable-pip-version-check -e ".[dev,serve]"

./scripts/ensure-docker.sh
.venv/bin/endless setup
# More base recipes, built ahead of an import that maps to them (e.g. ENDLESS_EXTRA_BASE_RECIPES=trixie
# for Debian trixie with Python 3.13; `endless-base-trixie` in --base-image-map). The default one
# (setting base_recipe, ENDLESS_BASE_RECIPE) is built by `endless setup` above.
if [ -n "${ENDLESS_EXTRA_BASE_RECIPES:-}" ]; then
  # shellcheck disable=SC2086
  .venv/bin/python -m endless_assets.sandbox.image.base_image $ENDLESS_EXTRA_BASE_RECIPES
fi
