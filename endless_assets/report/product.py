"""The dataset as a product (the `dataset_exports` asset, defs/exports.py): every export format
and the HTML report, from the whole lake or chosen batches, with the headline figures and stats
tables. Each export directory is replaced whole only when written completely; a task that fails
validation stops it with its id and leaves the previous exports as they were."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from endless_assets.interop import FORMATS, ExportError, ExportSummary, OutputError, export_dataset
from endless_assets.interop.output import adopt_earlier_export
from endless_assets.report.html import write_report
from endless_assets.report.tables import headline, stats_tables
from endless_assets.settings import Settings
from endless_assets.store.lake import Lake, LakeError

__all__ = ["FORMATS", "Product", "ProductError", "export_product"]


class ProductError(Exception):
    """An unknown format, or an export that failed (nothing of it replaced what was there)."""


@dataclass
class Product:
    exports: list[ExportSummary] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    report: Path | None = None


def export_product(
    lake: Lake,
    settings: Settings,
    formats: list[str],
    *,
    out_dir: Path | None = None,
    batches: list[str] | None = None,
    base_image: str | None = None,
    val_fraction: float = 0.0,
    report: bool = True,
    log: Callable[[str], None] = print,
) -> Product:
    """Write `formats` under `out_dir` (default <data_dir>/exports: an export there from before
    the markers is adopted) and, with `report`, report.html beside them."""
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise ProductError(f"unknown export format(s) {unknown}; choose from {list(FORMATS)}")
    root = out_dir or lake.data_dir / "exports"
    made = Product()
    try:
        for fmt in formats:
            if out_dir is None and adopt_earlier_export(root / fmt, fmt):
                log(f"{root / fmt}: an export written before markers, adopted")
            summary = export_dataset(
                lake,
                fmt,
                root / fmt,
                batches=batches,
                base_image=base_image,
                settings=settings,
                overwrite=True,
                val_fraction=val_fraction,
            )
            log(f"{fmt}: {summary.tasks} tasks -> {summary.out} {summary.rows}")
            made.exports.append(summary)
        made.figures = headline(lake, batches)
        made.tables = {t.name: t.frame for t in stats_tables(lake, batches)}
        if report:
            made.report = write_report(lake, root / "report.html", batches)
    except (ExportError, OutputError, LakeError) as exc:
        raise ProductError(f"export failed, previous exports left as they were: {exc}") from exc
    return made
