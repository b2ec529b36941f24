"""Tasks per minute: Harbor's oracle agent under Harbor's own harness vs our validation, on the
same tasks.

Materializes a procedural batch (default 13 tasks: one per family, a fresh seed salt), exports it
in Harbor's format, then times, on this
machine and cold (each side's images of these tasks removed and the build cache pruned first;
base and runner images kept):
(a) `harbor run -a oracle -e docker -n P` in the runner of scripts/harbor-runner.sh (per task:
    compose build and up, solve, verify, down), its wall clock, and Harbor's own per-trial phases;
(b) our validation of the same directories imported as a batch: the imported task_descriptions,
    task_environments (build, initial test must fail) and completion_tests (do-nothing control,
    reference must pass) steps with `workers=P`, by their Dagster step durations and the whole
    materialize wall.
Both share this machine's cores; Harbor's scores and our verdicts are printed, not asserted.
Harbor 0.25 names a trial's image `<trial>__env-main` and removes it when the trial ends.

    .venv/bin/python bench/validation_vs_harbor.py [--tasks 13] [--parallel 4]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path

import dagster as dg

import endless_assets.definitions as definitions
from endless_assets.defs.imports import IMPORT_OP, IMPORTED_ASSETS
from endless_assets.defs.io_manager import ParquetLakeIOManager
from endless_assets.defs.partitions import imported_batches
from endless_assets.defs.resources import PipelineSettings
from endless_assets.interop import export_dataset
from endless_assets.store.catalog import query
from endless_assets.store.lake import Lake

RUNNER = Path(__file__).resolve().parents[1] / "scripts" / "harbor-runner.sh"
ASSETS = [
    "base_image",
    "task_descriptions",
    "task_decontamination",
    "task_environments",
    "completion_tests",
]
ASSETS += ["task_soundness", "solver_rollouts", "filtered_dataset"]
IMPORTED = "harbor-bench"
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
PHASES = ("trial", "environment_setup", "agent_execution", "verifier")
iso = datetime.fromisoformat
KEEP = ("endless-base", "endless-rootfs", "endless-harbor-")  # never removed


def docker(*args: str) -> list[str]:
    out = subprocess.run(["docker", *args], capture_output=True, text=True, check=False).stdout
    return out.split()


def remove_images(refs: set[str]) -> int:
    """Remove these images (tags or ids) and prune the build cache; returns how many went."""
    removed = sum(1 for r in sorted(refs) if not r.startswith(KEEP) and docker("rmi", "-f", r))
    docker("builder", "prune", "-af")
    return removed


def harbor_images(task_ids: list[str]) -> set[str]:
    listed = docker("images", "--format", "{{.Repository}}:{{.Tag}}")
    return {ref for ref in listed if ref.startswith(tuple(f"{t}__" for t in task_ids))}


def our_images(source_tags: set[str], data_dir: Path | None = None) -> set[str]:
    """The source batch's task images and, once our validation ran, the ones it built (the
    same Dockerfiles, so normally the same tags)."""
    if data_dir is None or not (data_dir / "lake").exists():
        return set(source_tags)
    tags = query(Lake(data_dir), "select image_tag from task_environments where image_tag <> ''")
    return set(source_tags) | set(tags["image_tag"])


def produce(work: Path, tasks: int, date: str) -> set[str]:
    """The batch, exported to work/tasks; returns the tags of its (our) task images."""
    data_dir = work / "source"
    seed = random.randrange(1 << 30)  # fresh tasks: no image of them can be cached
    settings = PipelineSettings(data_dir=str(data_dir), tasks=tasks, soundness="off", seed=seed)
    io = ParquetLakeIOManager(data_dir=str(data_dir))
    result = dg.materialize(
        [getattr(definitions, name) for name in ASSETS],
        partition_key=date,
        instance=dg.DagsterInstance.ephemeral(),
        resources={"pipeline": settings, "lake_io_manager": io},
        run_config=QUIET,
    )
    if not result.success:
        raise SystemExit("materializing the procedural batch failed")
    export_dataset(Lake(data_dir), "harbor", work / "tasks")
    tags = query(Lake(data_dir), "select image_tag from task_environments where image_tag <> ''")
    return set(tags["image_tag"])


def check_bridge(when: str) -> None:
    if not Path("/sys/class/net/docker0").exists():  # (a dockerd with --bridge=none deletes it)
        print(f"warning: no docker0 bridge {when} Harbor's run: RUN steps of its builds fail")


def run_harbor(work: Path, task_ids: list[str], parallel: int) -> tuple[float, dict]:
    removed = remove_images(harbor_images(task_ids))
    print(f"harbor: removed {removed} images of these tasks, pruned the build cache")
    check_bridge("before")
    started = time.monotonic()
    subprocess.run([str(RUNNER), str(work), "harbor", "--version"], capture_output=True)
    startup = time.monotonic() - started
    command = ["harbor", "run", "-p", str(work / "tasks"), "-a", "oracle", "-e", "docker"]
    command += ["-o", str(work / "jobs"), "--job-name", "oracle", "-n", str(parallel), "-y", "-q"]
    started = time.monotonic()
    proc = subprocess.run([str(RUNNER), str(work), *command], capture_output=True, text=True)
    wall = time.monotonic() - started
    check_bridge("after")
    if proc.returncode:
        print(f"harbor run exited {proc.returncode}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    result = json.loads((work / "jobs" / "oracle" / "result.json").read_text())
    (evaluation,) = result["stats"]["evals"].values()
    phases = dict.fromkeys(PHASES, 0.0)
    for path in (work / "jobs" / "oracle").glob("*/result.json"):
        trial = json.loads(path.read_text())
        for phase in PHASES:
            span = trial if phase == "trial" else trial.get(phase) or {}
            if span.get("started_at") and span.get("finished_at"):
                took = iso(span["finished_at"]) - iso(span["started_at"])
                phases[phase] += took.total_seconds()
    return wall, {
        "trials": result["n_total_trials"],
        "errors": evaluation["n_errors"],
        "mean": evaluation["metrics"][0]["mean"] if evaluation["metrics"] else None,
        "exceptions": {k: len(v) for k, v in evaluation.get("exception_stats", {}).items()},
        "phases": phases,
        "startup": startup,
    }


def run_ours(work: Path, parallel: int, source_tags: set[str]) -> tuple[float, dict, int]:
    data_dir = work / "ours"
    removed = remove_images(our_images(source_tags))
    print(f"ours: removed {removed} endless-task images of these tasks, pruned the build cache")
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(imported_batches.name, [IMPORTED])
    config = {"source_dir": str(work / "tasks"), "format": "harbor"}
    started = time.monotonic()
    result = dg.materialize(
        IMPORTED_ASSETS[:3],  # task_descriptions, task_environments, completion_tests
        partition_key=IMPORTED,
        instance=instance,
        resources={
            "pipeline": PipelineSettings(data_dir=str(data_dir), workers=parallel, soundness="off"),
            "lake_io_manager": ParquetLakeIOManager(data_dir=str(data_dir)),
        },
        run_config={**QUIET, "ops": {IMPORT_OP: {"config": config}}},
        raise_on_error=False,
    )
    wall = time.monotonic() - started
    if not result.success:
        print("warning: our run failed")
    starts: dict[str, float] = {}
    steps: dict[str, float] = {}  # as in the Dagster UI: STEP_START to STEP_SUCCESS
    for event in instance.all_logs(result.run_id):
        d = event.dagster_event
        if d is not None and d.event_type_value == "STEP_START":
            starts[d.step_key] = event.timestamp
        if d is not None and d.event_type_value == "STEP_SUCCESS":
            steps[d.step_key] = event.timestamp - starts[d.step_key]
    rows = query(Lake(data_dir), "select status, reject_reason from completion_tests")
    passed = sum(1 for status, reason in rows.iter_rows() if status == "ok" and not reason)
    return wall, steps, passed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=13)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--date", default="2026-09-01")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="endless-vs-harbor-", dir="/tmp"))
    started = time.monotonic()
    source_tags = produce(work, args.tasks, args.date)
    task_ids = sorted(d.name for d in (work / "tasks").iterdir() if d.is_dir())
    tasks = len(task_ids)
    print(f"{tasks} tasks exported to {work / 'tasks'} in {time.monotonic() - started:.1f} s")

    harbor_wall, harbor = run_harbor(work, task_ids, args.parallel)
    ours_wall, steps, passed = run_ours(work, args.parallel, source_tags)
    steps_wall = sum(steps.values())
    left = remove_images(harbor_images(task_ids) | our_images(source_tags, work / "ours"))
    print(f"afterwards: removed {left} task images (Harbor's and ours)")

    def rate(took: float) -> float:
        return tasks / took * 60 if took else 0.0

    cores = os.cpu_count()
    print(f"\n{tasks} tasks, parallelism {args.parallel}, both on this machine's {cores} cores")
    print(
        f"harbor oracle: {harbor_wall:7.1f} s -> {rate(harbor_wall):6.1f} tasks/min "
        f"({harbor['trials']} trials, {harbor['errors']} errors, mean reward {harbor['mean']})"
    )
    if harbor["exceptions"]:
        print(f"  harbor trial exceptions: {harbor['exceptions']}")
    print(f"  harbor start-up (runner container + `harbor --version`): {harbor['startup']:.1f} s")
    phases = harbor["phases"]
    phases["other (start, teardown)"] = phases["trial"] - sum(phases[p] for p in PHASES[1:])
    summed = ", ".join(f"{k} {v:.1f}" for k, v in phases.items())
    print(f"  harbor phases summed over trials (s): {summed}")
    for step, took in steps.items():
        print(f"  ours {step:<32} {took:7.1f} s")
    print(f"ours, steps:   {steps_wall:7.1f} s -> {rate(steps_wall):6.1f} tasks/min")
    print(f"ours, whole:   {ours_wall:7.1f} s -> {rate(ours_wall):6.1f} tasks/min")
    print(f"passed our validation: {passed}/{tasks}")
    print(
        f"ratio ours/harbor: {rate(steps_wall) / rate(harbor_wall):.2f}x (steps), "
        f"{rate(ours_wall) / rate(harbor_wall):.2f}x (whole run)"
    )


if __name__ == "__main__":
    main()
