"""The describe stage's draw: each task's cell, by the frontier sampler (sampling/policy.py) over
what the solver made of the daily batches before, and variants (sampling/evolve.py) of past tasks
at its edge. Only batches strictly before the batch's own key are read and the draws are seeded
by that key, so a batch drawn again later draws the same."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from endless_assets.generation import TaskGenerator, Usage
from endless_assets.models import Task, task_seed
from endless_assets.sampling.cells import Cell
from endless_assets.sampling.evolve import Proposal, candidates, combine, propose
from endless_assets.sampling.history import DAY, History, read_history
from endless_assets.sampling.policy import Draw, Slot, batch_rng, draw
from endless_assets.settings import Settings
from endless_assets.solver_id import SolverId
from endless_assets.stages.costs import solver_model
from endless_assets.store.schemas import empty_frame

if TYPE_CHECKING:
    from endless_assets.store.lake import Lake

TABLE = "task_draws"
# The columns the variants' parents are read with, per table (their types: the table's).
PARENT_COLUMNS: dict[str, tuple[str, ...]] = {
    "task_descriptions": (
        *("task_id", "batch", "status", "generator", "category", "complexity", "family", "truth"),
        "seed",
    ),
    "filtered_dataset": (
        "task_id",
        "batch",
        "solver_model",
        "successes",
        "scored_attempts",
        "kept",
    ),
    "task_draws": ("batch", "parent_task_id"),
}


def solver_name(settings: Settings) -> str:
    """The solver as filtered_dataset names it (no endpoint is asked)."""
    return str(SolverId(settings.solver.policy, solver_model(settings)))


def generator_cells(generator: TaskGenerator) -> list[Cell]:
    """The cells the generator can describe ([] for one that cannot be steered)."""
    if not generator.cell_kind:
        return []
    return [Cell(generator.cell_kind, (name, grade)) for name, grade in generator.cells()]


def sampler_of(settings: Settings) -> str:
    """The sampler a batch is drawn with: `auto` is frontier with the chat solver, uniform with
    oracle and noop (always the same outcome: nothing to steer by)."""
    if settings.sampling.sampler != "auto":
        return settings.sampling.sampler
    return "frontier" if settings.solver.policy == "chat" else "uniform"


def sampler_label(settings: Settings) -> str:
    """The sampler as the metadata shows it: `auto (frontier)` says what auto chose."""
    chosen = sampler_of(settings)
    return f"auto ({chosen})" if settings.sampling.sampler == "auto" else chosen


def why_uniform(settings: Settings, generator: TaskGenerator, batch: str) -> str:
    """Why the batch is the generator's own deal rather than a drawn one ('' when it is drawn)."""
    if sampler_of(settings) != "frontier":
        if settings.sampling.sampler == "auto":
            return (
                f"the generator's own deal: the {settings.solver.policy} solver gives no pass "
                "rates to steer by (sampler auto draws by the frontier with the chat solver)"
            )
        return ""  # the uniform sampler, as asked: nothing to say
    if not generator_cells(generator):
        return f"the {generator.name} generator's tasks cannot be drawn by cell"
    if not DAY.match(batch):
        return f"batch {batch!r} is not a day: no history to draw from"
    return ""


def draw_history(
    lake: Lake, settings: Settings, generator: TaskGenerator, batch: str
) -> History | None:
    """What the configured solver made of the `sampler_window` daily batches strictly before
    `batch`, per cell; None when the batch is the generator's own deal (see `plan_draw`)."""
    if sampler_of(settings) != "frontier" or not generator_cells(generator):
        return None
    if not DAY.match(batch):
        return None
    window = settings.sampling.window
    return read_history(lake, before=batch, window=window, solver=solver_name(settings))


def history_frame(history: History | None) -> pl.DataFrame:
    """The rows of the `cell_history` table (none for the generator's own deal)."""
    if history is None:
        return empty_frame("cell_history")
    return history.frame()


def plan_draw(
    lake: Lake,
    settings: Settings,
    generator: TaskGenerator,
    batch: str,
    history: History | None = None,
) -> Draw | None:
    """The batch's draw under the frontier sampler (None: the generator's own deal), from
    `history` (default: `draw_history`). When the draw targets (not at a cold start, not
    degraded), the variants of `evolve_budget` take the last slots."""
    cells = generator_cells(generator)
    history = history or draw_history(lake, settings, generator, batch)
    if history is None or not cells:
        return None
    options: dict[str, Any] = {
        "ranks": list(dict.fromkeys(cell.key[1] for cell in cells)),  # the generator's order
        "target_pass_rate": settings.sampling.target_pass_rate,
        "band": (settings.keep.min_pass_rate, settings.keep.max_pass_rate),  # the keep band
        "floor": settings.sampling.exploration_floor / len(cells),
    }
    first = draw(
        cells, history, settings.run.tasks, rng=batch_rng(batch, settings.run.seed), **options
    )
    if first.mode != "targeting" or settings.sampling.evolve_budget <= 0:
        return first
    proposals = variants(lake, settings, batch, cells, first)
    if not proposals:
        return first
    n = settings.run.tasks - len(proposals)
    rest = draw(cells, history, n, rng=batch_rng(batch, settings.run.seed), **options)
    return combine(rest, proposals)


def _read_before(lake: Lake, table: str, batch: str, window: int | None) -> pl.DataFrame:
    past = [b for b in lake.batches(table) if DAY.match(b) and b < batch]
    return lake.read_columns(table, past[-window:] if window else past, PARENT_COLUMNS[table])


def variants(
    lake: Lake, settings: Settings, batch: str, cells: Sequence[Cell], first: Draw
) -> list[Proposal]:
    """Variants, a level away, of the solver's past tasks solved in every attempt or in none (into
    cells the generator has, parents never proposed before, best-scored targets first)."""
    window = settings.sampling.window
    descriptions = _read_before(lake, "task_descriptions", batch, window)
    filtered = _read_before(lake, "filtered_dataset", batch, window)
    filtered = filtered.filter(pl.col("solver_model") == solver_name(settings))
    found = candidates(descriptions, filtered, before=batch, window=window)
    drawn = _read_before(lake, TABLE, batch, None)
    grades = list(dict.fromkeys(cell.key[1] for cell in cells if cell.kind == "taxonomy"))
    proposals = propose(
        found,
        batch=batch,
        n=settings.run.tasks,
        budget=settings.sampling.evolve_budget,
        complexities=grades,
        scores={cell: view.score for cell, view in first.views.items()},
        exclude=set(drawn.filter(pl.col("parent_task_id") != "")["parent_task_id"].to_list()),
    )
    known = set(cells)
    return [p for p in proposals if p.cell in known]


def draws_frame(plan: Draw | None) -> pl.DataFrame:
    """The rows of the `task_draws` table (none for the generator's own deal)."""
    if plan is None:
        return empty_frame("task_draws")
    return plan.frame()


def slot_seed(plan: Draw | None, batch: str, index: int, salt: int) -> int:
    """The task's seed: a variant's lineage seed, else the batch's seed for its index."""
    slot = plan.slots[index] if plan is not None else None
    if slot is not None and slot.seed is not None:
        return slot.seed
    return task_seed(batch, index, salt)


def parent_tasks(lake: Lake, plan: Draw | None) -> dict[str, Task]:
    """The tasks the plan's variants are of, rebuilt from the drafts of the batches before."""
    wanted = [s.parent_task_id for s in plan.slots if s.parent_task_id] if plan else []
    found: dict[str, Task] = {}
    for batch in lake.batches("task_descriptions") if plan and wanted else []:
        if not DAY.match(batch) or batch >= plan.batch:
            continue
        path = lake.partition_path("task_descriptions", batch)
        rows = pl.read_parquet(path, columns=["task_id", "draft"])
        for task_id, draft in rows.filter(pl.col("task_id").is_in(wanted)).rows():
            found[task_id] = Task.model_validate_json(draft)
    return found


def describe_slot(
    generator: TaskGenerator,
    plan: Draw | None,
    batch: str,
    index: int,
    seed: int,
    parents: Mapping[str, Task] | None = None,
) -> tuple[Task, Usage]:
    """Task `index` of the batch: the generator's own deal, the drawn cell's task, or a variant
    of its parent (in `parents`), which records the task it is a variant of."""
    if plan is None:
        return generator.describe(batch, index, seed)
    slot: Slot = plan.slots[index]
    parent = (parents or {}).get(slot.parent_task_id)
    if parent is not None:
        draft, usage = generator.describe_variant(batch, index, seed, *slot.cell.key, parent)
    else:
        draft, usage = generator.describe_cell(batch, index, seed, *slot.cell.key)
    if slot.parent_task_id:
        draft = draft.model_copy(update={"parent_task_id": slot.parent_task_id})
    return draft, usage


def slot_columns(plan: Draw | None, index: int) -> dict[str, Any]:
    """What a failed task's row still says of its slot (its parent, its family for a family
    cell), so the funnel and the lineage keep it."""
    if plan is None:
        return {}
    slot = plan.slots[index]
    columns: dict[str, Any] = {"parent_task_id": slot.parent_task_id}
    if slot.cell.kind == "family":
        columns["family"] = slot.cell.key[0]
    else:
        columns["category"], columns["complexity"] = slot.cell.key
    return columns
