"""The dataset as a product: every export format and the HTML report, from the whole lake (or
chosen batches), with the headline figures as metadata (report/product.py does the work).

Unpartitioned and downstream of both families of `filtered_dataset` through `deps` (it reads
the lake itself, so a missing partition is never a failure). It writes
`<data_dir>/exports/<format>/` and `<data_dir>/exports/report.html`.
"""

from collections import Counter
from pathlib import Path

import dagster as dg

from endless_assets.defs.columns import OWNERS
from endless_assets.defs.metadata import counts_table, frame_table
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import GENERATED, IMPORTED
from endless_assets.report.product import FORMATS, ProductError, export_product

STATS = ("funnel", "category_mix", "difficulty", "failure_modes", "token_cost")


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
    try:
        made = export_product(
            pipeline.lake(),
            pipeline.resolve(),
            config.formats,
            out_dir=Path(config.out_dir) if config.out_dir else None,
            batches=config.batches or None,
            base_image=config.base_image or None,
            val_fraction=config.val_fraction,
            report=config.report,
            log=context.log.info,
        )
    except ProductError as exc:
        raise dg.Failure(str(exc)) from exc
    metadata: dict = {}
    for summary in made.exports:
        metadata[f"{summary.format}_path"] = dg.MetadataValue.path(str(summary.out))
        metadata[f"{summary.format}_rows"] = counts_table(Counter(summary.rows), "part", "rows")
    if made.report is not None:
        metadata["report"] = dg.MetadataValue.path(str(made.report))
    metadata.update(made.figures)
    metadata.update({name: frame_table(made.tables[name], limit=50) for name in STATS})
    return dg.MaterializeResult(metadata=metadata)
