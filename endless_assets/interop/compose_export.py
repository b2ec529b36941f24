"""A task's services written back as a compose file, on export (`compose_files`).

`environment/docker-compose.yaml` with the agent's service (`main`, waiting for every service to
be healthy) and one service per `Service`, built from `environment/services/<name>/` (its
Dockerfile FROM the export's base image), with its command, environment, readiness as a
`CMD-SHELL` healthcheck polled every second and its limits; Harbor's docker environment merges it
over its own `main` and runs it as it is. A service's compose name is its first alias (the name
it was imported with), else its own.
"""

from __future__ import annotations

import math
from typing import Any

import yaml

from endless_assets.interop.compose import COMPOSE_NAMES, READY_FLOOR, SERVICES_DIR
from endless_assets.interop.dockerfile import replace_base_images
from endless_assets.models import Service
from endless_assets.sandbox.image.base_image import base_image_tag
from endless_assets.sandbox.image.images import decode_context


def exported(service: Service, base_image: str) -> Service:
    """A service as its export reads back: FROM `base_image`, whole seconds to be ready (at
    least compose.READY_FLOOR, as imports give every service)."""
    return service.model_copy(
        update={
            "dockerfile": replace_base_images(service.dockerfile, {base_image_tag(): base_image}),
            "ready_seconds": float(max(READY_FLOOR, math.ceil(service.ready_seconds))),
        }
    )


def compose_files(
    services: list[Service], base_image: str, agent: str = "main"
) -> dict[str, tuple[str | bytes, bool]]:
    """A task's services as files of its environment/ (see the module docstring)."""
    if not services:
        return {}
    named = {s.name: (s.aliases or [s.name])[0] for s in services}  # its compose name

    def wait(names: list[str]) -> dict[str, Any]:
        return {named[n]: {"condition": "service_healthy"} for n in names}

    compose: dict[str, Any] = {"services": {agent: {"depends_on": wait(list(named))}}}
    files: dict[str, tuple[str | bytes, bool]] = {}
    for service in (exported(s, base_image) for s in services):
        root = f"{SERVICES_DIR}/{service.name}"
        files[f"{root}/Dockerfile"] = (service.dockerfile, False)
        for rel, value in service.context_files.items():
            files[f"{root}/{rel}"] = decode_context(value)
        compose["services"][named[service.name]] = {
            "build": {"context": f"./{root}"},
            **({"depends_on": wait(service.after)} if service.after else {}),
            "command": [escape(c) for c in service.command],
            "environment": {k: escape(v) for k, v in service.environment.items()},
            "healthcheck": {
                "test": ["CMD-SHELL", escape(service.ready)],
                "interval": "1s",
                "timeout": "10s",
                "retries": int(service.ready_seconds),
            },
            "init": True,
            "mem_limit": service.memory,
            "cpus": service.cpus,
            "pids_limit": service.pids,
        }
    text = yaml.safe_dump(compose, sort_keys=False, default_flow_style=False)
    files[COMPOSE_NAMES[0]] = ("# Written by endless: the task's services.\n" + text, False)
    return files


def escape(text: str) -> str:
    return text.replace("$", "$$")  # Compose would interpolate it
