"""The base image asset: Debian minbase + python3 + pytest + the agent user, built once
(stages/base_image.py)."""

import dagster as dg

from endless_assets.defs.columns import OWNERS
from endless_assets.defs.resources import PipelineSettings
from endless_assets.stages.base_image import base_image_version, ensure_base_image


@dg.asset(
    group_name="pipeline",
    kinds={"docker"},
    code_version=base_image_version(),
    owners=OWNERS,
    tags={"endless/stage": "base"},
    description="Debian bookworm minbase + python3 + pytest + non-root `user` (/home/user), "
    "built with debootstrap and `docker import`; tagged by a hash of its recipe.",
)
def base_image(
    context: dg.AssetExecutionContext, pipeline: PipelineSettings
) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata=ensure_base_image(pipeline.sandbox(), context.log))
