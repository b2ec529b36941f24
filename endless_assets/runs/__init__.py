"""Dagster runs: the process executing each, runs whose process is gone, the executor and the
run launcher that know it (Dagster wiring, like defs/)."""
