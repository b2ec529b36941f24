"""Drift re-validation: does a kept task still validate on an image rebuilt
from its Dockerfile today?

A task kept weeks ago may no longer hold: a package its Dockerfile installs moved on, the base
image was rebuilt, a download changed. Reusing the image by its content-addressed tag
(sandbox/image/images.py) would never notice, and neither would Docker's layer cache. So the
Dockerfile is rebuilt with `ARG ENDLESS_REBUILD=<nonce>` after each FROM line: a new tag, and
every step after FROM misses the layer cache, so every RUN step runs again (the ARG is in each
RUN step's environment, and its text differs from any earlier build's). Then the repeated
controls run on it (`check_soundness(..., probes=False)`): the reference must still pass every
run (when it passed when the task was kept) and the do-nothing control still fail every run.
The throwaway image is removed afterwards. No Dagster here (defs/drift.py is the asset).
"""

from __future__ import annotations

import re
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

import polars as pl

from endless_assets.models import HARNESS_ERROR, OK, Task
from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.sandbox.sandbox import Sandbox
from endless_assets.settings import Settings
from endless_assets.stages.runner import Log, now, run_parallel
from endless_assets.stages.soundness.stage import check_soundness
from endless_assets.stages.stage_run import Counts, Markdown, StageResult, timing_metadata

REBUILD_ARG = "ENDLESS_REBUILD"
VALID, DRIFTED = "valid", "drifted"
_FROM = re.compile(r"^\s*FROM\s", re.IGNORECASE)


def fresh_dockerfile(dockerfile: str, nonce: str) -> str:
    """`dockerfile` with `ARG ENDLESS_REBUILD=<nonce>` after each FROM instruction (after its
    continuation lines): built, it shares no cached layer past FROM with any other build."""
    out: list[str] = []
    in_from = continued = False  # inside a FROM instruction / any continued instruction
    for line in dockerfile.splitlines():
        out.append(line)
        if not continued and _FROM.match(line):
            in_from = True
        if line.strip().startswith("#") and continued:
            continue  # a comment inside a continued instruction does not end it
        continued = line.rstrip().endswith("\\")
        if in_from and not continued:
            out.append(f"ARG {REBUILD_ARG}={nonce}")
            in_from = False
    return "\n".join(out) + "\n"


@dataclass
class DriftOutcome:
    task_id: str
    status: str  # valid | drifted | harness_error
    reason: str = ""
    image_tag: str = ""  # the image the task was kept with
    rebuilt_image_id: str = ""
    base_image_id: str = ""
    repeats: int = 0
    reference_required: bool = True
    reference_passes: int = 0
    noop_passes: int = 0
    build_seconds: float = 0.0
    seconds: float = 0.0
    cpu_seconds: float | None = None
    probes: str = "[]"

    def row(self, batch: str) -> dict[str, Any]:
        """The task's `drift_revalidation` row in `batch`."""
        return {**self.__dict__, "batch": batch, "created_at": now()}


def run_drift(
    settings: Settings,
    sandbox: Sandbox,
    kept: pl.DataFrame,
    soundness: pl.DataFrame,
    *,
    log: Log,
    network: bool | None = None,
) -> StageResult:
    """Re-validate the `filtered_dataset` rows of `kept` tasks on freshly rebuilt images.
    `network`: may RUN steps reach the network (None: as the build stage built them)."""
    started = time.monotonic()
    # The reference must pass again where it passed every run when the task was kept.
    passed = {
        r["task_id"]: bool(r["reference_runs"]) and r["reference_passes"] == r["reference_runs"]
        for r in soundness.to_dicts()
    }
    rows = kept.to_dicts()
    log.info(f"{len(rows)} kept tasks to re-validate on freshly rebuilt images")

    def work(row: dict) -> dict:
        task = Task.model_validate_json(row["task"])
        required = passed.get(task.task_id, bool(task.reference_solution.strip()))
        outcome = revalidate(
            task,
            sandbox,
            image_tag=row["image_tag"],
            repeats=settings.soundness.repeats,
            reference_required=required,
            network=task.generator != "procedural" if network is None else network,
        )
        return outcome.row(row["batch"])

    def failed(row: dict, exc: BaseException) -> dict:
        outcome = DriftOutcome(row["task_id"], HARNESS_ERROR, reason=f"harness: {exc!r}")
        return outcome.row(row["batch"])

    rows = run_parallel(
        rows,
        work,
        failed,
        log=log,
        workers=settings.run.workers,
        label="drift",
        recover=sandbox.recover,
    )
    statuses = Counter(r["status"] for r in rows)
    reasons = Counter(r["reason"].split(": ", 1)[0] for r in rows if r["reason"])
    drifted = [f"- {r['task_id']}: {r['reason'][:200]}" for r in rows if r["status"] == DRIFTED]
    metadata: dict[str, Any] = {
        "checked": len(rows),
        "still_valid": statuses.get(VALID, 0),
        "drifted": statuses.get(DRIFTED, 0),
        "harness_errors": statuses.get(HARNESS_ERROR, 0),
        "base_image": sandbox.base.tag,
        **timing_metadata([r["seconds"] for r in rows], time.monotonic() - started),
    }
    if reasons:
        metadata["reasons"] = Counts(reasons, "reason")
    if drifted:
        metadata["drifted_tasks"] = Markdown("\n".join(drifted[:50]))
    return StageResult("drift_revalidation", rows, metadata=metadata)


def revalidate(
    task: Task,
    sandbox: Sandbox,
    *,
    image_tag: str = "",
    repeats: int = 3,
    reference_required: bool = True,
    network: bool = False,
) -> DriftOutcome:
    """Rebuild `task`'s image from its Dockerfile without any cached layer and run the repeated
    controls on it. A build that fails now is drift (`build_failed: ...`), as is a control that
    no longer holds; an engine failure is a harness error. `network`: may RUN steps reach the
    network (as when the task was built; the sandbox's configuration still decides)."""
    started = time.monotonic()
    outcome = DriftOutcome(
        task.task_id,
        HARNESS_ERROR,
        image_tag=image_tag,
        repeats=max(1, repeats),
        reference_required=reference_required,
    )
    dockerfile = fresh_dockerfile(task.dockerfile or "", uuid.uuid4().hex[:16])
    try:
        outcome.base_image_id = sandbox.base.image_id
        build = sandbox.build(
            dockerfile, task.context_files, network=network, services=task.services
        )
        outcome.build_seconds = build.seconds
        if not build.ok:
            outcome.status, outcome.reason = DRIFTED, f"build_failed: {build.log[-1500:]}"
            return _done(outcome, started)
        outcome.rebuilt_image_id = build.image_id
        try:
            checked = check_soundness(
                task,
                build.tag,
                sandbox,
                repeats=repeats,
                reference_required=reference_required,
                probes=False,
            )
        finally:  # the rebuilt image is of no further use: its tag is unique to this check
            sandbox.remove_image(build.tag)
    except SandboxError as exc:
        outcome.reason = f"harness: {exc}"
        return _done(outcome, started)
    outcome.reference_passes, outcome.noop_passes = checked.reference_passes, checked.noop_passes
    outcome.cpu_seconds, outcome.probes = checked.cpu_seconds, checked.probes_json()
    if checked.status == OK:
        outcome.status = VALID
    else:
        outcome.status = HARNESS_ERROR if checked.status == HARNESS_ERROR else DRIFTED
        outcome.reason = checked.reject_reason
    return _done(outcome, started)


def _done(outcome: DriftOutcome, started: float) -> DriftOutcome:
    outcome.seconds = time.monotonic() - started
    return outcome
