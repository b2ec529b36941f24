"""The base image every task's environment builds FROM: the sandbox builds it when its recipe has
not been built (sandbox/image/base_image.py), tagged by a hash of the recipe."""

from __future__ import annotations

from typing import Any

from endless_assets.sandbox.image.base_image import PACKAGES, SUITE, base_image_tag
from endless_assets.sandbox.sandbox import Sandbox
from endless_assets.stages.runner import Log


def base_image_version() -> str:
    return base_image_tag()


def ensure_base_image(sandbox: Sandbox, log: Log) -> dict[str, Any]:
    """Make the base image available; what it is, as plain metadata."""
    image = sandbox.base
    log.info(f"base image {image.tag} ({'built' if image.built else 'already present'})")
    return {
        "tag": image.tag,
        "image_id": image.image_id,
        "built_now": image.built,
        "seconds": round(image.seconds, 2),
        "suite": SUITE,
        "packages": ", ".join(PACKAGES),
    }
