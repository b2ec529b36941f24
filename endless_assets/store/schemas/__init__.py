"""The table contract: one pandera model per table (polars backend), each column described.

Each stage asset validates its output against its model before writing, and reports the result
as a blocking asset check; the Dagster asset definitions declare their columns from it
(defs/columns.py). `TABLES` maps table names to models; the catalog uses it to create typed empty
views for tables that have no data yet.
"""

from __future__ import annotations

import pandera.polars as pa
import polars as pl

from endless_assets.store.schemas.base import DRIFT_STATUSES, STATUSES, TERMINATIONS
from endless_assets.store.schemas.checks import ContaminationRecheck, TaskDecontamination
from endless_assets.store.schemas.costs import BatchCosts
from endless_assets.store.schemas.draws import CellBatches, CellHistory, TaskDraws
from endless_assets.store.schemas.outcomes import (
    DriftRevalidation,
    FilteredDataset,
    SolverRollouts,
    TaskSoundness,
)
from endless_assets.store.schemas.served import ServedEpisodes
from endless_assets.store.schemas.tasks import CompletionTests, TaskDescriptions, TaskEnvironments

__all__ = [
    "DRIFT_STATUSES",
    "STATUSES",
    "TABLES",
    "TERMINATIONS",
    "BatchCosts",
    "CellBatches",
    "CellHistory",
    "CompletionTests",
    "ContaminationRecheck",
    "DriftRevalidation",
    "FilteredDataset",
    "ServedEpisodes",
    "SolverRollouts",
    "TaskDecontamination",
    "TaskDescriptions",
    "TaskDraws",
    "TaskEnvironments",
    "TaskSoundness",
    "empty_frame",
    "polars_schema",
]

TABLES: dict[str, type[pa.DataFrameModel]] = {
    "task_descriptions": TaskDescriptions,
    "task_decontamination": TaskDecontamination,
    "task_environments": TaskEnvironments,
    "completion_tests": CompletionTests,
    "task_soundness": TaskSoundness,
    "solver_rollouts": SolverRollouts,
    "filtered_dataset": FilteredDataset,
    "drift_revalidation": DriftRevalidation,
    "served_episodes": ServedEpisodes,
    "contamination_recheck": ContaminationRecheck,
    "task_draws": TaskDraws,
    "cell_history": CellHistory,
    "batch_costs": BatchCosts,
}


def polars_schema(table: str | type[pa.DataFrameModel]) -> pl.Schema:
    """The polars schema of a table (by name, or its model), in declared column order."""
    model = TABLES[table] if isinstance(table, str) else table
    columns = model.to_schema().columns
    return pl.Schema({name: col.dtype.type for name, col in columns.items()})


def empty_frame(table: str | type[pa.DataFrameModel]) -> pl.DataFrame:
    return pl.DataFrame(schema=polars_schema(table))
