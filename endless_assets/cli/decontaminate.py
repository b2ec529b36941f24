"""`endless decontaminate`: check materialized batches' kept tasks again against the benchmarks
set now, through Dagster (the `contamination_recheck` asset), nothing rebuilt or run again."""

from __future__ import annotations

from typing import Annotated

import typer

from endless_assets.cli import app as cli
from endless_assets.cli.app import app

BatchOption = Annotated[
    list[str] | None,
    typer.Option("--batch", "-b", help="a batch to check again (repeat; default: every batch)"),
]


@app.command()
def decontaminate(
    batch: BatchOption = None,
    references: Annotated[
        str | None,
        typer.Option(
            help="the reference sets for this check (default: decontamination_references), "
            "comma-separated, each name=path or a bare path"
        ),
    ] = None,
    quiet: cli.QuietOption = False,
) -> None:
    """Check the kept tasks of materialized batches again, every field, against the benchmarks
    of decontamination_references (or --references) as they are now: a new materialization of
    contamination_recheck per batch; `endless export` then leaves the contaminated ones out."""
    overrides = {"decontamination_references": references}
    settings = cli.resolved_settings(**overrides)
    if not settings.decontamination.references.strip():
        cli._fail(
            "no reference set to check against: set decontamination_references "
            "(ENDLESS_DECONTAMINATION_REFERENCES) or give --references"
        )
    data = cli.lake(settings)
    known = data.batches("filtered_dataset")
    chosen = batch or known
    missing = sorted(set(chosen) - set(known))
    if missing:
        cli._fail(
            f"no filtered_dataset partition for batch(es) {', '.join(missing)} "
            f"(materialized: {', '.join(known) or 'none'})"
        )
    if not chosen:
        cli._fail("no batch has a filtered dataset yet: run one first (endless run)")
    failed = []
    for key in chosen:
        result = _recheck(key, overrides, cli.log_level(quiet))
        if not result.success:
            failed.append(key)
            cli.err.print(f"batch {key}: the recheck run {result.run_id} failed")
            continue
        _print_batch(data, key)
    if failed:
        raise typer.Exit(1)


def _recheck(batch: str, overrides: dict, level: str):
    import dagster as dg

    from endless_assets.defs.partitions import imported_batches
    from endless_assets.launch import ensure_dagster_home, launch_job

    ensure_dagster_home(overrides)
    with dg.DagsterInstance.get() as instance:
        imported = instance.has_dynamic_partition(imported_batches.name or "", batch)
    job = "recheck_imported_contamination" if imported else "recheck_contamination"
    return launch_job(
        job,
        batch,
        overrides,
        launched_by="endless decontaminate",
        log_level=level,
        dynamic_partitions=imported_batches.name if imported else None,
    )


def _print_batch(lake, batch: str) -> None:
    import polars as pl

    rows = lake.read("contamination_recheck", batch)
    bad = rows.filter(pl.col("status") == "rejected")
    sets = rows["reference_sets"][0] if len(rows) else "the reference sets"
    cli.out.print(
        f"batch {batch}: {len(rows)} kept task(s) checked against {sets}: {len(bad)} contaminated"
    )
    for row in bad.sort("task_id").to_dicts():
        cli.out.print(f"  {row['task_id']}: {row['reject_reason']}")
