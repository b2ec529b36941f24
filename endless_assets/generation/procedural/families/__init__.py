"""The registry of procedural task families. Add a family by importing it here."""

from endless_assets.generation.procedural.base import Family
from endless_assets.generation.procedural.families.log_errors import LogErrorCounts

ALL_FAMILIES: list[type[Family]] = [
    LogErrorCounts,
]
