"""What distinguishes the two families of per-task assets: generated daily batches and
imported batches. The stage assets are built by factories from one of these specs, so both
families run the same code and write the same tables (the IO manager names a table by the last
part of the asset key; the partition key is the batch).

`StageSpec.asset` and `StageRun` are the skeleton the per-task stages (II, III, soundness)
share; each stage's module keeps what it checks: what enters, its work on one task, its
invariants and its own metadata."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
import polars as pl

from endless_assets.defs.columns import table_asset
from endless_assets.defs.common import (
    invariants,
    invariants_check_spec,
    resumable,
    run_parallel,
    schema_check_spec,
    status_metadata,
    timing_metadata,
    validate,
)
from endless_assets.defs.partitions import batches, imported_batches
from endless_assets.defs.resources import PipelineSettings
from endless_assets.generation import TaskGenerator
from endless_assets.generation.carried import CarriedGenerator
from endless_assets.generation.factory import make_generator, task_parallelism
from endless_assets.models import HARNESS_ERROR, Task
from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.settings import Settings
from endless_assets.stages.costs import StageMeter
from endless_assets.store.columns import frame


@dataclass(frozen=True)
class StageSpec:
    prefix: tuple[str, ...]
    partitions_def: dg.PartitionsDefinition
    group_name: str
    generator: Callable[[Settings, str], TaskGenerator]

    def key(self, table: str) -> dg.AssetKey:
        return dg.AssetKey([*self.prefix, table])

    def ins(self, *tables: str) -> dict[str, dg.AssetIn]:
        return {table: dg.AssetIn(key=self.key(table)) for table in tables}

    def asset(
        self,
        table: str,
        inputs: Sequence[str],
        *,
        invariant: str,
        description: str,
        docker: bool = True,
    ) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
        """The decorator of a per-task stage asset: its table in the lake, partitioned by batch,
        with its blocking schema and invariants checks; one that works in Docker (`docker`)
        takes a slot of the docker pool."""
        return dg.asset(
            key=self.key(table),
            ins=self.ins(*inputs),
            partitions_def=self.partitions_def,
            group_name=self.group_name,
            kinds={"docker" if docker else "python", "parquet"},
            io_manager_key="lake_io_manager",
            **({"pool": "docker"} if docker else {}),
            check_specs=[
                schema_check_spec(table, self.prefix),
                invariants_check_spec(table, invariant, self.prefix),
            ],
            description=description,
            **table_asset(table),
        )


GENERATED = StageSpec((), batches, "pipeline", make_generator)
IMPORTED = StageSpec(
    ("imported",), imported_batches, "imported", lambda settings, base: CarriedGenerator()
)


class StageRun:
    """One materialization of a per-task stage: its settings, sandbox and generator, its tasks
    worked on in parallel and journaled, and the table it returns with its checks."""

    def __init__(
        self,
        context: dg.AssetExecutionContext,
        pipeline: PipelineSettings,
        spec: StageSpec,
        table: str,
    ) -> None:
        self.context, self.pipeline, self.spec, self.table = context, pipeline, spec, table
        self.settings = pipeline.resolve()
        self.sandbox = pipeline.sandbox()
        self.generator = spec.generator(self.settings, self.sandbox.base.tag)
        self.started = time.monotonic()
        self.meter = StageMeter(self.sandbox)
        self.entered = 0
        self.recovered = 0
        self.schema_check: dg.AssetCheckResult | None = None

    def image(self, task: Task) -> str:
        """The tag of the task's image as stage II built it (a cache hit, or rebuilt)."""
        build = self.sandbox.build(task.dockerfile or "", task.context_files)
        if not build.ok:
            raise SandboxError(f"the stage II image no longer builds: {build.log[-500:]}")
        return build.tag

    def each(
        self,
        tasks: Sequence[Task],
        work: Callable[[Task], Any],
        row: Callable[[Task, Any], dict[str, Any]],
        outcome: Callable[..., Any],
        *,
        label: str,
        workers: int | None = None,
    ) -> list[dict[str, Any]]:
        """Each task's `row(task, work(task))`, `workers` tasks at a time (default: as many as
        the generator asks for); rows a run under the same settings finished already come from
        the journal. An exception in one task becomes its `outcome(task_id, HARNESS_ERROR, ...)`
        row: one bad task never loses the batch."""

        def failed(task: Task, exc: BaseException) -> dict[str, Any]:
            return row(
                task, outcome(task.task_id, HARNESS_ERROR, reject_reason=f"harness: {exc!r}")
            )

        resume = resumable(
            self.pipeline, self.settings, self.table, self.context.partition_key, self.generator
        )
        self.entered, self.recovered = len(tasks), len(resume.recovered)

        def made(task: Task) -> dict[str, Any]:
            self.meter.made(task.task_id)
            return row(task, work(task))

        with self.meter.items():
            return run_parallel(
                self.context,
                tasks,
                resume.wrap(made),
                failed,
                workers=task_parallelism(self.generator, self.settings)
                if workers is None
                else workers,
                label=label,
                recover=self.sandbox.recover,
            )

    def frame(self, rows: list[dict[str, Any]]) -> pl.DataFrame:
        """The rows as the stage's table, validated against its schema: an invalid table fails
        the step (nothing is written) before anything else is made of it."""
        table = frame(self.table, rows)
        self.schema_check = validate(self.table, table, self.spec.prefix, context=self.context)
        return table

    def result(
        self,
        table: pl.DataFrame,
        violations: list[str],
        *,
        funnel_step: str,
        metadata: dict[str, Any],
    ) -> dg.MaterializeResult:
        """The table with its two checks, and the stage's metadata after the common figures."""
        assert self.schema_check is not None, "frame() validates the table first"
        seconds = table["seconds"].to_list() if len(table) else []
        return dg.MaterializeResult(
            value=table,
            metadata={
                "funnel_step": funnel_step,
                "entered": self.entered,
                "recovered_from_journal": self.recovered,
                **status_metadata(table),
                **metadata,
                **self.meter.metadata(),
                **timing_metadata(seconds, time.monotonic() - self.started),
            },
            check_results=[
                self.schema_check,
                invariants(self.table, violations, self.spec.prefix),
            ],
        )
