"""What distinguishes the two families of per-task assets: generated daily batches and
imported batches. The stage assets are built by factories from one of these specs, so both
families run the same code and write the same tables (the IO manager names a table by the last
part of the asset key; the partition key is the batch).

`StageSpec.asset` is the decorator the stage assets share and `StageSpec.run` starts the
`StageRun` of a per-task stage (stages/stage_run.py); each stage's module in stages/ keeps what
it checks: what enters, its work on one task, its invariants and its metadata."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from endless_assets.defs.columns import table_asset
from endless_assets.defs.common import schema_check_spec
from endless_assets.defs.partitions import batches, imported_batches
from endless_assets.defs.resources import PipelineSettings
from endless_assets.stages.stage_run import StageRun


@dataclass(frozen=True)
class StageSpec:
    prefix: tuple[str, ...]
    partitions_def: dg.PartitionsDefinition
    group_name: str
    imported: bool = False  # its tasks arrive complete: nothing is generated or repaired

    def key(self, table: str) -> dg.AssetKey:
        return dg.AssetKey([*self.prefix, table])

    def ins(self, *tables: str) -> dict[str, dg.AssetIn]:
        return {table: dg.AssetIn(key=self.key(table)) for table in tables}

    def run(
        self, context: dg.AssetExecutionContext, pipeline: PipelineSettings, table: str
    ) -> StageRun:
        """The stage's run over the step's batch, its progress in the step's log."""
        return StageRun(
            pipeline.resolve(),
            pipeline.sandbox(),
            pipeline.lake(),
            table,
            context.partition_key,
            log=context.log,
            imported=self.imported,
        )

    def asset(
        self,
        table: str,
        inputs: Sequence[str],
        *,
        description: str,
        invariant: str | None = None,
        docker: bool = True,
        group_name: str | None = None,
        code_version: str | None = None,
    ) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
        """The decorator of a stage asset: its table in the lake, partitioned by batch, with its
        blocking schema check and, when it states an `invariant`, its invariants check; one that
        works in Docker (`docker`) takes a slot of the docker pool."""
        checks = [schema_check_spec(table, self.prefix)]
        if invariant is not None:
            checks.append(schema_check_spec(table, self.prefix, invariant=invariant))
        return dg.asset(
            key=self.key(table),
            ins=self.ins(*inputs),
            partitions_def=self.partitions_def,
            group_name=group_name or self.group_name,
            kinds={"docker" if docker else "python", "parquet"},
            io_manager_key="lake_io_manager",
            **({"pool": "docker"} if docker else {}),
            check_specs=checks,
            description=description,
            **table_asset(table, code_version=code_version),
        )


GENERATED = StageSpec((), batches, "pipeline")
IMPORTED = StageSpec(("imported",), imported_batches, "imported", imported=True)
