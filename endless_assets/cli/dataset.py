"""Dataset commands: look at it (`stats`, `report`), ship it (`export`), bring tasks in
(`import harbor`)."""

from __future__ import annotations

import json
import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from endless_assets.cli import app as cli
from endless_assets.cli.app import app

BatchOption = Annotated[
    list[str] | None,
    typer.Option("--batch", "-b", help="only this batch (repeatable); default: every batch"),
]


class ExportFormat(StrEnum):
    harbor = "harbor"
    terminal_bench = "terminal-bench"
    rl = "rl"
    sft = "sft"
    atif = "atif"


@app.command()
def stats(
    batch: BatchOption = None,
    format: cli.FormatOption = cli.OutputFormat.table,
) -> None:
    """Print the stats views as tables (funnel, mix, difficulty, failures, cost, models, and
    the frontier draw per batch: expected before it, measured after).

    The catalog's stats views, summed over the chosen batches (all by default).
    """
    from endless_assets.report import headline, stats_tables
    from endless_assets.store.lake import LakeError

    lake = cli.lake()
    with cli.failing(LakeError):
        tables = stats_tables(lake, batch)
        figures = headline(lake, batch)
    if format is cli.OutputFormat.json:
        payload: dict[str, Any] = {"headline": figures}
        payload.update({t.name: t.frame.to_dicts() for t in tables})
        sys.stdout.write(json.dumps(payload, default=str, ensure_ascii=False, indent=1) + "\n")
        return
    if format is cli.OutputFormat.csv:
        for t in tables:
            sys.stdout.write(f"# {t.name}\n")
            cli.print_frame(t.frame, format)
            sys.stdout.write("\n")
        return
    scope = ", ".join(batch) if batch else "all batches"
    cli.out.print(
        f"[bold]{scope}[/]: {figures['tasks_sampled']} tasks sampled in {figures['batches']} "
        f"batch(es), {figures['tasks_kept']} kept ({figures['keep_rate']:.1%}; learnable "
        f"{figures['learnable_share']:.1%}), mean pass rate "
        f"of kept tasks {figures['mean_pass_rate_kept']:.2f}, {figures['rollouts']} rollouts, "
        f"{figures['tokens']:,} tokens ({figures['tokens_per_kept_task']:,.0f} per kept task)"
    )
    for t in tables:
        if t.frame.is_empty():
            cli.out.print(f"[dim]{t.title}: no rows[/]")
            continue
        cli.print_frame(t.frame, format, title=t.title)


@app.command()
def report(
    out_path: Annotated[Path, typer.Option("--out", "-o", help="the HTML file to write")] = Path(
        "report.html"
    ),
    batch: BatchOption = None,
    sample: Annotated[int, typer.Option(help="kept tasks in the browsable sample")] = 40,
) -> None:
    """Write one self-contained HTML report (charts, tables, a sample of tasks; opens offline)."""
    from endless_assets.report import write_report
    from endless_assets.store.lake import LakeError

    with cli.failing(LakeError):
        path = write_report(cli.lake(), out_path, batch, sample=sample)
    cli.out.print(f"report written: {path}")


@app.command()
def export(
    format: Annotated[ExportFormat, typer.Option("--format", "-f", help="what to write")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="directory to write")],
    batch: BatchOption = None,
    base_image: Annotated[
        str | None,
        typer.Option(help="image the exported Dockerfiles build FROM; default: our base image"),
    ] = None,
    val_fraction: Annotated[
        float, typer.Option(help="rl: share of tasks in validation.parquet (by task id hash)")
    ] = 0.0,
    overwrite: Annotated[
        bool,
        typer.Option(help="replace OUT if an earlier export wrote it (it holds .endless-export)"),
    ] = False,
    include_contaminated: Annotated[
        bool,
        typer.Option(help="also export kept tasks that `endless decontaminate` found contaminated"),
    ] = False,
) -> None:
    """Export the kept tasks: Harbor or Terminal-Bench task directories, RL or SFT rows; or
    every attempt's trajectory (solver rollouts, served episodes) as ATIF documents. Kept tasks
    that the latest `endless decontaminate` of their batch found contaminated are left out
    (and counted) unless --include-contaminated.

    OUT is never the data directory (nor above or inside it, but for its exports/), the working
    or home directory or /; a destination that cannot be written is refused (exit 2)."""
    from endless_assets.interop import ExportError, OutputError, export_dataset
    from endless_assets.store.lake import LakeError

    settings = cli.resolved_settings()
    with (
        cli.failing(OutputError, say="export refused, nothing written: {}"),
        cli.failing(ExportError, LakeError, code=1, say="export failed, nothing written: {}"),
    ):
        summary = export_dataset(
            cli.lake(settings),
            format.value,
            out_dir,
            batches=batch,
            base_image=base_image,
            settings=settings,
            overwrite=overwrite,
            val_fraction=val_fraction,
            include_contaminated=include_contaminated,
        )
    rows = ", ".join(f"{k}: {v}" for k, v in summary.rows.items())
    what = "task(s) with trajectories" if format is ExportFormat.atif else "kept tasks"
    cli.out.print(f"{format.value}: {summary.tasks} {what} -> {summary.out.resolve()} ({rows})")
    if summary.contaminated_left_out:
        cli.out.print(
            f"{summary.contaminated_left_out} kept task(s) left out: found contaminated by "
            "`endless decontaminate` (--include-contaminated to export them)"
        )


import_app = typer.Typer(
    no_args_is_help=True, help="Bring task sets from elsewhere into the lake as a batch."
)
app.add_typer(import_app, name="import")


SourceArgument = Annotated[Path, typer.Argument(help="a task directory or a directory of them")]
BatchName = Annotated[str, typer.Option("--batch", "-b", help="name of the imported batch")]
ImageMap = Annotated[
    list[str] | None,
    typer.Option(
        "--base-image-map",
        help="IMAGE=REPLACEMENT for base images this machine cannot pull (repeatable); "
        "REPLACEMENT 'endless-base' means our base image (setting base_recipe), "
        "'endless-base-bookworm' or 'endless-base-trixie' one of its recipes",
    ),
]


def _import_command(fmt: str, doc: str) -> None:
    """`endless import FMT`: the same options for every format."""

    def command(
        source: SourceArgument,
        batch: BatchName,
        base_image_map: ImageMap = None,
        solver: cli.SolverOption = None,
        k: cli.KOption = None,
        workers: cli.WorkersOption = None,
        quiet: cli.QuietOption = False,
    ) -> None:
        _import(fmt, source, batch, base_image_map, solver, k, workers, quiet)

    command.__doc__ = doc
    import_app.command(fmt)(command)


_import_command(
    "harbor",
    "Import Harbor tasks as a batch, then validate, roll out and filter them through Dagster.",
)
_import_command(
    "terminal-bench",
    """Import Terminal-Bench 1.x tasks as a batch, then validate, roll out and filter them.

    A task directory holds task.yaml, a Dockerfile (or docker-compose.yaml with one service),
    run-tests.sh, tests/ and solution.sh; it is read the way Harbor's mapper converts it.""",
)


def _import(
    fmt: str,
    source: Path,
    batch: str,
    base_image_map: list[str] | None,
    solver: str | None,
    k: int | None,
    workers: int | None,
    quiet: bool,
) -> None:
    from endless_assets.interop.dockerfile import DockerfileError, parse_image_map
    from endless_assets.sandbox.image.base_image import symbolic_names
    from endless_assets.store.lake import LakeError, check_batch_key

    with cli.failing(LakeError, DockerfileError):
        check_batch_key(batch)
        mapping = parse_image_map(base_image_map or [])
    for image, target in mapping.items():
        ours = target.startswith("endless-base") and ":" not in target
        if ours and target not in symbolic_names():
            cli._fail(
                f"--base-image-map {image}={target}: {target} is not one of "
                f"{', '.join(symbolic_names())}"
            )
    source = source.expanduser().resolve()
    if not source.is_dir():
        cli._fail(f"{source} is not a directory")
    overrides = {"solver": solver, "k": k, "workers": workers}
    settings = cli.resolved_settings(**overrides)
    cli.err.print(
        f"[bold]endless import {fmt}[/] {source} as batch {batch}: solver {settings.solver.policy} "
        f"(k={settings.solver.attempts}), data in {settings.run.data_dir}"
    )
    from endless_assets.cli.submit import open_instance

    open_instance(overrides)  # (a DAGSTER_PG_URL that does not answer: one line, exit 2)
    _warn_missing_images(source, batch, mapping, settings, fmt)
    started = time.monotonic()
    result = launch_import(
        batch,
        source,
        mapping,
        overrides,
        log_level=cli.log_level(quiet),
        fmt=fmt,
    )
    _print_import_summary(settings.run.data_dir, batch)
    cli.check_run(result, "the run in `dagster dev`")
    cli.out.print(
        f"[bold green]imported batch {batch} done[/] in {time.monotonic() - started:.0f} s "
        f"(run {result.run_id})"
    )


def _warn_missing_images(
    source: Path, batch: str, mapping: dict[str, str], settings: Any, fmt: str
) -> None:
    """Say up front which base images this engine lacks: their tasks fail to build in the build
    stage unless the engine can pull them."""
    import docker.errors

    from endless_assets.interop.dockerfile import base_images
    from endless_assets.interop.harbor_import import ImportProblem
    from endless_assets.interop.imports import import_tasks
    from endless_assets.sandbox.engine.client import SandboxError, docker_client
    from endless_assets.sandbox.image.base_image import base_image_tag

    try:
        outcomes = import_tasks(
            source,
            batch,
            fmt=fmt,
            base_image_map=mapping,
            base_image=base_image_tag(settings.imports.base_recipe),
            recipes=base_image_tag,
            max_binary_bytes=int(settings.imports.max_binary_file_mb * 2**20),
        )
        client = docker_client(settings.sandbox.docker_host or None)
    except (ImportProblem, SandboxError, ValueError):
        return  # the run reports it
    ours = {base_image_tag(name) for name in ("bookworm", "trixie")}  # built by the run
    drafts = [o.draft for o in outcomes if o.draft]
    files = [d.dockerfile for d in drafts] + [s.dockerfile for d in drafts for s in d.services]
    images = sorted({i for f in files for i in base_images(f)} - ours)
    for image in images:
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound:
            cli.err.print(
                f"[yellow]warning:[/] base image {image} is not on this Docker engine: its tasks "
                f"will be rejected (build_failed) unless it can be pulled; map it with "
                f"--base-image-map {image}=endless-base"
            )
        except docker.errors.DockerException:
            return


def launch_import(
    batch: str,
    source: Path,
    base_image_map: dict[str, str],
    overrides: dict[str, Any],
    *,
    log_level: str = "INFO",
    fmt: str = "harbor",
):
    """Add the partition on the instance and run the `imported_batch` job for it."""
    from endless_assets.defs.imports import IMPORT_OP
    from endless_assets.defs.partitions import imported_batches
    from endless_assets.launch import launch_job

    import_config = {
        "source_dir": str(source),
        "format": fmt,
        "base_image_map": base_image_map,
    }
    return launch_job(
        "imported_batch",
        batch,
        overrides,
        launched_by="endless import",
        log_level=log_level,
        extra_run_config={"ops": {IMPORT_OP: {"config": import_config}}},
        dynamic_partitions=imported_batches.name,
    )


def _print_import_summary(data_dir: str, batch: str) -> None:
    import polars as pl

    from endless_assets.store.catalog import query
    from endless_assets.store.lake import Lake

    lake = Lake(data_dir)
    if batch not in lake.batches("task_descriptions"):
        return
    imported = query(
        lake,
        "select count(*) filter (where status = 'ok') as imported, "
        "count(*) filter (where status <> 'ok') as not_imported "
        "from task_descriptions where batch = ?",
        [batch],
    ).row(0, named=True)
    cli.out.print(
        f"{imported['imported']} task(s) imported, {imported['not_imported']} not imported"
    )
    rejected = query(
        lake,
        "select reject_reason from task_descriptions where batch = ? and status <> 'ok' order by 1",
        [batch],
    )["reject_reason"].to_list()
    split = [reason.removeprefix("import_failed: ").split(": ", 1) for reason in rejected]
    failures = pl.DataFrame(
        {
            "directory": [parts[0] for parts in split],
            "reason": [parts[1] if len(parts) > 1 else "" for parts in split],
        }
    )
    if len(failures):
        cli.print_frame(failures, title="task directories not imported")
    from endless_assets.cli.pipeline import print_funnel

    print_funnel(
        data_dir,
        batch,
        what="imported batch",
        why="why imported tasks did not survive",
        after_stage=1,
    )
