"""Exports of the verified dataset (Harbor, Terminal-Bench, RL and SFT rows, ATIF trajectories)
and imports of task sets from elsewhere (Harbor task directories).

`export_dataset` is the one entry point the CLI (`endless export`) and the `dataset_exports`
asset share: it loads the kept tasks of the chosen batches from the lake (less those the latest
`contamination_recheck` found contaminated, unless asked to include them), validates every one
(a malformed task fails the export with its id before anything is written) and writes the
format, each task with its quality record (quality.py: the evidence the lake holds for it), into
a staging directory that replaces `out` only when complete. `out` is checked first
(output.py): never the data directory, above it or inside it (but for `<data_dir>/exports/`),
the working or home directory or `/`; an existing one is replaced only when empty or marked as
an earlier export's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from endless_assets.interop.atif import export_atif
from endless_assets.interop.harbor import export_harbor
from endless_assets.interop.output import MARKER, OutputError, check_destination
from endless_assets.interop.quality import quality_records
from endless_assets.interop.tasks import ExportError, load_tasks
from endless_assets.interop.terminal_bench import export_terminal_bench
from endless_assets.interop.trainer import export_rl, export_sft
from endless_assets.settings import Settings
from endless_assets.store.lake import Lake, resolve_data_dir

FORMATS = ("harbor", "terminal-bench", "rl", "sft", "atif")

__all__ = [
    "FORMATS",
    "MARKER",
    "ExportError",
    "ExportSummary",
    "OutputError",
    "check_destination",
    "export_dataset",
]


@dataclass(frozen=True)
class ExportSummary:
    format: str
    out: Path
    tasks: int
    rows: dict[str, int] = field(default_factory=dict)
    contaminated_left_out: int = 0  # kept tasks a recheck found contaminated, not exported


def export_dataset(
    lake: Lake,
    fmt: str,
    out: Path,
    *,
    batches: list[str] | None = None,
    base_image: str | None = None,
    settings: Settings | None = None,
    overwrite: bool = False,
    val_fraction: float = 0.0,
    include_contaminated: bool = False,
) -> ExportSummary:
    """Write the kept tasks of `batches` (all when None) as `fmt` into `out`. Tasks the latest
    `contamination_recheck` of their batch found contaminated are left out (and counted in the
    summary) unless `include_contaminated`."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r} (one of: {', '.join(FORMATS)})")
    if base_image is None:
        from endless_assets.sandbox.image.base_image import base_image_tag

        base_image = base_image_tag()
    settings = settings or Settings.resolve()
    data_dirs = [lake.data_dir, resolve_data_dir(settings.run.data_dir)]
    check_destination(out, overwrite=overwrite, data_dirs=data_dirs)  # before reading anything
    summary = _export(
        lake,
        fmt,
        Path(out),
        batches,
        base_image,
        settings,
        overwrite,
        val_fraction,
        set() if include_contaminated else contaminated_task_ids(lake, batches),
    )
    return summary


def _export(
    lake: Lake,
    fmt: str,
    out: Path,
    batches: list[str] | None,
    base_image: str,
    settings: Settings,
    overwrite: bool,
    val_fraction: float,
    contaminated: set[str],
) -> ExportSummary:
    if fmt == "atif":  # every attempt's trajectory, kept task or not
        tasks_with_documents, documents = export_atif(
            lake, out, batches=batches, overwrite=overwrite
        )
        return ExportSummary(fmt, out, tasks_with_documents, documents)
    kept = load_tasks(lake, batches)
    tasks = [t for t in kept if t.task_id not in contaminated]
    left_out = len(kept) - len(tasks)
    if kept and not tasks:
        raise ExportError(
            f"nothing to export: all {len(kept)} kept task(s) were found contaminated by "
            "contamination_recheck (include them with --include-contaminated)"
        )
    quality = quality_records(lake, tasks)
    if fmt in ("harbor", "terminal-bench"):
        write = export_harbor if fmt == "harbor" else export_terminal_bench
        written = write(tasks, out, base_image=base_image, overwrite=overwrite, quality=quality)
        return ExportSummary(fmt, out, len(tasks), {"task_dirs": len(written)}, left_out)
    if fmt == "rl":
        rows = export_rl(
            tasks,
            out,
            base_image=base_image,
            settings=settings,
            val_fraction=val_fraction,
            overwrite=overwrite,
            quality=quality,
        )
        return ExportSummary(fmt, out, len(tasks), rows, left_out)
    rows = export_sft(lake, tasks, out, overwrite=overwrite, quality=quality)
    return ExportSummary(fmt, out, len(tasks), rows, left_out)


def contaminated_task_ids(lake: Lake, batches: list[str] | None = None) -> set[str]:
    """Kept tasks that the latest `contamination_recheck` of their batch found contaminated."""
    import polars as pl

    if not lake.has_data("contamination_recheck"):
        return set()
    frame = lake.read_all("contamination_recheck").filter(pl.col("status") == "rejected")
    if batches:
        frame = frame.filter(pl.col("batch").is_in(batches))
    return set(frame["task_id"].to_list())
