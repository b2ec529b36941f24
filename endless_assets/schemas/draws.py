"""The `task_draws` table: stage I's draw, one row per task index, with the cell it was drawn
from and why (sampling/policy.py's `DRAW_COLUMNS`, declared there once with their meanings)."""

from __future__ import annotations

import pandera.polars as pa

from endless_assets.sampling.policy import DRAW_COLUMNS
from endless_assets.schemas.base import Strict, col

# Columns a row may leave empty: the cell's other kind, and what a cold start does not know.
NULLABLE = (
    *("category", "complexity", "family", "level", "k"),
    *("mean_pass_rate", "learnable_prob", "survival", "score"),
    *("sample", "sampled_pass_rate", "seed"),
)
CHECKS = {
    "index": {"ge": 0},
    "kind": {"isin": ["taxonomy", "family"]},
    "source": {"isin": ["uniform", "floor", "exploit", "evolve"]},
    "mode": {"isin": ["cold_start", "degraded", "targeting"]},
    "level": {"ge": 1, "le": 6},
    "evidence": {"ge": 0},
    "learnable_seen": {"ge": 0},
    "history_batches": {"ge": 0},
}


class _Config(Strict):
    name = "task_draws"


TaskDraws: type[pa.DataFrameModel] = type(
    "TaskDraws",
    (pa.DataFrameModel,),
    {
        "__module__": __name__,
        "__doc__": "Stage I's draw: per task index, its cell, the draw's mode and why.",
        "__annotations__": {name: type(dtype) for name, (dtype, _) in DRAW_COLUMNS.items()},
        **{
            name: col(text, nullable=name in NULLABLE, **CHECKS.get(name, {}))
            for name, (_, text) in DRAW_COLUMNS.items()
        },
        "Config": _Config,
    },
)
