"""What distinguishes the two families of per-task assets: generated daily batches and
imported batches. The stage assets are built by factories from one of these specs, so both
families run the same code and write the same tables (the IO manager names a table by the last
part of the asset key; the partition key is the batch)."""

from collections.abc import Callable
from dataclasses import dataclass

import dagster as dg

from endless_assets.defs.partitions import batches, imported_batches
from endless_assets.generation import TaskGenerator
from endless_assets.generation.carried import CarriedGenerator
from endless_assets.generation.factory import make_generator
from endless_assets.settings import Settings


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


GENERATED = StageSpec((), batches, "pipeline", make_generator)
IMPORTED = StageSpec(
    ("imported",), imported_batches, "imported", lambda settings, base: CarriedGenerator()
)
