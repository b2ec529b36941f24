"""Validated tasks per minute for a procedural batch through the real Dagster job.

Runs one batch (default 100 tasks) under the multiprocess executor exactly as `endless run` does,
in a fresh data directory and with a fresh seed salt, so no task image is reused from a previous
run (the base image is). Prints the stage timings from the assets' own metadata, then validated
(kept) tasks per minute over the whole run and over the stage work alone (without Dagster's
per-step process start-up).

    .venv/bin/python bench/pipeline_throughput.py [--tasks 100] [--workers 6]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time

import dagster as dg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--date", default="2026-06-01")
    args = parser.parse_args()

    data_dir = tempfile.mkdtemp(prefix="endless-bench-")
    os.environ["ENDLESS_DATA_DIR"] = data_dir
    from endless_assets.launch import ensure_dagster_home, launch_batch
    from endless_assets.store.catalog import query
    from endless_assets.store.lake import Lake

    ensure_dagster_home()
    overrides = {"tasks": args.tasks, "seed": random.randrange(1 << 30), "workers": args.workers}
    started = time.monotonic()
    result = launch_batch(args.date, overrides, log_level="WARNING")
    wall = time.monotonic() - started
    if not result.success:
        sys.exit(f"run failed: {result.failed_steps}")
    kept = int(query(Lake(data_dir), "select count(*) n from filtered_dataset where kept")["n"][0])

    stage_wall = 0.0
    print(f"batch of {args.tasks} procedural tasks, run {result.run_id}")
    print(f"{'asset':<20} {'wall s':>8} {'tasks/min':>10}")
    with dg.DagsterInstance.get() as instance:
        for asset in (
            "task_descriptions",
            "task_decontamination",
            "task_environments",
            "completion_tests",
            "task_soundness",
            "solver_rollouts",
            "filtered_dataset",
        ):
            event = instance.get_latest_materialization_event(dg.AssetKey(asset))
            meta = event.asset_materialization.metadata if event else {}
            seconds = float(meta["wall_seconds"].value) if "wall_seconds" in meta else 0.0
            rate = meta.get("tasks_per_minute")
            stage_wall += seconds
            print(f"{asset:<20} {seconds:>8.1f} {rate.value if rate else '':>10}")
    print(f"kept (validated) tasks: {kept}/{args.tasks}")
    print(f"whole run:      {wall:7.1f} s  -> {kept / wall * 60:6.1f} validated tasks/min")
    print(
        f"stage work only:{stage_wall:7.1f} s  -> {kept / stage_wall * 60:6.1f} validated tasks/min"
    )


if __name__ == "__main__":
    main()
