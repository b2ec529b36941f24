"""What a stage costs the machine, measured while it runs; a batch's cost profile and estimate;
its `batch_costs` rows from what its steps measured (defs/costs.py reads those)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import polars as pl

from endless_assets.agent.policies import NoopPolicy, OraclePolicy
from endless_assets.sandbox.engine.usage import engine_cpu_seconds
from endless_assets.sandbox.sandbox import Sandbox
from endless_assets.settings import Settings
from endless_assets.store.cost_record import STAGE_TABLES, Measured, comparison, cost_frame, usage
from endless_assets.store.costs import (
    TABLE,
    Estimate,
    Profile,
    estimate,
    planned_runs,
    read_history,
)
from endless_assets.store.lake import Lake


class StageMeter:
    """Started with a stage: `metadata()` is what it used since: `containers_started`,
    `engine_cpu_seconds` (not for a remote engine), `items_wall_seconds` (inside `items()`, the
    part of the wall time that grows with the batch) and `units_made` (not from a journal)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.urls = [spec.url for spec in sandbox.config.engine_specs]
        self._containers = sandbox.containers_started
        self._cpu = engine_cpu_seconds(self.urls)
        self.items_seconds = 0.0
        self._made: set[str] = set()
        self._lock = threading.Lock()

    def made(self, key: str) -> None:
        """A unit the stage made (rather than took from a journal); once per key."""
        with self._lock:
            self._made.add(key)

    @contextmanager
    def items(self) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.items_seconds += time.monotonic() - started

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "containers_started": self.sandbox.containers_started - self._containers,
            "items_wall_seconds": round(self.items_seconds, 3),
            "units_made": len(self._made),
        }
        cpu = engine_cpu_seconds(self.urls)
        if cpu is not None and self._cpu is not None:
            meta["engine_cpu_seconds"] = round(max(0.0, cpu - self._cpu), 2)
        return meta


def solver_model(settings: Settings) -> str:
    """The model column the solver's rollouts carry."""
    if settings.solver.policy == "chat":
        return settings.solver.model
    return NoopPolicy.model if settings.solver.policy == "noop" else OraclePolicy.model


def cost_profile(settings: Settings) -> Profile:
    """The settings a batch of `settings` costs by."""
    return Profile(
        generator=settings.generator.kind,
        generator_model=settings.generator.model if settings.generator.kind == "llm" else "",
        solver=settings.solver.policy,
        solver_model=solver_model(settings),
        k=settings.solver.attempts,
        soundness=settings.soundness.mode,
        soundness_repeats=settings.soundness.repeats if settings.soundness.mode != "off" else 0,
        auditor_model=settings.soundness.auditor_model if settings.soundness.mode == "full" else "",
        workers=settings.run.workers,
        tasks=settings.run.tasks,
        max_turns=settings.solver.max_turns,
    )


def estimate_for(settings: Settings, lake: Lake, *, batch: str | None = None, before=None):
    """What a batch of `settings` will cost, from the lake's other batches before `before`."""
    runs = planned_runs(settings.run.tasks, settings.run.shard_tasks)
    history = read_history(lake)
    return estimate(history, cost_profile(settings), batch=batch, before=before, runs=runs)


def stage_measures(
    steps: Mapping[str, Sequence[Mapping[str, Any]]], walls: Mapping[str, float]
) -> dict[str, Measured]:
    """Per stage, what its steps' metadata (`steps`) and wall seconds (`walls`) measured."""
    measured = {stage: Measured() for stage in STAGE_TABLES}
    for stage, metas in steps.items():
        for meta in metas:
            if stage == "solver rollouts":
                made = int(meta.get("ran_now") or 0)
            elif stage == "describe":  # (never sharded: its journal holds this batch's rows)
                made = int(meta.get("rows") or 0) - int(meta.get("recovered_from_journal") or 0)
            else:
                made = int(meta.get("units_made") or 0)
            cpu = meta.get("engine_cpu_seconds") if stage != "describe" else 0.0
            containers = int(meta.get("containers_started") or 0)
            measured[stage].add(max(0, made), containers, cpu, meta.get("items_wall_seconds"))
    for stage, seconds in walls.items():
        measured[stage].wall_seconds += seconds
    return measured


def record_costs(
    settings: Settings,
    lake: Lake,
    batch: str,
    frames: dict[str, pl.DataFrame],
    measured: dict[str, Measured],
    *,
    runs: list[str],
    run_seconds: float,
    before: datetime,
) -> dict[str, str]:
    """Write the batch's `batch_costs` rows beside the estimate from the history before `before`;
    both as markdown tables."""
    profile = cost_profile(settings)
    planned = estimate_for(settings, lake, batch=batch, before=before)
    spent = usage(frames, profile)
    now = datetime.now(UTC)
    costs = cost_frame(
        batch, profile, planned, spent, measured, runs=runs, run_seconds=run_seconds, now=now
    )
    lake.write(TABLE, batch, costs)
    return {
        "cost_estimate_vs_actual": markdown(comparison(costs)),
        "cost_estimate_basis": basis_markdown(planned),
    }


def markdown(frame: pl.DataFrame) -> str:
    """A frame as a markdown table (a metadata table cannot hold an empty cell)."""

    def cell(value: Any) -> str:
        if value is None:
            return ""
        return f"{value:,.2f}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.iter_rows()]
    return "\n".join(lines)


def basis_markdown(planned: Estimate) -> str:
    return "\n".join(f"- **{s.stage}**: {s.basis}" for s in planned.stages)
