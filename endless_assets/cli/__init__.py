"""`endless`: run batches through Dagster, query the dataset, manage the sandbox.

Each module below registers its commands on the one Typer app.
"""

from endless_assets.cli import (  # noqa: F401  (registers commands)
    check,
    dataset,
    decontaminate,
    engines,
    pipeline,
    serve,
    show,
)
from endless_assets.cli.app import app
from endless_assets.cli.check import show_lake_warnings


def main() -> None:
    show_lake_warnings()
    app()
