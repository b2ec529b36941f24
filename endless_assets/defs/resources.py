"""Resources: the pipeline settings and the Docker sandbox, configurable from the UI.

Every field left unset (None) falls back to its environment variable, then its default, at run
time (settings.py). The launchpad shows these fields under `resources`.
"""

import os
from typing import Any

import dagster as dg
import pydantic

from endless_assets.sandbox.sandbox import Sandbox
from endless_assets.settings import FIELDS, Field, Settings
from endless_assets.store.lake import Lake


class _PipelineSettingsBase(dg.ConfigurableResource):
    """Batch size, seeds, parallelism, generator and solver. Unset fields use ENDLESS_* vars."""

    def resolve(self) -> Settings:
        return Settings.resolve(**{f.name: getattr(self, f.name) for f in FIELDS})

    def lake(self) -> Lake:
        return Lake(self.resolve().run.data_dir)

    def sandbox(self) -> Sandbox:
        return Sandbox(self.resolve().sandbox_config())

    def imported_build_network(self, settings: Settings) -> bool:
        """May RUN steps of imported Dockerfiles reach the network? Only if `build_network` is
        set explicitly (here, or its environment variable), not by its default: a build with a
        network reaches the package registries through a proxy of ours, never this host's
        services or a container (sandbox/image/build_network.py), but whatever else the
        machine's uplink reaches; an imported Dockerfile is someone else's code."""
        field = next(f for f in FIELDS if f.name == "build_network")
        explicit = getattr(self, field.name) is not None or bool(
            os.environ.get(field.env, "").strip()
        )
        return explicit and settings.sandbox.build_network


def _described(f: Field) -> Any:
    default = "empty" if f.default == "" else repr(f.default)
    choices = f" One of {', '.join(f.choices)}." if f.choices else ""
    text = f"{f.help}.{choices} Unset: ${f.env}, else {default}."
    return pydantic.Field(default=None, description=text)


# Every setting of settings.Settings as an optional field (None: unset), with its meaning, its
# environment variable and its default as the launchpad's description: declared once, there.
PipelineSettings = type(
    "PipelineSettings",
    (_PipelineSettingsBase,),
    {
        "__module__": __name__,
        "__doc__": _PipelineSettingsBase.__doc__,
        "__annotations__": {f.name: f.kind | None for f in FIELDS},
        **{f.name: _described(f) for f in FIELDS},
    },
)
