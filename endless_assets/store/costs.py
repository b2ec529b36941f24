"""What a batch will cost, estimated before it runs from this instance's `batch_costs` history of
batches made with the same settings, and what it did cost. Pure computation over frames:
`endless run --plan` prints an estimate, `filtered_dataset` stores it beside what happened.

Each stage's work is counted in units (a task entering it, an attempt in solver rollouts, a run
in other). Its cost per unit comes from the latest `WINDOW` earlier batches whose settings that
decide that stage's cost are the plan's (`KEYS`); the share of asked tasks that reach it from
those that share what decides that (`SURVIVAL_KEYS`); without such a batch, from the prior
(cost_priors.py), saying so. `workers` is not a key: wall time does not scale with it on a busy
machine.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from datetime import datetime

import polars as pl

from endless_assets.store.cost_priors import (
    SOURCE,
    PerUnit,
    prior_fixed,
    prior_per_unit,
    prior_survival,
    scaled,
)
from endless_assets.store.lake import Lake
from endless_assets.store.schemas import polars_schema
from endless_assets.store.schemas.costs import COST_STAGES
from endless_assets.store.shards import count_for

TABLE = "batch_costs"
STAGES = tuple(COST_STAGES)
WINDOW = 5  # latest matching batches an estimate reads
GENERATOR = ("generator", "generator_model")
KEYS: dict[str, tuple[str, ...]] = {
    "describe": GENERATOR,
    "environment": GENERATOR,
    "completion test": GENERATOR,
    "soundness": (*GENERATOR, "soundness", "soundness_repeats", "auditor_model"),
    "solver rollouts": (*GENERATOR, "solver", "solver_model"),
    "other": (),
}
SURVIVAL_KEYS: dict[str, tuple[str, ...]] = {
    **KEYS,
    "soundness": GENERATOR,
    "solver rollouts": (*GENERATOR, "soundness"),
}
FIGURES = ("requests", "tokens_in", "tokens_out", "containers", "engine_cpu_seconds")
FIGURES = (*FIGURES, "wall_seconds")
# Figures per unit made in the run (not reused), each from its column: a stage's wall time per
# unit is what grows with the units (its wall less its fixed part).
PER_UNIT_RUN = {
    "containers": "containers",
    "engine_cpu_seconds": "engine_cpu_seconds",
    "wall_seconds": "unit_wall",
}


@dataclass(frozen=True)
class Profile:
    """The settings a batch's cost depends on."""

    generator: str
    generator_model: str
    solver: str
    solver_model: str
    k: int
    soundness: str
    soundness_repeats: int
    auditor_model: str
    workers: int
    tasks: int
    max_turns: int = 16  # (the chat prior's turns; not a key)

    def columns(self) -> dict[str, object]:
        values = asdict(self)
        values.pop("max_turns")
        return values

    def describe(self, keys: tuple[str, ...]) -> str:
        values = self.columns()
        return ", ".join(f"{k} {values[k] if values[k] != '' else '(none)'}" for k in keys)


@dataclass(frozen=True)
class StageEstimate:
    stage: str
    units: float
    figures: PerUnit  # the stage's totals
    basis: str  # the batches it came from, or the prior and why
    batches: tuple[str, ...] = ()  # the earlier batches it read (none: the prior)

    @property
    def from_history(self) -> bool:
        return bool(self.batches)


@dataclass(frozen=True)
class Estimate:
    profile: Profile
    stages: tuple[StageEstimate, ...]

    @property
    def history_batches(self) -> list[str]:
        return sorted({b for s in self.stages for b in s.batches})

    @property
    def from_history(self) -> bool:
        return any(s.from_history for s in self.stages)

    def total(self, figure: str) -> float | None:
        values = [getattr(s.figures, figure) for s in self.stages]
        return None if any(v is None for v in values) else float(sum(values))

    def frame(self) -> pl.DataFrame:
        rows = [
            {"stage": s.stage, "units": s.units, **asdict(s.figures), "basis": s.basis}
            for s in self.stages
        ]
        total = {f: self.total(f) for f in FIGURES}
        rows.append({"stage": "total", "units": None, **total, "basis": ""})
        return pl.DataFrame(rows, schema=ESTIMATE_SCHEMA)


ESTIMATE_SCHEMA = {
    "stage": pl.Utf8,
    "units": pl.Float64,
    **{f: pl.Float64 for f in FIGURES},
    "basis": pl.Utf8,
}


def planned_runs(tasks: int, shard_tasks: int) -> int:
    """The Dagster runs `endless run` makes a batch in: one, or the describe stage, the shards and
    the finish (store/shards.py)."""
    shards = count_for(tasks, shard_tasks)
    return 1 if shards == 1 else shards + 2


def read_history(lake: Lake) -> pl.DataFrame:
    """Every readable `batch_costs` partition. Read only: an unreadable file is skipped here, never
    moved (a plan writes nothing)."""
    schema = polars_schema(TABLE)
    frames = []
    for path in lake.partitions(TABLE):
        try:
            frame = pl.read_parquet(path)
        except Exception:  # damaged or replaced meanwhile: not history
            continue
        # A partition written before a column existed reads it as null.
        frames.append(
            frame.with_columns(
                pl.lit(None, dtype).alias(name)
                for name, dtype in schema.items()
                if name not in frame.columns
            ).select(list(schema))
        )
    if not frames:
        return pl.DataFrame(schema=schema)
    return pl.concat(frames, how="vertical_relaxed")


def estimate(
    history: pl.DataFrame,
    profile: Profile,
    *,
    batch: str | None = None,
    before: datetime | None = None,
    runs: int = 1,
) -> Estimate:
    """What a batch of `profile` will cost, from the history's batches other than `batch` that
    were recorded before `before` (None: all), made in `runs` Dagster runs (a sharded batch:
    its shards and two more)."""
    if history.is_empty():  # (no rows, perhaps no columns either)
        history = pl.DataFrame(schema=polars_schema(TABLE))
    usable = history.filter(pl.col("batch") != batch) if batch else history
    if before is not None and len(usable):
        usable = usable.filter(pl.col("created_at") < before)
    stages = []
    for stage in STAGES:
        per_unit, fixed, basis, batches = _per_unit(usable, profile, stage)
        share, share_note = _survival(usable, profile, stage, batches)
        units = profile.tasks * share * (profile.k if stage == "solver rollouts" else 1)
        if stage == "other":
            units = float(runs)
        figures = scaled(per_unit, units)
        figures = replace(figures, wall_seconds=figures.wall_seconds + fixed * runs)
        note = basis + (f"; {share_note}" if share_note else "")
        stages.append(StageEstimate(stage, units, figures, note, batches))
    return Estimate(profile, tuple(stages))


def _matching(history: pl.DataFrame, profile: Profile, stage: str, keys) -> pl.DataFrame:
    values = profile.columns()
    rows = history.filter(pl.col("stage") == stage)
    for key in keys:
        rows = rows.filter(pl.col(key) == values[key])
    latest = rows.group_by("batch").agg(pl.col("created_at").max()).sort("created_at")
    chosen = latest.tail(WINDOW)["batch"].to_list()
    return rows.filter(pl.col("batch").is_in(chosen))


def _per_unit(
    history: pl.DataFrame, profile: Profile, stage: str
) -> tuple[PerUnit, float, str, tuple[str, ...]]:
    """The stage's cost per unit, its wall time per run that does not grow with the units, what
    they came from, and the batches read."""
    prior = prior_per_unit(stage, profile)
    rows = _matching(history, profile, stage, KEYS[stage])
    if rows.is_empty():
        what = profile.describe(KEYS[stage]) if KEYS[stage] else "any settings"
        why = "no earlier batch" if history.is_empty() else "no earlier batch with " + what
        return prior, prior_fixed(stage), f"{SOURCE}: {why}", ()
    values = {}
    made = rows.filter(pl.col("units") > 0)
    units = made["units"].sum()
    for figure in ("requests", "tokens_in", "tokens_out"):
        values[figure] = made[figure].sum() / units if units else 0.0
    rows = rows.with_columns(
        (pl.col("wall_seconds") - pl.col("fixed_seconds").fill_null(0.0)).alias("unit_wall"),
        (pl.col("run_ids").str.count_matches(",") + 1).alias("runs"),
    )
    partial = []
    for figure, column in PER_UNIT_RUN.items():
        run = rows.filter((pl.col("units_run") > 0) & pl.col(column).is_not_null())
        if run.is_empty():
            values[figure] = getattr(prior, figure)
            partial.append(figure)
            continue
        values[figure] = run[column].sum() / run["units_run"].sum()
    fixed = float(rows["fixed_seconds"].fill_null(0.0).sum() / rows["runs"].sum())
    basis = _named(rows, profile)
    if partial:
        basis += f"; {', '.join(partial)} from the prior (no unit made, only reused)"
    return PerUnit(**values), fixed, basis, tuple(sorted(set(rows["batch"].to_list())))


def _survival(
    history: pl.DataFrame, profile: Profile, stage: str, read: tuple[str, ...]
) -> tuple[float, str]:
    """The share of the asked tasks that enter `stage`, and where it came from when that is not
    the batches its cost per unit came from (`read`)."""
    if stage in ("describe", "other"):
        return 1.0, ""
    rows = _matching(history, profile, stage, SURVIVAL_KEYS[stage])
    rows = rows.filter(pl.col("tasks") > 0)
    if rows.is_empty():
        share = prior_survival(stage, profile)
        return share, f"the prior's {share:.0%} reach it" if share < 1 else ""
    entering = (rows["units"] / rows["k"] if stage == "solver rollouts" else rows["units"]).sum()
    share = float(entering / rows["tasks"].sum())
    if tuple(sorted(set(rows["batch"].to_list()))) != read:
        return share, f"{share:.0%} of the tasks reach it in {_batch_list(rows)}"
    return share, ""


def _named(rows: pl.DataFrame, profile: Profile) -> str:
    """`history: 3 batches (a, b, c)`, and the settings they differ in that are not keys."""
    text = f"history: {_batch_list(rows)}"
    values = profile.columns()
    differ = []
    for setting in ("workers", "k"):
        seen = sorted(set(rows[setting].to_list()))
        if seen != [values[setting]]:
            differ.append(f"{setting} {'/'.join(str(v) for v in seen)}")
    if differ:
        text += f" made with {', '.join(differ)}"
    return text


def _batch_list(rows: pl.DataFrame) -> str:
    batches = sorted(set(rows["batch"].to_list()))
    shown = ", ".join(batches[:3]) + (f" and {len(batches) - 3} more" if len(batches) > 3 else "")
    return f"{len(batches)} batch{'es' if len(batches) > 1 else ''} ({shown})"
