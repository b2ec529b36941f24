"""The `endless` Typer app and the output helpers every command shares."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from typing import Any

import polars as pl
import typer
from rich.console import Console
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


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def print_frame(
    frame: pl.DataFrame, fmt: OutputFormat = OutputFormat.table, title: str = ""
) -> None:
    if fmt is OutputFormat.csv:
        sys.stdout.write(frame.write_csv())
        return
    if fmt is OutputFormat.json:
        sys.stdout.write(json.dumps(frame.to_dicts(), default=str, ensure_ascii=False, indent=1))
        sys.stdout.write("\n")
        return
    table = Table(title=title or None, show_lines=False)
    for name in frame.columns:
        numeric = frame.schema[name].is_numeric()
        table.add_column(name, justify="right" if numeric else "left", overflow="fold")
    for row in frame.iter_rows():
        table.add_row(*[_cell(v) for v in row])
    out.print(table)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    text = str(value)
    return text if len(text) <= 200 else text[:197] + "..."
