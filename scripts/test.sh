#!/usr/bin/env bash
# The test suite: set up if needed, lint, validate the Dagster definitions, run pytest.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/dagster definitions validate -w workspace.yaml
# --dist loadfile: a module's tests share one worker, so its module-scoped batch runs once
# (spread over several workers, the costliest fixtures ran twice). Two workers: four were no
# faster on 2 cores (28 min of pytest against 26 on a clean clone: Docker and the longest
# modules set the pace) and made the tests that time the machine fail now and then.
# ENDLESS_TEST_WORKERS sets another count. --durations: what CI spends.
.venv/bin/python -m pytest -n "${ENDLESS_TEST_WORKERS:-2}" --dist loadfile --durations=25 "$@"
