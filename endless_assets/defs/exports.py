"""The dataset as a product: every export format and the HTML report, from the whole lake (or
chosen batches), with the headline figures as metadata.

Unpartitioned and downstream of both families of `filtered_dataset` through `deps` (it reads
the lake itself, so a missing partition is never a failure). It writes
`<data_dir>/exports/<format>/` and `<data_dir>/exports/report.html`, each replaced whole only
when written completely; a task that fails validation fails the materialization with its id and
leaves the previous exports as they were.
"""

from collections import Counter
from pathlib import Path

import dagster as dg

from endless_assets.defs.columns import OWNERS
from endless_assets.defs.common import counts_table, frame_table
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import GENERATED, IMPORTED
from endless_assets.interop import FORMATS, ExportError, OutputError, export_dataset
from endless_assets.interop.output import adopt_earlier_export
from endless_assets.report import headline, stats_tables, write_report
from endless_assets.store.lake import LakeError


class ExportsConfig(dg.Config):
    formats: list[str] = list(FORMATS)  # noqa: RUF012 (pydantic copies defaults)
    batches: list[str] = []  # noqa: RUF012 (empty: every batch)
    out_dir: str = ""  # empty: <data_dir>/exports
    base_image: str = ""  # empty: our base image tag
    val_fraction: float = 0.0
    report: bool = True


@dg.asset(
    group_name="exports",
    owners=OWNERS,
    tags={"endless/stage": "exports"},
    kinds={"python", "parquet"},
    deps=[GENERATED.key("filtered_dataset"), IMPORTED.key("filtered_dataset")],
    description="Harbor and Terminal-Bench task directories, RL and SFT rows (Parquet + JSONL) "
    "and the HTML report, from the kept tasks of every batch (or the chosen ones); headline "
    "figures as metadata.",
)
def dataset_exports(
    context: dg.AssetExecutionContext, pipeline: PipelineSettings, config: ExportsConfig
) -> dg.MaterializeResult:
    settings = pipeline.resolve()
    lake = pipeline.lake()
    out_dir = Path(config.out_dir) if config.out_dir else lake.data_dir / "exports"
    batches = config.batches or None
    unknown = sorted(set(config.formats) - set(FORMATS))
    if unknown:
        raise dg.Failure(f"unknown export format(s) {unknown}; choose from {list(FORMATS)}")
    metadata: dict = {}
    try:
        for fmt in config.formats:
            if not config.out_dir and adopt_earlier_export(out_dir / fmt, fmt):
                context.log.info(f"{out_dir / fmt}: an export written before markers, adopted")
            summary = export_dataset(
                lake,
                fmt,
                out_dir / fmt,
                batches=batches,
                base_image=config.base_image or None,
                settings=settings,
                overwrite=True,
                val_fraction=config.val_fraction,
            )
            context.log.info(f"{fmt}: {summary.tasks} tasks -> {summary.out} {summary.rows}")
            metadata[f"{fmt}_path"] = dg.MetadataValue.path(str(summary.out))
            metadata[f"{fmt}_rows"] = counts_table(Counter(summary.rows), "part", "rows")
        figures = headline(lake, batches)
        tables = {t.name: t.frame for t in stats_tables(lake, batches)}
        if config.report:
            report = write_report(lake, out_dir / "report.html", batches)
            metadata["report"] = dg.MetadataValue.path(str(report))
    except (ExportError, OutputError, LakeError) as exc:
        raise dg.Failure(f"export failed, previous exports left as they were: {exc}") from exc
    metadata.update({name: value for name, value in figures.items()})
    for name in ("funnel", "category_mix", "difficulty", "failure_modes", "token_cost"):
        metadata[name] = frame_table(tables[name], limit=50)
    return dg.MaterializeResult(metadata=metadata)
