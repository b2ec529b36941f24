"""The history of cells: per cell and solver, what the daily batches before a given batch
described, scored and kept, computed from the lake's tables."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import duckdb
import polars as pl

from endless_assets.sampling.cells import Cell
from endless_assets.sampling.measures import task_costs
from endless_assets.store.frontier_views import cell_batches_sql
from endless_assets.store.schemas import polars_schema
from endless_assets.store.schemas.draws import CellBatches, Cells

if TYPE_CHECKING:
    from endless_assets.store.lake import Lake

DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")  # a daily batch key; imported batches have names
DEFAULT_WINDOW = 14

TOKENS = ("tokens", "rollout_tokens")
_TOKENS = ("tokens_in", "tokens_out")
CELL_IDS = list(polars_schema(Cells))


def task_cells(descriptions: pl.DataFrame) -> pl.DataFrame:
    """task_id, batch, status and the cell columns of every task with a cell (procedural tasks
    whose truth records a level 1-6, LLM-written tasks; not imported or unleveled ones)."""
    level = pl.col("truth").str.json_path_match("$.level").cast(pl.Int64, strict=False)
    family = (pl.col("generator") == "procedural") & level.is_between(1, 6)
    taxonomy = pl.col("generator") == "llm"
    kind = pl.when(family).then(pl.lit("family")).when(taxonomy).then(pl.lit("taxonomy"))
    return (
        descriptions.select(
            "task_id",
            "batch",
            "status",
            kind.alias("kind"),
            pl.when(taxonomy & ~family).then("category").alias("category"),
            pl.when(taxonomy & ~family).then("complexity").alias("complexity"),
            pl.when(family).then("family").alias("family"),
            pl.when(family).then(level).alias("level"),
        )
        .filter(pl.col("kind").is_not_null())
        .with_columns(
            cell=pl.concat_str(
                "kind",
                pl.coalesce("category", "family"),
                pl.coalesce("complexity", pl.col("level").cast(pl.Utf8)),
                separator=":",
            )
        )
    )


def cell_batches(
    descriptions: pl.DataFrame,
    rollouts: pl.DataFrame,
    filtered: pl.DataFrame,
    costs: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """One row per batch, solver and cell (`CellBatches`): the `cell_batches` view's query over
    the three tables' frames, with the tokens making each task cost (`costs`, as `task_costs`
    gives; none: 0). `History.from_cell_batches` sums the window a draw reads."""
    tokens = {name: pl.lit(None, pl.Int64) for name in _TOKENS if name not in rollouts.columns}
    if costs is None:
        costs = pl.DataFrame(schema={"task_id": pl.Utf8, "tokens": pl.Int64})
    with duckdb.connect() as db:
        db.register("task_descriptions", descriptions.to_arrow())
        db.register("solver_rollouts", rollouts.with_columns(**tokens).to_arrow())
        db.register("filtered_dataset", filtered.to_arrow())
        db.register("costs", costs.to_arrow())
        frame = db.sql(
            cell_batches_sql("select task_id, sum(tokens) as tokens from costs group by all")
        ).pl()
    return frame.cast(dict(polars_schema(CellBatches)))


@dataclass(frozen=True)
class CellHistory:
    """One cell's counts over a window (see `Counts`), with its per-task outcomes."""

    cell: Cell
    generated: int = 0
    described: int = 0
    reached: int = 0
    scored: int = 0
    kept: int = 0
    tokens: int = 0
    rollout_tokens: int = 0
    outcomes: Mapping[tuple[int, int], int] = field(default_factory=dict)

    @property
    def learnable(self) -> int:
        return sum(t for (s, n), t in self.outcomes.items() if 0 < s < n)

    @property
    def all_passed(self) -> int:
        return sum(t for (s, n), t in self.outcomes.items() if s == n)

    @property
    def all_failed(self) -> int:
        return sum(t for (s, _), t in self.outcomes.items() if s == 0)


@dataclass(frozen=True)
class History:
    """Per cell, what one solver made of the tasks of the `batches` strictly before `before`,
    and the last batch before `before` (in the window or earlier) that drew it (`last_drawn`)."""

    before: str
    solver: str = ""
    batches: tuple[str, ...] = ()
    cells: Mapping[Cell, CellHistory] = field(default_factory=dict)
    last_drawn: Mapping[Cell, str] = field(default_factory=dict)

    def get(self, cell: Cell) -> CellHistory:
        return self.cells.get(cell) or CellHistory(cell)

    def scored(self, cells: Iterable[Cell] | None = None) -> int:
        return sum(self.get(c).scored for c in (self.cells if cells is None else cells))

    def outcomes(self, cells: Iterable[Cell] | None = None) -> dict[tuple[int, int], int]:
        """The per-task outcomes of `cells` (all cells when None) added together."""
        out: dict[tuple[int, int], int] = {}
        for cell in self.cells if cells is None else cells:
            for key, tasks in self.get(cell).outcomes.items():
                out[key] = out.get(key, 0) + tasks
        return out

    @classmethod
    def from_cell_batches(
        cls,
        frame: pl.DataFrame,
        *,
        before: str,
        window: int = DEFAULT_WINDOW,
        solver: str | None = None,
    ) -> History:
        """The `window` most recent daily batches strictly before `before` that `solver` reached
        (None: the most recent one's solver), summed per cell."""
        if not DAY.match(before):
            raise ValueError(f"a history is for a daily batch key YYYY-MM-DD, got {before!r}")
        if window < 1:
            raise ValueError(f"the window is at least one batch, got {window}")
        past = frame.filter(
            (pl.col("batch") < before) & pl.col("batch").str.contains(DAY.pattern)
        ).filter(pl.col("solver") != "")
        if solver is None:
            latest = past.sort("batch", "solver").select("batch", "solver").tail(1).rows()
            solver = latest[0][1] if latest else ""
        past = past.filter(pl.col("solver") == solver)
        batches = tuple(sorted(past["batch"].unique().to_list())[-window:])
        counts: dict[Cell, dict[str, Any]] = {}
        for row in past.filter(pl.col("batch").is_in(batches)).sort("batch", "cell").to_dicts():
            entry = counts.setdefault(Cell.from_columns(row), {"outcomes": {}})
            for name in (*("generated", "described", "reached", "scored", "kept"), *TOKENS):
                entry[name] = entry.get(name, 0) + row[name]
            for s, n, tasks in json.loads(row["outcomes"]):
                entry["outcomes"][(s, n)] = entry["outcomes"].get((s, n), 0) + tasks
        cells = {cell: CellHistory(cell, **entry) for cell, entry in counts.items()}
        drawn = past.filter(pl.col("generated") > 0).group_by(CELL_IDS).agg(pl.col("batch").max())
        last = {Cell.from_columns(row): row["batch"] for row in drawn.to_dicts()}
        return cls(before, solver, batches, cells, last)

    def frame(self) -> pl.DataFrame:
        """One row per cell (the `cell_history` table), sorted by cell."""
        rows = []
        for cell in sorted(self.cells):
            h = self.cells[cell]
            scored = sorted(h.outcomes.items())
            rows.append(
                {
                    "as_of": self.before,
                    "solver": self.solver,
                    "batches": len(self.batches),
                    "first_batch": self.batches[0] if self.batches else "",
                    "last_batch": self.batches[-1] if self.batches else "",
                    **cell.columns(),
                    **{n: getattr(h, n) for n in ("generated", "described", "reached")},
                    **{n: getattr(h, n) for n in ("scored", "kept", "learnable")},
                    "all_passed": h.all_passed,
                    "all_failed": h.all_failed,
                    "attempts": sum(n * t for (_, n), t in scored),
                    "successes": sum(s * t for (s, _), t in scored),
                    "mean_pass_rate": (
                        sum(s / n * t for (s, n), t in scored) / h.scored if h.scored else None
                    ),
                    "outcomes": json.dumps([[s, n, t] for (s, n), t in scored]),
                    "tokens": h.tokens,
                    "rollout_tokens": h.rollout_tokens,
                }
            )
        return pl.DataFrame(rows, schema=polars_schema("cell_history"))


def history_from_lake(
    descriptions: pl.DataFrame,
    rollouts: pl.DataFrame,
    filtered: pl.DataFrame,
    *,
    before: str,
    window: int = DEFAULT_WINDOW,
    solver: str | None = None,
    costs: pl.DataFrame | None = None,
) -> History:
    """The history a draw for batch `before` reads, from the three tables' frames and the tokens
    each task cost (rows of any batch: those at or after `before` are ignored)."""
    frame = cell_batches(descriptions, rollouts, filtered, costs)
    return History.from_cell_batches(frame, before=before, window=window, solver=solver)


# The columns `read_history` reads of each table.
READ_COLUMNS: dict[str, tuple[str, ...]] = {
    "task_descriptions": (
        *("task_id", "batch", "status", "generator", "category", "complexity", "family", "truth"),
        *_TOKENS,
    ),
    "solver_rollouts": ("task_id", "batch", "policy", "model", "reward", *_TOKENS),
    "filtered_dataset": ("task_id", "batch", "solver_model", "kept"),
    # Only for what their tasks cost.
    **{
        table: ("task_id", "batch", *_TOKENS)
        for table in ("task_environments", "completion_tests", "task_soundness")
    },
}
SPENDING = ("task_descriptions", "task_environments", "completion_tests", "task_soundness")


def read_history(
    lake: Lake, *, before: str, window: int = DEFAULT_WINDOW, solver: str | None = None
) -> History:
    """The history a draw for batch `before` reads, from the lake's partitions of the daily
    batches before it that have solver rollouts, reading only the columns it needs."""
    past = [b for b in lake.batches("solver_rollouts") if DAY.match(b) and b < before]
    frames = {table: lake.read_columns(table, past, cols) for table, cols in READ_COLUMNS.items()}
    spending = [frames[table] for table in SPENDING]
    return history_from_lake(
        frames["task_descriptions"],
        frames["solver_rollouts"],
        frames["filtered_dataset"],
        before=before,
        window=window,
        solver=solver,
        costs=task_costs(spending, []),
    )
