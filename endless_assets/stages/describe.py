"""The describe stage: sample the batch's task descriptions (no Dagster here; defs/descriptions.py
is the asset), each task's cell drawn from the solver's history under the frontier sampler
(draws.py), returning the draw and that history as `task_draws` and `cell_history` rows."""

from __future__ import annotations

import functools
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from endless_assets.generation import GenerationError, Usage
from endless_assets.generation.dedupe import reject_duplicates
from endless_assets.generation.factory import make_generator, task_parallelism
from endless_assets.generation.llm.prompts import PromptSet
from endless_assets.generation.procedural import _code_version as procedural_version
from endless_assets.models import HARNESS_ERROR, OK, REJECTED, Task, task_id_for
from endless_assets.sampling.policy import Draw
from endless_assets.sandbox.image.base_image import base_image_tag
from endless_assets.settings import Settings
from endless_assets.stages.draws import (
    describe_slot,
    draw_history,
    draws_frame,
    history_frame,
    parent_tasks,
    plan_draw,
    sampler_label,
    slot_columns,
    slot_seed,
    why_uniform,
)
from endless_assets.stages.runner import Log, now, resumable, run_parallel
from endless_assets.stages.stage_run import (
    Counts,
    StageResult,
    status_metadata,
    task_markdown,
    timing_metadata,
    usage_metadata,
)
from endless_assets.store.columns import task_columns
from endless_assets.store.lake import Lake

TABLE = "task_descriptions"
_BLANK = ("category", "complexity", "scenario", "family", "parent_task_id", "reference_solution")


@functools.cache
def generator_version() -> str:
    """What writes the describe stage's rows: the procedural families' code and the LLM generator's
    prompts (each row records the one that wrote it, as prompt_version)."""
    return f"{procedural_version()}+{PromptSet.load().version}"


@dataclass
class Description:
    """One slot's task (or, `described` False, a placeholder that keeps the slot in the funnel),
    what it cost, and its status."""

    draft: Task
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0
    status: str = OK
    reason: str = ""
    described: bool = True

    @classmethod
    def failed(
        cls,
        batch: str,
        index: int,
        seed: int,
        reason: str,
        *,
        generator: tuple[str, str, str],
        usage: Usage | None = None,
        seconds: float = 0.0,
        status: str = REJECTED,
        slot: dict[str, Any] | None = None,
    ) -> Description:
        """No usable task for slot `index`: its row says why, which generator (name, model,
        prompt version) failed, and what it still knows of the slot (`slot_columns`)."""
        name, model, version = generator
        placeholder = Task.model_construct(
            batch=batch,
            index=index,
            seed=seed,
            instruction="",
            truth={},
            generator=name,
            generator_model=model,
            prompt_version=version,
            **{**dict.fromkeys(_BLANK, ""), **(slot or {})},
        )
        return cls(placeholder, usage or Usage(), seconds, status, reason, described=False)

    def row(self) -> dict[str, Any]:
        draft = self.draft
        failed = task_id_for(draft.batch, draft.index, "", {"failed": True})
        return {
            "task_id": draft.task_id if self.described else failed,
            "batch": draft.batch,
            "index": draft.index,
            **task_columns(draft),
            "seed": draft.seed,
            "status": self.status,
            "reject_reason": self.reason,
            "duplicate_of": "",
            "requests": self.usage.requests,
            "tokens_in": self.usage.tokens_in,
            "tokens_out": self.usage.tokens_out,
            "seconds": self.seconds,
            "draft": draft.stored_json() if self.described else "",
            "created_at": now(),
        }


@dataclass
class DescribeRun(StageResult):
    """The describe stage's descriptions, and the rows of the draw's two tables."""

    draws: pl.DataFrame = field(default_factory=pl.DataFrame)
    history: pl.DataFrame = field(default_factory=pl.DataFrame)


def run_describe(settings: Settings, lake: Lake, batch: str, *, log: Log) -> DescribeRun:
    """Describe the batch's tasks (journaled per settings and draw); near-duplicates of earlier
    tasks are rejected."""
    generator = make_generator(settings, base_image_tag())
    started = time.monotonic()
    history = draw_history(lake, settings, generator, batch)
    plan = plan_draw(lake, settings, generator, batch, history)
    parents = parent_tasks(lake, plan)
    note = plan.reason if plan is not None else why_uniform(settings, generator, batch)
    if note:  # said once per run, not per task; a warning when the frontier was asked for
        (log.warning if settings.sampling.sampler == "frontier" else log.info)(f"sampler: {note}")
    who = (generator.name, generator.model, generator.version)

    def seed(index: int) -> int:
        return slot_seed(plan, batch, index, settings.run.seed)

    def placeholder(index: int, reason: str, **how: Any) -> dict:
        slot = slot_columns(plan, index)
        return Description.failed(
            batch, index, seed(index), reason, generator=who, slot=slot, **how
        ).row()

    def describe(index: int) -> dict:
        t0 = time.monotonic()
        try:
            draft, usage = describe_slot(generator, plan, batch, index, seed(index), parents)
        except GenerationError as exc:
            return placeholder(index, str(exc), usage=exc.usage, seconds=time.monotonic() - t0)
        return Description(draft, usage, time.monotonic() - t0).row()

    def failed(index: int, exc: BaseException) -> dict:
        return placeholder(index, f"harness: {exc!r}", status=HARNESS_ERROR)

    draw_rows = plan.rows() if plan is not None else None  # another draw's journal: not reused
    resume = resumable(
        lake.data_dir, settings, TABLE, batch, generator, key="index", made_from=draw_rows
    )
    rows = run_parallel(
        list(range(settings.run.tasks)),
        resume.wrap(describe),
        failed,
        log=log,
        workers=task_parallelism(generator, settings),
        label="describe",
    )
    if generator.dedupe_threshold is not None:
        rows = reject_duplicates(rows, lake, generator.dedupe_threshold)
    ok_rows = [r for r in rows if r["status"] == OK]
    metadata = {
        "funnel_step": "describe",
        "generator": generator.name,
        "recovered_from_journal": len(resume.recovered),
        **status_metadata(rows),
        **usage_metadata(rows),
        **timing_metadata([r["seconds"] for r in rows], time.monotonic() - started),
        **generator.run_metadata(),
        **draw_metadata(sampler_label(settings), plan, note),
    }
    if ok_rows:
        metadata["sample_task"] = task_markdown(ok_rows[0])
        metadata["categories"] = Counts(Counter(r["category"] for r in ok_rows), "category")
    return DescribeRun(TABLE, rows, None, metadata, draws_frame(plan), history_frame(history))


def _round(value):
    return round(value, 4) if isinstance(value, float) else value


def draw_metadata(sampler: str, plan: Draw | None, note: str) -> dict[str, Any]:
    """The draw in the run's metadata: its summary, why it is uniform, the tasks per cell."""
    meta: dict[str, Any] = {"sampler": sampler}
    if note:
        meta["sampler_note"] = note
    if plan is None:
        return meta
    meta.update({f"draw_{k}": v for k, v in plan.summary().items() if v is not None})
    meta["draw_cells"] = Counts(Counter(s.cell.id for s in plan.slots), "cell")
    if plan.views:  # what the solver's history window said of each cell it has seen
        seen = pl.DataFrame(
            [
                {"cell": cell.id, **{k: _round(v) for k, v in vars(view).items()}}
                for cell, view in sorted(plan.views.items())
                if view.evidence
            ]
        )
        if len(seen):
            meta["draw_history"] = seen.sort("score", descending=True)
    return meta
