"""`endless check`: is the data directory sound? And the warnings of the lake, one line each."""

from __future__ import annotations

import logging
from typing import Annotated

import polars as pl
import typer

from endless_assets.cli import app as cli
from endless_assets.cli.app import FormatOption, OutputFormat, app, err, out, print_frame


class _OneLine(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        err.print(f"[yellow]warning:[/] {record.getMessage()}", highlight=False, soft_wrap=True)


def show_lake_warnings() -> None:
    """Warnings of the lake (a partition moved aside) reach the terminal, one line each."""
    logger = logging.getLogger("endless.lake")
    if not any(isinstance(h, _OneLine) for h in logger.handlers):
        logger.addHandler(_OneLine())


@app.command()
def check(
    fix: Annotated[
        bool,
        typer.Option("--fix", help="move unreadable partitions aside and rebuild the catalog"),
    ] = False,
    format: FormatOption = OutputFormat.table,
) -> None:
    """Read every partition in full, hold it against its table's schema, open the catalog and
    query every view, look for runs whose process is gone; list what is wrong (exit 1 if
    anything is and was not fixed)."""
    from endless_assets.store.check import check_lake

    lake = cli.lake()
    findings = check_lake(lake, fix=fix) + _dead_runs(fix)
    open_problems = [f for f in findings if f.kind != "quarantined" and not f.fixed]
    if not findings:
        out.print(f"{lake.data_dir}: every partition and the catalog are sound")
        return
    frame = pl.DataFrame(
        {
            "kind": [f.kind for f in findings],
            "path": [f.path for f in findings],
            "problem": [f.problem for f in findings],
            "fixed": [f.fixed for f in findings],
        }
    )
    print_frame(frame, format, title=f"{lake.data_dir}")
    if open_problems:
        hint = "" if fix else " (endless check --fix moves bad partitions aside, fails dead runs)"
        err.print(f"{len(open_problems)} problem(s){hint}")
        raise typer.Exit(1)


def _dead_runs(fix: bool) -> list:
    """Runs of the DAGSTER_HOME instance whose process is gone (they hold their Dagster pool
    slots), as findings; with `fix`, marked failed and their pool slots freed."""
    from endless_assets.cli.runs import dead_runs_found, reap_dead_runs
    from endless_assets.store.check import Finding

    found = dead_runs_found()
    if found and fix:
        reap_dead_runs()
    return [
        Finding(
            "dead run",
            run_id,
            f"still in progress, but its process ({owner}) is gone: it holds its Dagster "
            "pool slots",
            fixed="marked failed, pool slots freed" if fix else "",
        )
        for run_id, owner in found
    ]
