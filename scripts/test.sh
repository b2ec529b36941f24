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
# (spread over several workers, the costliest fixtures ran twice). Four workers on 2 cores: the
# suite mostly waits on Docker, servers and subprocesses (two workers kept the cores about 36%
# busy). --durations: what CI spends.
.venv/bin/python -m pytest -n "${ENDLESS_TEST_WORKERS:-4}" --dist loadfile --durations=25 "$@"
