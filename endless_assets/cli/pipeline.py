"""Pipeline commands: run a batch, query it, manage the sandbox and the catalog."""

from __future__ import annotations

import datetime as dt
import re
import time
from typing import Annotated

import polars as pl
import typer

from endless_assets.cli.app import (
    OutputFormat,
    _fail,
    app,
    err,
    out,
    print_frame,
    resolved_settings,
)
from endless_assets.cli.engines import check_engines

_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")


@app.command()
def run(
    date: Annotated[
        str | None,
        typer.Option(
            help="batch (partition) key, YYYY-MM-DD, from the first batch to today (UTC); "
            "default: today"
        ),
    ] = None,
    tasks: Annotated[int | None, typer.Option(help="tasks in the batch")] = None,
    k: Annotated[int | None, typer.Option(help="solver attempts per task")] = None,
    generator: Annotated[str | None, typer.Option(help="procedural | llm")] = None,
    solver: Annotated[str | None, typer.Option(help="oracle | noop | chat")] = None,
    workers: Annotated[int | None, typer.Option(help="tasks in parallel per stage")] = None,
    seed: Annotated[int | None, typer.Option(help="salt for the batch's seeds")] = None,
    quiet: Annotated[bool, typer.Option(help="only warnings from Dagster")] = False,
    submit: Annotated[
        bool,
        typer.Option(
            help="queue the run on the DAGSTER_HOME instance (e.g. a team's PostgreSQL one) for "
            "its daemon to launch, instead of running it here"
        ),
    ] = False,
    plan: Annotated[
        bool,
        typer.Option(
            "--plan",
            help="print what the batch will cost (LLM requests and tokens, containers, engine "
            "CPU, wall time per stage) from this instance's history, and stop: runs nothing, "
            "writes nothing",
        ),
    ] = False,
    format: Annotated[
        OutputFormat, typer.Option("--format", "-f", help="how --plan prints its estimate")
    ] = OutputFormat.table,
) -> None:
    """Materialize one batch end to end through Dagster and print its funnel."""
    from endless_assets.launch import launch_batch

    batch = _batch_key(date)
    overrides = {
        "tasks": tasks,
        "k": k,
        "generator": generator,
        "solver": solver,
        "workers": workers,
        "seed": seed,
    }
    settings = resolved_settings(**overrides)
    from endless_assets.cli.plan import print_costs, print_plan, print_short

    if plan:
        _named_models(settings)
        print_plan(settings, batch, format)
        return
    from endless_assets.cli.submit import open_instance, submit_batch, submit_sharded

    open_instance(overrides)  # (a DAGSTER_PG_URL that does not answer: one line, exit 2)
    from endless_assets.cli.runs import reap_dead_runs

    reap_dead_runs()  # (runs whose process is gone hold no slot this run waits for)
    from endless_assets.store.shards import count_for

    shards = count_for(settings.run.tasks, settings.run.shard_tasks)
    sharded = ""
    if shards > 1:  # (a task's shard is a hash of its id: shards are about even, not exactly)
        sharded = f", in {shards} shard runs of about {-(-settings.run.tasks // shards)} tasks"
    err.print(
        f"[bold]endless run[/] batch {batch}: {settings.run.tasks} tasks{sharded}, generator "
        f"{settings.generator.kind}, solver {settings.solver.policy} "
        f"(k={settings.solver.attempts}), "
        f"{settings.run.workers} workers, data in {settings.run.data_dir}"
    )
    if submit:
        print_short(settings, batch)
        _claim(settings.run.data_dir, batch).close()  # (refused now if a run holds the batch)
        if shards > 1:
            submit_sharded(batch, overrides, shards)
        else:
            submit_batch(batch, overrides)
        return
    _preflight(settings)
    print_short(settings, batch)
    started = time.monotonic()
    claim = _claim(settings.run.data_dir, batch)
    try:
        result = launch_batch(
            batch,
            overrides,
            log_level="WARNING" if quiet else "INFO",
            shards=shards,
            progress=err.print,
        )
    finally:
        claim.close()
    wall = time.monotonic() - started
    if result.interrupted:
        _fail(
            f"interrupted: run {result.run_id} stopped and marked failed; `endless run` with the "
            "same date goes on from what it finished",
            code=130,
        )
    print_funnel(settings.run.data_dir, batch)
    if not result.success:
        _fail(
            f"run {result.run_id} failed at step(s) {', '.join(result.failed_steps) or '?'}; "
            "see the log above or the run in the UI (`dg dev`)",
            code=1,
        )
    print_costs(settings.run.data_dir, batch)
    kept = _kept(settings.run.data_dir, batch)
    out.print(
        f"[bold green]batch {batch} done[/] in {wall:.0f} s: {kept} verified tasks kept "
        f"(run {result.run_id})"
    )


def _batch_key(date: str | None) -> str:
    """--date as a key of the daily batches: exactly YYYY-MM-DD (Python also reads 20260105 and
    2026-W02-1 as dates; those are refused, not rewritten), from the first day a batch may be to
    today in UTC (today's batch is the last one; a later day is refused rather than written
    ahead of its day). Checked without loading the definitions: their partitions start at the
    instance's first batch, which this batch may move earlier (batch_calendar.py)."""
    from endless_assets.batch_calendar import FLOOR, today

    if date is None:
        return today()
    try:
        day = dt.date.fromisoformat(date) if _DATE.match(date) else None
    except ValueError:
        day = None
    if day is None:
        _fail(f"--date must be YYYY-MM-DD, got {date!r}")
    if not FLOOR <= day.isoformat() <= today():
        _fail(f"--date {date} is not a batch: batches run from {FLOOR} to {today()} (today UTC)")
    return day.isoformat()


def _claim(data_dir: str, batch: str):
    """The batch's launch lock, held while this command launches its runs (batch_lock.py); one
    line and exit 2 if another `endless run` launches it, or a run of it is going on now, or the
    data directory cannot be written."""
    from endless_assets.store import batch_lock
    from endless_assets.store.lake import resolve_data_dir

    where = resolve_data_dir(data_dir)
    try:
        claim = batch_lock.acquire(where, batch, holder="endless run", kind="launch")
    except batch_lock.BatchBusy as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"the data directory {where} cannot be written: {exc.strerror or exc}")
    try:
        batch_lock.check_free(where, batch)
    except batch_lock.BatchBusy as exc:
        claim.close()
        _fail(str(exc))
    return claim


def _named_models(settings) -> None:
    """A plan asks no endpoint, but a model the run would need must be named."""
    from endless_assets.llm.preflight import endpoint_for, roles_in_use
    from endless_assets.settings import SettingsError

    for role in roles_in_use(settings):
        try:
            endpoint_for(settings, role)
        except SettingsError as exc:
            _fail(str(exc))


def _preflight(settings) -> None:
    """Fail fast, with the reason, on what would otherwise fail inside the run."""
    from endless_assets.llm.preflight import require_model, roles_in_use
    from endless_assets.settings import SettingsError

    for role in roles_in_use(settings):  # named, and served where the endpoint lists models
        try:
            require_model(settings, role)
        except SettingsError as exc:
            _fail(str(exc))
    check_engines(settings)


def print_funnel(
    data_dir: str,
    batch: str,
    *,
    what: str = "batch",
    why: str = "why tasks did not survive",
    after_stage: int = 0,
) -> None:
    """A batch's funnel, why its tasks did not survive (stages after `after_stage`), its
    learnable share and its draw: each table that has rows."""
    from endless_assets.store.funnel import COUNTS
    from endless_assets.store.lake import Lake

    lake = Lake(data_dir)
    tables = (
        (
            f"select stage, {', '.join(COUNTS)} from funnel where batch = ? order by stage_order",
            [batch],
            f"funnel of {what} {batch}",
        ),
        (
            "select stage, reason, tasks, example from funnel_reasons "
            "where batch = ? and stage_order > ? order by stage_order, tasks desc",
            [batch, after_stage],
            why,
        ),
        (
            "select solver, kept, learnable, learnable_share, tokens_per_learnable, "
            "seconds_per_learnable from learnable where batch = ? order by solver",
            [batch],
            "learnable share: kept tasks with 0 < pass rate < 1",
        ),
        (
            "select mode, cells, floor, explore, exploit, evolve, expected_learnable_share, "
            "learnable_share from frontier_batches where batch = ?",
            [batch],
            "the describe stage's draw (frontier sampler): expected, then measured",
        ),
    )
    for i, (sql, params, title) in enumerate(tables):
        _print_rows(lake, sql, params, title, always=i == 0)


def _print_rows(lake, sql: str, params: list, title: str, *, always: bool = False) -> None:
    """The query's rows as a table under `title`; nothing when there are none (unless
    `always`)."""
    from endless_assets.store.catalog import query

    rows = query(lake, sql, params)
    if len(rows) or always:
        print_frame(rows, title=title)


def _kept(data_dir: str, batch: str) -> int:
    from endless_assets.store.catalog import query
    from endless_assets.store.lake import Lake

    frame = query(
        Lake(data_dir),
        "select count(*) as n from filtered_dataset where batch = ? and kept",
        [batch],
    )
    return int(frame["n"][0]) if len(frame) else 0


@app.command()
def sql(
    query_text: Annotated[str, typer.Argument(metavar="QUERY", help="SQL over the catalog")],
    format: Annotated[OutputFormat, typer.Option("--format", "-f")] = OutputFormat.table,
) -> None:
    """Run a SQL query over every materialized batch (DuckDB views over the Parquet lake)."""
    from endless_assets.store.catalog import CatalogError, query
    from endless_assets.store.lake import Lake

    lake = Lake(resolved_settings().run.data_dir)
    try:
        frame = query(lake, query_text)
    except CatalogError as exc:
        _fail(str(exc))
    print_frame(frame, format)


@app.command()
def settings(
    format: Annotated[OutputFormat, typer.Option("--format", "-f")] = OutputFormat.table,
) -> None:
    """Print every setting, by group, with its environment variable, default and current value."""
    from endless_assets.settings import FIELDS

    current = resolved_settings().as_dict()
    frame = pl.DataFrame(
        {
            "group": [f.group for f in FIELDS],
            "setting": [f.name for f in FIELDS],
            "env": [f.env for f in FIELDS],
            "default": [str(f.default) for f in FIELDS],
            "current": [str(current[f.name]) for f in FIELDS],
            "meaning": [f.help for f in FIELDS],
        }
    )
    print_frame(frame, format)


@app.command()
def catalog() -> None:
    """Rebuild data/endless.duckdb (views over the lake); normally automatic."""
    from endless_assets.store.catalog import rebuild_catalog
    from endless_assets.store.lake import Lake

    path = rebuild_catalog(Lake(resolved_settings().run.data_dir))
    out.print(f"catalog rebuilt: {path}")
