"""The `endless` Typer app and the output helpers every command shares."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Annotated, Any

import polars as pl
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="endless: verified terminal tasks for training shell agents, made by a Dagster pipeline.",
)
out = Console()
err = Console(stderr=True)


class OutputFormat(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


FormatOption = Annotated[OutputFormat, typer.Option("--format", "-f")]
QuietOption = Annotated[bool, typer.Option(help="only warnings from Dagster")]
SolverOption = Annotated[str | None, typer.Option(help="oracle | noop | chat")]
KOption = Annotated[int | None, typer.Option(help="solver attempts per task")]
WorkersOption = Annotated[int | None, typer.Option(help="tasks in parallel per stage")]


def _fail(message: str, code: int = 2) -> None:
    """One line on stderr, however narrow the terminal, and exit (2: bad input)."""
    err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True, highlight=False)
    raise typer.Exit(code)


@contextmanager
def failing(*errors: type[BaseException], code: int = 2, say: str = "{}") -> Iterator[None]:
    """One of `errors` raised inside: `say` (its message at {}) as one line, and exit `code`."""
    try:
        yield
    except errors as exc:
        _fail(say.format(exc), code)


def resolved_settings(**overrides: Any) -> Any:
    """The settings (with the command line's `overrides`; None: not given), or one line naming
    the bad one and exit 2."""
    from endless_assets.settings import Settings, SettingsError

    with failing(SettingsError):
        return Settings.resolve(**overrides)


def lake(settings: Any = None) -> Any:
    """The lake of `settings` (default: as the environment says)."""
    from endless_assets.store.lake import Lake

    return Lake((settings or resolved_settings()).run.data_dir)


def check_run(result: Any, where: str) -> None:
    """A launched run that failed: its failed steps and `where` to read about it; exit 1."""
    if not result.success:
        failed = ", ".join(result.failed_steps) or "?"
        _fail(f"run {result.run_id} failed at step(s) {failed}; see the log above or {where}", 1)


def log_level(quiet: bool) -> str:
    return "WARNING" if quiet else "INFO"


def print_frame(
    frame: pl.DataFrame, fmt: OutputFormat = OutputFormat.table, title: str = ""
) -> None:
    if fmt is OutputFormat.csv:
        sys.stdout.write(_flat(frame).write_csv())
        return
    if fmt is OutputFormat.json:
        sys.stdout.write(json.dumps(frame.to_dicts(), default=str, ensure_ascii=False, indent=1))
        sys.stdout.write("\n")
        return
    table = Table(title=title or None, show_lines=False)
    for name in frame.columns:
        numeric = frame.schema[name].is_numeric()
        table.add_column(name, justify="right" if numeric else "left", overflow="fold")
    rows = [[_cell(v) for v in row] for row in frame.iter_rows()]
    for row in rows:
        table.add_row(*row)
    if out.is_terminal:
        out.print(table)
        return
    # Piped or redirected: as wide as the table needs, so that no cell is cut or folded.
    widths = [max([len(n), *(len(r[i]) for r in rows)]) for i, n in enumerate(frame.columns)]
    Console(width=max(80, sum(widths) + 3 * len(widths) + 1), soft_wrap=True).print(table)


def _flat(frame: pl.DataFrame) -> pl.DataFrame:
    """Nested columns (lists, structs, maps) as JSON text: CSV holds flat values only."""
    nested = [n for n, t in frame.schema.items() if t.is_nested() or t == pl.Object]
    return frame.with_columns(
        pl.Series(n, [json.dumps(v, default=str) for v in frame[n].to_list()]) for n in nested
    )


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    text = str(value)
    return text if len(text) <= 200 else text[:197] + "..."
