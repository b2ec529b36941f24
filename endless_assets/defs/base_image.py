"""The base image asset: Debian minbase + python3 + pytest + the agent user, built once."""

import dagster as dg

from endless_assets.defs.columns import OWNERS
from endless_assets.defs.resources import PipelineSettings
from endless_assets.sandbox.image.base_image import PACKAGES, SUITE, base_image_tag


@dg.asset(
    group_name="pipeline",
    kinds={"docker"},
    code_version=base_image_tag(),
    owners=OWNERS,
    tags={"endless/stage": "base"},
    description="Debian bookworm minbase + python3 + pytest + non-root `user` (/home/user), "
    "built with debootstrap and `docker import`; tagged by a hash of its recipe.",
)
def base_image(
    context: dg.AssetExecutionContext, pipeline: PipelineSettings
) -> dg.MaterializeResult:
    sandbox = pipeline.sandbox()
    image = sandbox.base
    context.log.info(f"base image {image.tag} ({'built' if image.built else 'already present'})")
    return dg.MaterializeResult(
        metadata={
            "tag": image.tag,
            "image_id": image.image_id,
            "built_now": image.built,
            "seconds": round(image.seconds, 2),
            "suite": SUITE,
            "packages": ", ".join(PACKAGES),
        }
    )
