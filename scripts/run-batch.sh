#!/usr/bin/env bash
# The main job: set up if needed, then materialize today's batch on the embedded default
# (procedural generator + oracle solver) through Dagster and print its funnel.
# Extra arguments go to `endless run` (e.g. --tasks 50 --date 2026-11-01).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export DAGSTER_HOME="${DAGSTER_HOME:-$PWD/dagster_home}"
exec .venv/bin/endless run "$@"
