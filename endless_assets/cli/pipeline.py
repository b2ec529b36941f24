"""Pipeline commands: run a batch, query it, manage the sandbox and the catalog."""

from __future__ import annotations

import datetime as dt
import re
import time
from typing import Annotated

import polars as pl
import typer

from endless_assets.cli import app as cli
from endless_assets.cli.app import app
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
    k: cli.KOption = None,
    generator: Annotated[str | None, typer.Option(help="procedural | llm")] = None,
    solver: cli.SolverOption = None,
    workers: cli.WorkersOption = None,
    seed: Annotated[int | None, typer.Option(help="salt for the batch's seeds")] = None,
    quiet: cli.QuietOption = False,
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
        cli.OutputFormat, typer.Option("--format", "-f", help="how --plan prints its estimate")
    ] = cli.OutputFormat.table,
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
    settings = cli.resolved_settings(**overrides)
    from endless_assets.cli.plan import print_costs, print_plan, print_short
    from endless_assets.llm.preflight import endpoint_for, require_model

    if plan:  # a plan asks no endpoint, but a model the run would need must be named
        _each_role(settings, endpoint_for)
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
    cli.err.print(
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
    _each_role(settings, require_model)  # named, and served where the endpoint lists models
    check_engines(settings)
    print_short(settings, batch)
    started = time.monotonic()
    claim = _claim(settings.run.data_dir, batch)
    try:
        result = launch_batch(
            batch,
            overrides,
            log_level=cli.log_level(quiet),
            shards=shards,
            progress=cli.err.print,
        )
    finally:
        claim.close()
    wall = time.monotonic() - started
    if result.interrupted:
        cli._fail(
            f"interrupted: run {result.run_id} stopped and marked failed; `endless run` with the "
            "same date goes on from what it finished",
            code=130,
        )
    print_funnel(settings.run.data_dir, batch)
    cli.check_run(result, "the run in the UI (`dg dev`)")
    print_costs(settings.run.data_dir, batch)
    from endless_assets.store.catalog import query

    sql = "select count(*) as n from filtered_dataset where batch = ? and kept"
    kept = query(cli.lake(settings), sql, [batch])["n"].sum()
    cli.out.print(
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
        cli._fail(f"--date must be YYYY-MM-DD, got {date!r}")
    if not FLOOR <= day.isoformat() <= today():
        cli._fail(
            f"--date {date} is not a batch: batches run from {FLOOR} to {today()} (today UTC)"
        )
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
        cli._fail(str(exc))
    except OSError as exc:
        cli._fail(f"the data directory {where} cannot be written: {exc.strerror or exc}")
    try:
        batch_lock.check_free(where, batch)
    except batch_lock.BatchBusy as exc:
        claim.close()
        cli._fail(str(exc))
    return claim


def _each_role(settings, check) -> None:
    """`check(settings, role)` for every model role the run uses; a SettingsError: one line, exit
    2 (fail fast, with the reason, on what would otherwise fail inside the run)."""
    from endless_assets.llm.preflight import roles_in_use
    from endless_assets.settings import SettingsError

    for role in roles_in_use(settings):
        with cli.failing(SettingsError):
            check(settings, role)


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
    from endless_assets.store.catalog import query
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
        rows = query(lake, sql, params)
        if len(rows) or i == 0:  # (the funnel always; the others when they have rows)
            cli.print_frame(rows, title=title)


@app.command()
def sql(
    query_text: Annotated[str, typer.Argument(metavar="QUERY", help="SQL over the catalog")],
    format: cli.FormatOption = cli.OutputFormat.table,
) -> None:
    """Run a SQL query over every materialized batch (DuckDB views over the Parquet lake)."""
    from endless_assets.store.catalog import CatalogError, query

    with cli.failing(CatalogError):
        frame = query(cli.lake(), query_text)
    cli.print_frame(frame, format)


@app.command()
def settings(format: cli.FormatOption = cli.OutputFormat.table) -> None:
    """Print every setting, by group, with its environment variable, default and current value."""
    from endless_assets.settings import FIELDS

    current = cli.resolved_settings().as_dict()
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
    cli.print_frame(frame, format)


@app.command()
def catalog() -> None:
    """Rebuild data/endless.duckdb (views over the lake); normally automatic."""
    from endless_assets.store.catalog import rebuild_catalog

    cli.out.print(f"catalog rebuilt: {rebuild_catalog(cli.lake())}")
