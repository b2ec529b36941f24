"""What a batch did cost, stage by stage, as `batch_costs` rows beside the estimate made before it
ran (store/costs.py): LLM figures and units from the stage tables' rows; containers, engine CPU
and wall time from what the runs measured (defs/costs.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime

import polars as pl
import polars.selectors as cs

from endless_assets.store.costs import STAGES, Estimate, Profile
from endless_assets.store.schemas.costs import BatchCosts

# The table each stage's rows are in (other has none).
STAGE_TABLES = {
    "describe": "task_descriptions",
    "environment": "task_environments",
    "completion test": "completion_tests",
    "soundness": "task_soundness",
    "solver rollouts": "solver_rollouts",
}


@dataclass
class Measured:
    """What a stage's steps measured over the batch's runs."""

    made: int = 0  # units its steps made (not taken from a journal or earlier rows)
    containers: int = 0
    engine_cpu_seconds: float | None = 0.0
    wall_seconds: float = 0.0  # the steps' (from their start to their end)
    items_seconds: float | None = 0.0  # of which working on the units (None: not told apart)

    def add(self, made: int, containers: int, cpu: float | None, items: float | None) -> None:
        """One step's figures (its wall time is added apart, from the run's step stats)."""
        self.made += made
        self.containers += containers
        both = self.engine_cpu_seconds is not None and cpu is not None
        self.engine_cpu_seconds = self.engine_cpu_seconds + cpu if both else None
        known = self.items_seconds is not None and items is not None
        self.items_seconds = self.items_seconds + items if known else None

    @property
    def fixed_seconds(self) -> float:
        """The wall time outside the work on the units (0 where the two are not told apart)."""
        if self.items_seconds is None:
            return 0.0
        return max(0.0, self.wall_seconds - self.items_seconds)


def usage(frames: dict[str, pl.DataFrame], profile: Profile) -> dict[str, dict[str, int]]:
    """Per stage: units and the LLM requests and tokens of its rows (a chat attempt's requests
    are its turns, as in the token_cost view). Rollouts: this solver's first k attempts."""
    found: dict[str, dict[str, int]] = {}
    for stage, table in STAGE_TABLES.items():
        rows = frames.get(table, pl.DataFrame())
        if stage == "solver rollouts" and len(rows):
            rows = rows.filter(
                (pl.col("policy") == profile.solver)
                & (pl.col("model") == profile.solver_model)
                & (pl.col("rollout_idx") < profile.k)
            )
        if stage == "solver rollouts" and len(rows):
            paid = rows["tokens_in"] + rows["tokens_out"] > 0
            requests = int(rows["n_turns"].filter(paid).sum())
        else:
            requests = _sum(rows, "requests")
        found[stage] = {
            "units": len(rows),
            "requests": requests,
            "tokens_in": _sum(rows, "tokens_in"),
            "tokens_out": _sum(rows, "tokens_out"),
        }
    return found


def _sum(rows: pl.DataFrame, column: str) -> int:
    if column not in rows.columns or rows.is_empty():
        return 0
    return int(rows[column].fill_null(0).sum())


def cost_frame(
    batch: str,
    profile: Profile,
    planned: Estimate,
    used: dict[str, dict[str, int]],
    measured: dict[str, Measured],
    *,
    runs: list[str],
    run_seconds: float,
    now: datetime,
) -> pl.DataFrame:
    """The batch's `batch_costs` rows: one per stage; other is the runs' wall time the stages'
    steps do not account for, its units the runs."""
    stage_wall = sum(measured[s].wall_seconds for s in STAGES if s in measured)
    wall = max(0.0, run_seconds - stage_wall)
    other = Measured(made=len(runs), wall_seconds=wall, items_seconds=None)
    rows = []
    for order, estimated in enumerate(planned.stages, start=1):
        stage = estimated.stage
        if stage == "other":
            counts = {"units": len(runs), "requests": 0, "tokens_in": 0, "tokens_out": 0}
            got = other
        else:
            counts = used[stage]
            got = measured.get(stage) or Measured()
        figures = estimated.figures
        rows.append(
            {
                "batch": batch,
                "stage": stage,
                "stage_order": order,
                **profile.columns(),
                **counts,
                "units_run": min(counts["units"], got.made),
                "containers": got.containers,
                "engine_cpu_seconds": got.engine_cpu_seconds,
                "wall_seconds": round(got.wall_seconds, 3),
                "fixed_seconds": round(got.fixed_seconds, 3),
                "est_units": estimated.units,
                **{f"est_{name}": value for name, value in asdict(figures).items()},
                "basis": estimated.basis,
                "run_ids": ",".join(runs),
                "created_at": now,
            }
        )
    schema = BatchCosts.to_schema().columns
    frame = pl.DataFrame(rows, schema={name: c.dtype.type for name, c in schema.items()})
    BatchCosts.validate(frame, lazy=True)
    return frame


# (label, actual column(s), estimated column(s)): what the comparison shows, per stage.
COMPARED = (
    ("requests", ("requests",), ("est_requests",)),
    ("tokens", ("tokens_in", "tokens_out"), ("est_tokens_in", "est_tokens_out")),
    ("containers", ("containers",), ("est_containers",)),
    ("engine_cpu_s", ("engine_cpu_seconds",), ("est_engine_cpu_seconds",)),
    ("wall_s", ("wall_seconds",), ("est_wall_seconds",)),
)


def comparison(costs: pl.DataFrame) -> pl.DataFrame:
    """Estimate beside actual for each stage and the total (rows of one or more batches,
    summed per stage): for each figure `<figure>_est`, `<figure>` and, on the total, how far
    the estimate was off (`<figure>_off`: actual / estimate - 1)."""
    if costs.is_empty():
        return pl.DataFrame()
    sums = []
    for label, actual, planned in COMPARED:
        sums.append(pl.sum_horizontal(*planned).sum().alias(f"{label}_est"))
        sums.append(pl.sum_horizontal(*actual).sum().alias(label))
    per_stage = (
        costs.group_by("stage_order", "stage", maintain_order=True)
        .agg(*sums)
        .sort("stage_order")
        .drop("stage_order")
    )
    total = per_stage.drop("stage").sum().with_columns(pl.lit("total").alias("stage"))
    for label, _, _ in COMPARED:
        est, got = pl.col(f"{label}_est"), pl.col(label)
        total = total.with_columns(
            pl.when(est > 0).then(got / est - 1).otherwise(None).round(3).alias(f"{label}_off")
        )
    return pl.concat(
        [per_stage, total.select(*per_stage.columns, cs.ends_with("_off"))], how="diagonal_relaxed"
    )
