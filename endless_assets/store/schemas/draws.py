"""The tables of stage I's draw, declared once with their meanings in sampling/: `task_draws`,
one row per task index with the cell it was drawn from and why (`DRAW_COLUMNS`), and
`cell_history`, the solver's history window the draw read, one row per cell
(`HISTORY_COLUMNS`)."""

from __future__ import annotations

from typing import Any

import pandera.polars as pa
import polars as pl

from endless_assets.sampling.history import HISTORY_COLUMNS
from endless_assets.sampling.policy import DRAW_COLUMNS
from endless_assets.store.schemas.base import Strict, col

# Columns a row may leave empty: the cell's other kind, and what a cold start does not know.
NULLABLE = (
    *("category", "complexity", "family", "level", "k"),
    *("mean_pass_rate", "learnable_prob", "kept_prob", "survival", "signal", "tokens", "score"),
    "uncertainty",
    *("sample", "sampled_pass_rate", "seed"),
)
CHECKS: dict[str, dict[str, Any]] = {
    "index": {"ge": 0},
    "kind": {"isin": ["taxonomy", "family"]},
    "source": {"isin": ["uniform", "floor", "exploit", "explore", "evolve"]},
    "model": {"isin": ["pooled", "per_cell"]},
    "mode": {"isin": ["cold_start", "degraded", "targeting"]},
    "level": {"ge": 1, "le": 6},
    "evidence": {"ge": 0},
    "learnable_seen": {"ge": 0},
    "history_batches": {"ge": 0},
}


def _model(
    name: str, doc: str, columns: dict[str, tuple[pl.DataType, str]]
) -> type[pa.DataFrameModel]:
    config = type("Config", (Strict,), {"name": name})
    return type(
        "".join(part.title() for part in name.split("_")),
        (pa.DataFrameModel,),
        {
            "__module__": __name__,
            "__doc__": doc,
            "__annotations__": {n: type(dtype) for n, (dtype, _) in columns.items()},
            **{
                n: col(text, nullable=n in NULLABLE, **CHECKS.get(n, {}))
                for n, (_, text) in columns.items()
            },
            "Config": config,
        },
    )


TaskDraws = _model(
    "task_draws", "Stage I's draw: per task index, its cell, the draw's mode and why.", DRAW_COLUMNS
)
CellHistory = _model(
    "cell_history",
    "The history a frontier draw read: per cell, what its solver made of the batches before.",
    HISTORY_COLUMNS,
)
