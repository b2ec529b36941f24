"""What a batch will cost before it runs (`endless run --plan`), and after it ran, the estimate
beside what happened (store/costs.py, store/cost_record.py)."""

from __future__ import annotations

import json
import sys
from typing import Any

import polars as pl
import polars.selectors as cs

from endless_assets.cli.app import OutputFormat, err, out, print_frame

SHOWN = {  # estimate column -> the heading it is printed under
    "stage": "stage",
    "units": "units",
    "requests": "llm_requests",
    "tokens_in": "tokens_in",
    "tokens_out": "tokens_out",
    "containers": "containers",
    "engine_cpu_seconds": "engine_cpu_s",
    "wall_seconds": "wall_s",
}


def planned(settings: Any, batch: str):
    """The estimate for a batch of `settings` from the lake's history (read only)."""
    from endless_assets.stages.costs import cost_profile
    from endless_assets.store.costs import estimate, planned_runs, read_history
    from endless_assets.store.lake import Lake

    runs = planned_runs(settings.run.tasks, settings.run.shard_tasks)
    history = read_history(Lake(settings.run.data_dir))
    return estimate(history, cost_profile(settings), batch=batch, runs=runs)


def print_plan(settings: Any, batch: str, fmt: OutputFormat) -> None:
    """The estimate, per stage and in total, with what it came from."""
    plan = planned(settings, batch)
    if fmt is OutputFormat.json:
        payload = {
            "batch": batch,
            "settings": plan.profile.columns(),
            "from_history": plan.from_history,
            "history_batches": plan.history_batches,
            "stages": plan.frame().to_dicts(),
        }
        sys.stdout.write(json.dumps(payload, indent=1) + "\n")
        return
    frame = plan.frame()
    if fmt is OutputFormat.csv:
        print_frame(frame, fmt)
        return
    out.print(settings_line(plan.profile, batch), highlight=False)
    out.print(source_line(plan))
    print_frame(
        frame.select(list(SHOWN)).rename(SHOWN).with_columns(pl.col(pl.Float64).round(1)),
        title=f"estimate for batch {batch}: {settings.run.tasks} tasks",
    )
    for stage in plan.stages:
        out.print(f"  {stage.stage}: {stage.basis}", soft_wrap=True, highlight=False)
    out.print(total_line(plan), highlight=False)
    note = rerun_note(settings.run.data_dir, batch)
    if note:
        out.print(note, highlight=False)


def settings_line(profile, batch: str) -> str:
    def named(kind: str, model: str) -> str:
        return f"{kind}/{model}" if model else kind

    soundness = profile.soundness
    if soundness != "off":
        soundness += f" ({profile.soundness_repeats} repeats"
        soundness += f", auditor {profile.auditor_model})" if profile.auditor_model else ")"
    return (
        f"endless run --plan, batch {batch}: {profile.tasks} tasks, generator "
        f"{named(profile.generator, profile.generator_model)}, solver "
        f"{named(profile.solver, profile.solver_model)} (k={profile.k}), soundness {soundness}, "
        f"{profile.workers} workers"
    )


def source_line(plan) -> str:
    if not plan.from_history:
        return (
            "[bold]no history[/] of these settings on this instance: every figure below is the "
            "prior (docs figures of a 2-core machine), not a measurement of this one"
        )
    used = plan.history_batches
    prior = [s.stage for s in plan.stages if not s.from_history]
    shown = ", ".join(used[:3]) + (f" and {len(used) - 3} more" if len(used) > 3 else "")
    text = f"estimated from this instance's history: {len(used)} earlier batch(es) ({shown})"
    if prior:
        text += f"; the prior for {', '.join(prior)} (no batch with those settings)"
    return text


def total_line(plan) -> str:
    cpu = plan.total("engine_cpu_seconds")
    wall = plan.total("wall_seconds") or 0.0
    tokens_in, tokens_out = plan.total("tokens_in") or 0, plan.total("tokens_out") or 0
    return (
        f"total: about {plan.total('requests') or 0:,.0f} LLM requests, {tokens_in:,.0f} tokens "
        f"in and {tokens_out:,.0f} out, {plan.total('containers') or 0:,.0f} containers, "
        + (f"{cpu:,.0f} engine CPU-seconds, " if cpu is not None else "engine CPU not known, ")
        + f"{wall:,.0f} s wall ({wall / 60:.1f} min)"
    )


def rerun_note(data_dir: str, batch: str) -> str:
    """A batch that already has rows reuses what was finished: it costs less than a new one."""
    from endless_assets.store.lake import Lake

    if batch in Lake(data_dir).batches("task_descriptions"):
        return (
            f"batch {batch} is already in the lake: run again, it reuses the rows and replies "
            "it has, so it costs less than this"
        )
    return ""


def print_short(settings: Any, batch: str) -> None:
    """One line before a run: what it should cost."""
    plan = planned(settings, batch)
    where = "history" if plan.from_history else "prior, no history"
    err.print(f"estimate ({where}): {total_line(plan).removeprefix('total: ')}", highlight=False)


def print_costs(data_dir: str, batch: str) -> None:
    """After a run: the estimate beside what the batch cost (its batch_costs rows)."""
    from endless_assets.store.cost_record import comparison
    from endless_assets.store.lake import Lake

    costs = Lake(data_dir).read_or_empty("batch_costs", batch)
    if costs.is_empty():
        return
    frame = comparison(costs).with_columns(pl.col(pl.Float64).round(2))
    print_frame(frame.select(~cs.ends_with("_off")), title="cost: estimate vs actual")
    total = frame.filter(pl.col("stage") == "total").row(0, named=True)
    offs = [
        f"{label} {total[f'{label}_off']:+.0%}"
        for label in ("tokens", "containers", "wall_s")
        if total.get(f"{label}_off") is not None
    ]
    if offs:
        out.print(f"actual vs estimate: {', '.join(offs)}", highlight=False)
